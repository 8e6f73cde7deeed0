//! `ffcv dump` and `ffcv inspect` print a `FixedBytesField` (ffcv-rs's type id 128): dump
//! gives each sample's length, sha256 and (with `--raw`) base64 bytes; inspect names the
//! type, its id and its length argument.

use crate::support;

use base64::Engine as _;
use beton_io::{DatasetWriter, FieldSpec, FieldType, FieldValue};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::ffcv;

fn digest(i: u64) -> Vec<u8> {
    (0..6).map(|k| (i * 13 + k * 5) as u8).collect()
}

fn write(path: &std::path::Path) {
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new("digest", FieldType::FixedBytes(6)),
    ];
    let samples: Vec<Vec<FieldValue>> = (0..12)
        .map(|i| vec![FieldValue::Int(i as i64), FieldValue::Bytes(digest(i))])
        .collect();
    DatasetWriter::new(path, fields)
        .unwrap()
        .write(&samples)
        .unwrap();
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn dump_prints_fixed_bytes_like_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixed.beton");
    write(&path);
    let run = ffcv(["dump".as_ref(), "--raw".as_ref(), path.as_os_str()]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let lines = run.json_lines();
    assert_eq!(lines.len(), 12);
    for (i, line) in lines.iter().enumerate() {
        let d = digest(i as u64);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&d);
        assert_eq!(
            line,
            &json!({"sample": i, "label": i, "digest": {"len": 6, "sha256": hex(&d), "b64": b64}})
        );
    }
}

#[test]
fn inspect_names_the_type_and_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixed.beton");
    write(&path);
    let got = ffcv(["inspect".as_ref(), "--json".as_ref(), path.as_os_str()]).json();
    let field = &got["fields"][1];
    assert_eq!(field["name"], "digest");
    assert_eq!(field["type"], "FixedBytesField");
    assert_eq!(field["type_id"], 128);
    assert_eq!(field["len"], 6);
    assert_eq!(field["metadata_itemsize"], 8);
    assert_eq!(got["fields"][0].get("len"), None::<&Value>);

    let table = ffcv(["inspect".as_ref(), path.as_os_str()]);
    assert_eq!(table.code, Some(0), "{}", table.stderr);
    let row = table
        .stdout
        .lines()
        .find(|l| l.contains("digest"))
        .expect("a row for the field");
    assert!(row.contains("FixedBytesField (128)"), "{row}");
    assert!(row.trim_end().ends_with("len 6"), "{row}");
}
