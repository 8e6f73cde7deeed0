//! Datasets the loader tests generate: an `index` Int field and a `blob` Bytes field whose
//! length and content follow from the sample id, spread over several 2 MiB pages.

use std::path::{Path, PathBuf};

use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, from_fn};

/// The blob length of sample `i`: 20..=95 KiB, varying, so pages hold different counts.
pub fn blob_len(i: u64) -> usize {
    20 * 1024 + ((i * 7919) % 76) as usize * 1024
}

/// Byte `k` of sample `i`'s blob; the first 8 bytes are the id.
pub fn blob(i: u64) -> Vec<u8> {
    let mut v: Vec<u8> = (0..blob_len(i))
        .map(|k| (k as u64 ^ i.wrapping_mul(31)) as u8)
        .collect();
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

/// Writes `n` samples to `dir/name.beton`.
pub fn write_blobs(dir: &Path, name: &str, n: u64) -> PathBuf {
    let path = dir.join(format!("{name}.beton"));
    let fields = vec![
        FieldSpec::new("index", FieldType::Int),
        FieldSpec::new("blob", FieldType::Bytes),
    ];
    DatasetWriter::new(&path, fields)
        .unwrap()
        .with_num_workers(2)
        .write(&from_fn(n, |i| {
            Ok(vec![FieldValue::Int(i as i64), FieldValue::Bytes(blob(i))])
        }))
        .unwrap();
    path
}

/// The path of an FFCV 1.0.2 fixture.
pub fn fixture(name: &str) -> String {
    format!(
        "{}/../../tests/fixtures/ffcv-1.0.2/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Runs one epoch, checking every row against the generator, and returns the sample ids
/// in the order they came.
pub fn epoch_ids(loader: &mut ffcv::Loader) -> Vec<u64> {
    let mut ids = Vec::new();
    for batch in loader.iter() {
        let batch = batch.unwrap();
        let index = batch.get::<i64>("index").unwrap();
        let blobs = batch.output("blob").unwrap();
        for (row, &sample) in batch.sample_ids().iter().enumerate() {
            assert_eq!(index[row], sample as i64);
            let value = blobs.value(row);
            assert_eq!(value.len(), blob_len(sample), "sample {sample} length");
            assert_eq!(value, &blob(sample)[..], "sample {sample} content");
        }
        ids.extend_from_slice(batch.sample_ids());
    }
    ids
}
