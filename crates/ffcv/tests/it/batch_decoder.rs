//! `ffcv::decode::BatchDecoder`, a decoder over samples its caller located (the native
//! half of `ffcv_rs`'s decoders' `generate_code()`): with the loader's seed and epoch its
//! rows are the loader's, for every built-in decoder kind, on one thread or several, in
//! any sample order; a failing or panicking sample is an error naming it.

use std::path::Path;
use std::sync::Arc;

use ffcv::decode::{
    BatchDecoder, BytesDecoder, CenterCropRGBImageDecoder, FloatDecoder, IntDecoder,
    NdArrayDecoder, RandomResizedCropRGBImageDecoder, StoredSample,
};
use ffcv::format::Reader;
use ffcv::{Decoder, Loader, PipelineSpec};

use crate::loader_decode_errors::{FailOn, fixture};

/// The loader's rows of `field` over one sequential epoch of `path`, and the row size.
fn loaded(path: &Path, field: &str, decoder: Arc<dyn Decoder>, seed: u64) -> (Vec<u8>, usize) {
    let reader = Reader::open(path).unwrap();
    let mut builder = Loader::builder(path)
        .batch_size(7)
        .drop_last(false)
        .seed(seed)
        .num_workers(2);
    for f in reader.fields() {
        if f.name != field {
            builder = builder.disable(&f.name);
        }
    }
    let mut loader = builder
        .pipeline(field, PipelineSpec::from_arc(decoder))
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for batch in loader.iter() {
        rows.extend_from_slice(batch.unwrap().output(field).unwrap().bytes());
    }
    let row = rows.len() / reader.num_samples() as usize;
    (rows, row)
}

/// `ids` of `field` as [`StoredSample`]s, located by the reader as the loader locates them.
fn stored<'r>(reader: &'r Reader, field: &str, ids: &[u64]) -> Vec<StoredSample<'r>> {
    let f = reader.field_index(field).unwrap();
    ids.iter()
        .map(|&sample| StoredSample {
            sample,
            data: reader.field_data(sample, f).unwrap().unwrap_or(&[]),
            metadata: reader.metadata_bytes(sample, f).unwrap(),
        })
        .collect()
}

fn check(path: &Path, field: &str, decoder: Arc<dyn Decoder>) {
    let seed = 23;
    let (want, row) = loaded(path, field, Arc::clone(&decoder), seed);
    let reader = Reader::open(path).unwrap();
    let n = reader.num_samples();
    // Reversed, so that rows are not written in file order.
    let ids: Vec<u64> = (0..n).rev().collect();
    let samples = stored(&reader, field, &ids);
    for threads in [1, 3] {
        let batch = BatchDecoder::from_arc(Arc::clone(&decoder), row, threads).unwrap();
        assert_eq!(batch.threads(), threads);
        let mut got = vec![0xAB; row * n as usize];
        batch.run(&samples, &mut got, seed, 0).unwrap();
        for (k, &sample) in ids.iter().enumerate() {
            let s = sample as usize;
            assert_eq!(
                got[k * row..(k + 1) * row],
                want[s * row..(s + 1) * row],
                "{}: {field}, sample {sample}, {threads} threads",
                path.display()
            );
        }
    }
}

#[test]
fn its_rows_are_the_loaders_for_every_built_in_decoder_kind() {
    let fx = |name: &str| std::path::PathBuf::from(fixture(name));
    check(&fx("scalars.beton"), "index", Arc::new(IntDecoder));
    check(&fx("scalars.beton"), "value", Arc::new(FloatDecoder));
    check(&fx("bytes_ndarray.beton"), "blob", Arc::new(BytesDecoder));
    check(&fx("bytes_ndarray.beton"), "mat", Arc::new(NdArrayDecoder));
    check(&fx("multipage.beton"), "blob", Arc::new(BytesDecoder));
    let dir = tempfile::tempdir().unwrap();
    for path in [
        crate::views::photos(dir.path()),
        crate::views::generated(dir.path()),
        fx("images_raw.beton"),
    ] {
        check(
            &path,
            "image",
            Arc::new(CenterCropRGBImageDecoder::new((24, 20), 0.875)),
        );
        // Random crops: the same draws as the loader's, from (seed, epoch, sample).
        check(
            &path,
            "image",
            Arc::new(RandomResizedCropRGBImageDecoder::new((32, 32)).scale(0.25, 1.0)),
        );
    }
}

#[test]
fn another_seed_or_epoch_draws_other_crops() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::views::photos(dir.path());
    let reader = Reader::open(&path).unwrap();
    let samples = stored(&reader, "image", &[0, 1, 2, 3]);
    let batch = BatchDecoder::new(RandomResizedCropRGBImageDecoder::new((16, 16)), 768, 2).unwrap();
    let run = |seed, epoch| {
        let mut out = vec![0; 4 * 768];
        batch.run(&samples, &mut out, seed, epoch).unwrap();
        out
    };
    assert_eq!(run(1, 0), run(1, 0));
    assert_ne!(run(1, 0), run(2, 0));
    assert_ne!(run(1, 0), run(1, 1));
}

#[test]
fn a_failing_or_panicking_sample_is_an_error_naming_it() {
    let reader = Reader::open(fixture("scalars.beton")).unwrap();
    let samples = stored(&reader, "index", &[40, 41, 42, 43, 44, 45]);
    for panic in [false, true] {
        for threads in [1, 2] {
            let batch = BatchDecoder::new(FailOn { sample: 43, panic }, 8, threads).unwrap();
            let mut out = vec![0; 6 * 8];
            let err = batch.run(&samples, &mut out, 0, 0).unwrap_err();
            assert_eq!(err.sample, 43);
            assert_eq!(err.decoder, "FailOn");
            let text = err.to_string();
            assert!(text.starts_with("sample 43: FailOn failed: "), "{text}");
            if panic {
                assert!(text.contains("panicked"), "{text}");
            } else {
                assert!(text.contains("is corrupt"), "{text}");
            }
            // The samples before it in the batch were decoded.
            assert_eq!(i64::from_le_bytes(out[..8].try_into().unwrap()), 40);
        }
    }
}

#[test]
fn an_output_of_the_wrong_size_is_refused_before_any_decode() {
    let reader = Reader::open(fixture("scalars.beton")).unwrap();
    let samples = stored(&reader, "index", &[0, 1, 2]);
    let batch = BatchDecoder::new(IntDecoder, 8, 1).unwrap();
    let mut out = vec![0xEE; 3 * 8 - 1];
    let err = batch.run(&samples, &mut out, 0, 0).unwrap_err();
    assert!(err.to_string().contains("do not fill"), "{err}");
    assert!(out.iter().all(|&b| b == 0xEE));
}
