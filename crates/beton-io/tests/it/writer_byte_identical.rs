//! With one worker, DatasetWriter reproduces FFCV 1.0.2's files byte for byte.
//!
//! Each fixture's samples are read back with the Reader (the file holds every value that was
//! written) and written again with the fixture's settings (2 MiB pages, one worker, chunks of
//! 100); the whole new file must hash to the fixture's `file_sha256`.

use beton_io::{DatasetWriter, FieldSpec, Reader};
use sha2::{Digest, Sha256};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/ffcv-1.0.2"
);

fn rewrite_matches(name: &str) {
    let original = format!("{FIXTURES}/{name}.beton");
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/{name}.expected.json")).unwrap(),
    )
    .unwrap();
    let reader = Reader::open(&original).unwrap();
    let samples: Vec<_> = (0..reader.num_samples())
        .map(|i| reader.read_sample(i).unwrap())
        .collect();
    let fields = reader
        .fields()
        .iter()
        .map(|f| FieldSpec::new(f.name.clone(), f.field_type.clone()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(format!("{name}.beton"));
    let summary = DatasetWriter::new(&out, fields)
        .unwrap()
        .with_page_size(2 << 20)
        .unwrap()
        .with_num_workers(1)
        .with_chunk_size(100)
        .write(&samples)
        .unwrap();
    let written = std::fs::read(&out).unwrap();
    assert_eq!(summary.file_size, written.len() as u64);
    let digest: String = Sha256::digest(&written)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(digest, expected["file_sha256"].as_str().unwrap(), "{name}");
    assert!(written == std::fs::read(&original).unwrap());
}

#[test]
fn scalars_is_byte_identical() {
    rewrite_matches("scalars");
}

#[test]
fn bytes_ndarray_is_byte_identical_including_the_tied_zero_length_row() {
    rewrite_matches("bytes_ndarray");
}

#[test]
fn multipage_is_byte_identical() {
    rewrite_matches("multipage");
}

#[test]
fn page_retry_is_byte_identical_including_the_orphan_copy() {
    rewrite_matches("page_retry");
}

#[test]
fn json_is_byte_identical() {
    rewrite_matches("json");
}

#[test]
fn images_raw_is_byte_identical() {
    rewrite_matches("images_raw");
}

#[test]
fn images_jpg_is_byte_identical_given_the_stored_jpegs() {
    rewrite_matches("images_jpg");
}
