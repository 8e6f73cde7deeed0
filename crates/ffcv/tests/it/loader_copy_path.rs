//! Copying decoders (`Decoder::copy_rule`) are filled batch-wide by the loader, without a
//! kernel call per sample. Their batches must equal, byte for byte, what the same decoders
//! give through the per-sample path; and a sample the rule does not cover must go through
//! `decode`, whose error names it.

use std::sync::Arc;

use ffcv::decode::{
    CopyRule, DecoderOutput, FieldInfo, RawBytesDecoder, SampleInput, default_decoder,
};
use ffcv::format::{FieldMetadata, FieldType, Reader};
use ffcv::{Decoder, Error, Loader, Order, OutputKind, PipelineSpec};

fn fixture(name: &str) -> String {
    format!(
        "{}/../../tests/fixtures/ffcv-1.0.2/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Wraps a decoder and hides its copy rule, so the loader runs it per sample through the
/// field's executor.
struct PerSample(Arc<dyn Decoder>);

impl Decoder for PerSample {
    fn name(&self) -> String {
        self.0.name()
    }

    fn declare(&self, field: &FieldInfo<'_>) -> Result<DecoderOutput, ffcv::ExtensionError> {
        self.0.declare(field)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        s: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        self.0.decode(input, out, s)
    }
}

/// Every output of every batch of one sequential epoch: (sample ids, per output (bytes,
/// lengths)).
type Epoch = Vec<(Vec<u64>, Vec<(Vec<u8>, Option<Vec<u64>>)>)>;

fn epoch(path: &str, per_sample: bool, os_cache: bool, batch_size: usize) -> Epoch {
    let reader = Reader::open(path).unwrap();
    let mut b = Loader::builder(path)
        .batch_size(batch_size)
        .num_workers(2)
        .os_cache(os_cache)
        .drop_last(false)
        .order(Order::Sequential);
    for field in reader.fields() {
        let decoder: Arc<dyn Decoder> = match field.field_type {
            FieldType::RgbImage => Arc::new(RawBytesDecoder),
            ref t => default_decoder(t).unwrap(),
        };
        assert!(decoder.copy_rule().is_some(), "{} copies", decoder.name());
        let decoder: Arc<dyn Decoder> = if per_sample {
            Arc::new(PerSample(decoder))
        } else {
            decoder
        };
        b = b.pipeline(field.name.clone(), PipelineSpec::from_arc(decoder));
    }
    let mut loader = b.build().unwrap();
    let mut out = Vec::new();
    for batch in loader.iter() {
        let batch = batch.unwrap();
        let outputs = batch
            .outputs()
            .iter()
            .map(|o| {
                let v = batch.output(&o.name).unwrap();
                (v.bytes().to_vec(), v.lengths().map(<[u64]>::to_vec))
            })
            .collect();
        out.push((batch.sample_ids().to_vec(), outputs));
    }
    out
}

#[test]
fn copied_batches_equal_the_per_sample_path() {
    for name in [
        "scalars.beton",
        "bytes_ndarray.beton",
        "json.beton",
        "images_raw.beton",
        "multipage.beton",
    ] {
        let path = fixture(name);
        let samples = Reader::open(&path).unwrap().num_samples() as usize;
        for os_cache in [true, false] {
            // 7 leaves a short last batch; 3 makes later batches reuse rows that held
            // longer samples, so padding must be rewritten.
            for batch_size in [7, 3] {
                let copied = epoch(&path, false, os_cache, batch_size);
                let per_sample = epoch(&path, true, os_cache, batch_size);
                assert_eq!(copied.len(), samples.div_ceil(batch_size), "{name}");
                assert!(
                    copied == per_sample,
                    "{name}: os_cache {os_cache}, batch {batch_size}: copied batches differ"
                );
            }
        }
    }
}

#[test]
fn padded_rows_hold_the_stored_bytes_then_zeros() {
    let path = fixture("bytes_ndarray.beton");
    let reader = Reader::open(&path).unwrap();
    let blob = reader.field_index("blob").unwrap();
    for (ids, outputs) in epoch(&path, false, false, 5) {
        let (bytes, lengths) = &outputs[blob];
        let lengths = lengths.as_ref().unwrap();
        let width = bytes.len() / ids.len();
        for (k, &sample) in ids.iter().enumerate() {
            let stored = reader.field_data(sample, blob).unwrap().unwrap();
            let row = &bytes[k * width..(k + 1) * width];
            assert_eq!(lengths[k], stored.len() as u64, "sample {sample}");
            assert_eq!(&row[..stored.len()], stored, "sample {sample}");
            assert!(
                row[stored.len()..].iter().all(|&b| b == 0),
                "sample {sample}"
            );
        }
    }
}

/// Copies blobs into rows one byte narrower than the longest: the longest samples are not
/// covered by the rule and reach `decode`, which refuses them.
struct NarrowBlob {
    width: usize,
}

impl Decoder for NarrowBlob {
    fn name(&self) -> String {
        "NarrowBlob".into()
    }

    fn declare(&self, _: &FieldInfo<'_>) -> Result<DecoderOutput, ffcv::ExtensionError> {
        Ok(DecoderOutput::new(
            vec![self.width],
            ffcv::format::NumpyDtype::u8(),
            OutputKind::Bytes,
        ))
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        _: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        Err(format!("{} bytes do not fit", input.data.len()).into())
    }

    fn copy_rule(&self) -> Option<CopyRule> {
        Some(CopyRule::Padded)
    }
}

#[test]
fn uncovered_samples_go_through_decode_and_name_the_sample() {
    let path = fixture("bytes_ndarray.beton");
    let reader = Reader::open(&path).unwrap();
    let blob = reader.field_index("blob").unwrap();
    let sizes: Vec<u64> = (0..reader.num_samples())
        .map(|s| match reader.metadata(s, blob).unwrap() {
            FieldMetadata::Bytes { size, .. } => size,
            other => panic!("{other:?}"),
        })
        .collect();
    let max = *sizes.iter().max().unwrap();
    let longest: Vec<u64> = (0..reader.num_samples())
        .filter(|&s| sizes[s as usize] == max)
        .collect();
    for os_cache in [true, false] {
        let mut loader = Loader::builder(&path)
            .batch_size(64)
            .num_workers(2)
            .os_cache(os_cache)
            .order(Order::Sequential)
            .pipeline(
                "blob",
                PipelineSpec::new(NarrowBlob {
                    width: max as usize - 1,
                }),
            )
            .build()
            .unwrap();
        let results: Vec<_> = loader.iter().collect();
        assert_eq!(results.len(), 1);
        match &results[0] {
            Err(Error::Decode {
                field,
                sample,
                decoder,
                message,
                ..
            }) => {
                assert_eq!(field, "blob");
                assert_eq!(decoder, "NarrowBlob");
                assert!(longest.contains(sample), "{sample} is not a longest sample");
                assert_eq!(message, &format!("{max} bytes do not fit"));
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
    }
}
