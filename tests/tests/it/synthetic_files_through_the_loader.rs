//! Files written from `ffcv write synthetic`'s generator (beton-io's writer, several threads)
//! load through the ffcv `Loader` with exactly the generated values: every kind the default
//! decoders handle, both caches, a random order, each sample once.

use std::collections::BTreeSet;
use std::path::Path;

use beton_io::{DatasetWriter, FieldValue, NumpyDtype, from_fn};
use ffcv::{Loader, Order};
use ffcv_cli::synthetic::{Kind, Spec};

const SAMPLES: u64 = 200;

fn write(path: &Path, spec: &Spec) {
    DatasetWriter::new(path, spec.fields().unwrap())
        .unwrap()
        .with_page_size(2 << 20)
        .unwrap()
        .with_num_workers(2)
        .with_chunk_size(7)
        .write(&from_fn(SAMPLES, |i| Ok(spec.sample(i))))
        .unwrap();
}

fn specs() -> Vec<(&'static str, Spec)> {
    let dtype = |descr: &str| descr.parse::<NumpyDtype>().unwrap();
    vec![
        (
            "scalars",
            Spec {
                seed: 4,
                ..Spec::new(Kind::Scalars)
            },
        ),
        (
            "bytes",
            Spec {
                seed: 4,
                mean_size: 20 << 10,
                ..Spec::new(Kind::Bytes)
            },
        ),
        (
            "ndarray-f2",
            Spec {
                dtype: dtype("<f2"),
                shape: vec![2, 3],
                ..Spec::new(Kind::Ndarray)
            },
        ),
        (
            "ndarray-i4",
            Spec {
                dtype: dtype("<i4"),
                shape: vec![5],
                ..Spec::new(Kind::Ndarray)
            },
        ),
        (
            "ndarray-u1",
            Spec {
                dtype: dtype("|u1"),
                shape: vec![7, 1, 3],
                ..Spec::new(Kind::Ndarray)
            },
        ),
        (
            "cifar-raw",
            Spec {
                seed: 4,
                ..Spec::new(Kind::CifarRaw)
            },
        ),
    ]
}

#[test]
fn every_sample_comes_back_with_its_generated_values() {
    let dir = tempfile::tempdir().unwrap();
    for (name, spec) in specs() {
        let path = dir.path().join(format!("{name}.beton"));
        write(&path, &spec);
        let fields = spec.fields().unwrap();
        for os_cache in [true, false] {
            let at = format!("{name}, os_cache={os_cache}");
            let mut loader = Loader::builder(&path)
                .batch_size(16)
                .num_workers(2)
                .order(Order::Random)
                .seed(1)
                .drop_last(false)
                .os_cache(os_cache)
                .build()
                .unwrap_or_else(|err| panic!("{at}: {err}"));
            let mut seen = BTreeSet::new();
            for batch in loader.iter() {
                let batch = batch.unwrap_or_else(|err| panic!("{at}: {err}"));
                for (row, &sample) in batch.sample_ids().iter().enumerate() {
                    assert!(seen.insert(sample), "{at}: sample {sample} twice");
                    for (field, value) in fields.iter().zip(spec.sample(sample)) {
                        let at = format!("{at}, sample {sample}, field {}", field.name);
                        match value {
                            FieldValue::Int(v) => {
                                assert_eq!(
                                    batch.get::<i64>(&field.name).unwrap().row(row),
                                    [v],
                                    "{at}"
                                );
                            }
                            FieldValue::Float(x) => {
                                let got = batch.get::<f64>(&field.name).unwrap().row(row)[0];
                                assert_eq!(got.to_bits(), x.to_bits(), "{at}");
                            }
                            FieldValue::Bytes(bytes) => {
                                let output = batch.output(&field.name).unwrap();
                                assert!(output.value(row) == bytes.as_slice(), "{at}");
                            }
                            FieldValue::NdArray(bytes) => {
                                let output = batch.output(&field.name).unwrap();
                                assert!(output.row(row) == bytes.as_slice(), "{at}");
                            }
                            other => panic!("{at}: unexpected {other:?}"),
                        }
                    }
                }
            }
            assert_eq!(seen.len() as u64, SAMPLES, "{at}: every sample once");
        }
    }
}
