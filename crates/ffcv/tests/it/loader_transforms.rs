//! Transforms after a decoder: pipeline-jit operations run compiled or interpreted with
//! identical results, and random ones give the same batches whatever the thread count.

use crate::loader_support;

use ffcv::decode::NdArrayDecoder;
use ffcv::format::{
    DatasetWriter, FieldSpec, FieldType, FieldValue, NdArrayArgs, NumpyDtype, from_fn,
};
use ffcv::jit::ops::{Cutout, RandomHorizontalFlip, Scale};
use ffcv::{Loader, PipelineSpec};
use loader_support::fixture;

#[test]
fn scale_after_ndarray_decoder_matches_the_arithmetic_compiled_and_interpreted() {
    let run = |compile: bool| {
        let mut loader = Loader::builder(fixture("bytes_ndarray.beton"))
            .batch_size(7)
            .drop_last(false)
            .compile(compile)
            .num_workers(2)
            .pipeline(
                "vec",
                PipelineSpec::new(NdArrayDecoder).then(Scale { mul: 2.0, add: 1.0 }),
            )
            .build()
            .unwrap();
        let plain = Loader::builder(fixture("bytes_ndarray.beton"))
            .batch_size(7)
            .drop_last(false)
            .build()
            .unwrap();
        let info = loader
            .outputs()
            .iter()
            .find(|o| o.name == "vec")
            .cloned()
            .unwrap();
        assert_eq!(info.shape, vec![3, 4]);
        assert_eq!(info.dtype.descr(), "<f4");
        let mut plain = plain;
        let mut out = Vec::new();
        for (b, p) in loader.iter().zip(plain.iter()) {
            let (b, p) = (b.unwrap(), p.unwrap());
            let got = b.get::<f32>("vec").unwrap();
            let src = p.get::<f32>("vec").unwrap();
            assert_eq!(got.shape(), &[b.len(), 3, 4]);
            for (g, s) in got.iter().zip(src.iter()) {
                assert_eq!(g.to_bits(), (s * 2.0 + 1.0).to_bits());
            }
            out.extend(got.iter().map(|x| x.to_bits()));
        }
        out
    };
    assert_eq!(run(true), run(false));
}

#[test]
fn random_augmentations_do_not_depend_on_threads_or_the_compiler() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("images.beton");
    let args = NdArrayArgs::new(NumpyDtype::u8(), vec![6, 5, 3]);
    DatasetWriter::new(&path, vec![FieldSpec::new("img", FieldType::NdArray(args))])
        .unwrap()
        .write(&from_fn(64, |i| {
            Ok(vec![FieldValue::NdArray(
                (0..90u64).map(|k| (k * 3 + i * 7) as u8).collect(),
            )])
        }))
        .unwrap();
    let run = |workers: i64, compile: bool, seed: u64| {
        let mut loader = Loader::builder(&path)
            .batch_size(16)
            .num_workers(workers)
            .compile(compile)
            .seed(seed)
            .pipeline(
                "img",
                PipelineSpec::new(NdArrayDecoder)
                    .then(RandomHorizontalFlip(0.5))
                    .then(Cutout {
                        size: 2,
                        fill: vec![0.0],
                    }),
            )
            .build()
            .unwrap();
        let mut all = Vec::new();
        for _ in 0..2 {
            for b in &mut loader {
                all.extend(b.unwrap().get::<u8>("img").unwrap().to_vec());
            }
        }
        all
    };
    let one = run(1, true, 7);
    assert_eq!(one.len(), 2 * 64 * 90);
    assert_eq!(run(4, true, 7), one);
    assert_eq!(run(2, false, 7), one);
    assert_ne!(
        run(1, true, 8),
        one,
        "another seed gives other augmentations"
    );
}
