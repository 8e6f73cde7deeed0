//! Variable-length numeric lists of Parquet, Arrow IPC and TFRecord input as
//! VarArrayFields: a `list<int64>` column of lengths 0 to 7 and a `list<list<float32>>`
//! column of pairs (the first record's empty) are inferred as `var_array` from the schema
//! and read back exactly, while a fixed-size list stays an NDArrayField; TFRecord keeps
//! its inference and takes `var_array` from `--field`; a record whose rows have another
//! shape, or whose elements another dtype, fails naming the file, the record and the
//! column, or is skipped and listed with `--skip-unreadable`.

use crate::cli_tables::{arrow_file, ok, parquet_file};
use crate::cli_tfrecord::{F, example, tfrecord};
use crate::support::ffcv;

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, Int64Builder, ListBuilder};
use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use beton_io::{FieldType, FieldValue, NdArrayArgs, NumpyDtype, Reader, VarArrayArgs};
use serde_json::Value;

/// One generated record.
struct Row {
    tokens: Vec<i64>,
    boxes: Vec<Vec<f32>>,
    emb: [f32; 2],
    label: i64,
}

/// `n` records: record `k` has `k % 8` tokens and `k % 4` boxes of 2 (so record 0's
/// lists are empty), a fixed pair `emb`, a label.
fn rows(n: i64) -> Vec<Row> {
    (0..n)
        .map(|k| Row {
            tokens: (0..k % 8).map(|j| (k << 33) - 5 * j + 1).collect(),
            boxes: (0..k % 4)
                .map(|j| vec![k as f32 + 0.25, -(j as f32) * 1.5])
                .collect(),
            emb: [k as f32 * 0.5, -1e-3],
            label: 10 - k,
        })
        .collect()
}

/// The record batch of `rows`: `tokens` a list of int64, `boxes` a list of lists of
/// float32, `emb` a fixed-size list of 2 float32, `label` int64.
fn batch(rows: &[Row]) -> RecordBatch {
    let mut tokens = ListBuilder::new(Int64Builder::new());
    let mut boxes = ListBuilder::new(ListBuilder::new(Float32Builder::new()));
    let mut emb = FixedSizeListBuilder::new(Float32Builder::new(), 2);
    for r in rows {
        tokens.append_value(r.tokens.iter().copied().map(Some));
        for b in &r.boxes {
            boxes.values().append_value(b.iter().copied().map(Some));
        }
        boxes.append(true);
        emb.values().append_slice(&r.emb);
        emb.append(true);
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("tokens", Arc::new(tokens.finish())),
        ("boxes", Arc::new(boxes.finish())),
        ("emb", Arc::new(emb.finish())),
        (
            "label",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.label))),
        ),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

fn le<T: Copy, const N: usize>(values: &[T], bytes: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| bytes(v)).collect()
}

fn f32s() -> NumpyDtype {
    NumpyDtype::f32()
}

fn i64s() -> NumpyDtype {
    "<i8".parse().unwrap()
}

/// Checks that `out` holds exactly `want`'s records as the inferred fields.
fn check(out: &Path, want: &[&Row]) {
    let r = Reader::open(out).unwrap();
    let types: Vec<&FieldType> = r.fields().iter().map(|f| &f.field_type).collect();
    assert_eq!(
        types,
        [
            &FieldType::VarArray(VarArrayArgs::new(i64s(), vec![]).unwrap()),
            &FieldType::VarArray(VarArrayArgs::new(f32s(), vec![2]).unwrap()),
            &FieldType::NdArray(NdArrayArgs::new(f32s(), vec![2])),
            &FieldType::Int,
        ]
    );
    assert_eq!(r.num_samples(), want.len() as u64);
    for (i, w) in want.iter().enumerate() {
        let i = i as u64;
        let tokens = le(&w.tokens, i64::to_le_bytes);
        let boxes: Vec<f32> = w.boxes.concat();
        assert_eq!(r.value(i, 0).unwrap(), FieldValue::NdArray(tokens), "{i}");
        assert_eq!(
            r.value(i, 1).unwrap(),
            FieldValue::NdArray(le(&boxes, f32::to_le_bytes)),
            "{i}"
        );
        assert_eq!(
            r.value(i, 2).unwrap(),
            FieldValue::NdArray(le(&w.emb, f32::to_le_bytes)),
            "{i}"
        );
        assert_eq!(r.value(i, 3).unwrap(), FieldValue::Int(w.label), "{i}");
    }
}

const INFERRED: &str = "fields: --field tokens=tokens:var_array --field boxes=boxes:var_array \
     --field emb=emb:array --field label=label:int\n";

#[test]
fn variable_size_lists_are_var_arrays_and_fixed_size_lists_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let want = rows(11);
    let parquet = dir.path().join("t.parquet");
    parquet_file(&parquet, &[batch(&want[..6]), batch(&want[6..])], 3);
    let stream = dir.path().join("t.arrow");
    arrow_file(&stream, &[batch(&want[..4]), batch(&want[4..])], true);
    for (format, input) in [("parquet", &parquet), ("arrow", &stream)] {
        let out = dir.path().join(format!("{format}.beton"));
        let stdout = ok(&[
            "write",
            format,
            input.to_str().unwrap(),
            out.to_str().unwrap(),
            "--workers",
            "2",
        ]);
        assert!(stdout.starts_with(INFERRED), "{format}: {stdout}");
        check(&out, &want.iter().collect::<Vec<_>>());
        let inspect = ffcv(["inspect", "--json", out.to_str().unwrap()]).json();
        let types: Vec<&str> = inspect["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            ["VarArrayField", "VarArrayField", "NDArrayField", "IntField"]
        );
    }
    // `--field` gives the kinds too; a fixed-size list read as a var_array has one row
    // per element.
    let out = dir.path().join("given.beton");
    let stdout = ok(&[
        "write",
        "parquet",
        parquet.to_str().unwrap(),
        out.to_str().unwrap(),
        "--field",
        "e=emb:var_array",
        "--field",
        "t=tokens:var_array",
    ]);
    assert!(
        stdout.starts_with("fields: --field e=emb:var_array --field t=tokens:var_array\n"),
        "{stdout}"
    );
    let r = Reader::open(&out).unwrap();
    assert_eq!(
        r.fields()[0].field_type,
        FieldType::VarArray(VarArrayArgs::new(f32s(), vec![]).unwrap())
    );
    assert_eq!(
        r.value(7, 1).unwrap(),
        FieldValue::NdArray(le(&want[7].tokens, i64::to_le_bytes))
    );
}

#[test]
fn a_row_shape_mismatch_fails_naming_record_and_column_or_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut want = rows(6);
    // Record 4's boxes are triples.
    want[4].boxes = vec![vec![1.0, 2.0, 3.0]; 2];
    let path = dir.path().join("bad.parquet");
    parquet_file(&path, &[batch(&want)], 4);
    let out = dir.path().join("out.beton");
    let p = path.to_str().unwrap();
    let run = ffcv(["write", "parquet", p, out.to_str().unwrap()]);
    run.assert_runtime_error(&format!(
        "{p}: row 4: field `boxes` (from `boxes`): rows of shape [3] (a list of shape [2, 3]), \
         the field's rows are [2]"
    ));
    assert!(!out.exists());
    let stdout = ok(&[
        "write",
        "parquet",
        p,
        out.to_str().unwrap(),
        "--skip-unreadable",
    ]);
    assert!(
        stdout.contains("skipped 1 unreadable records or file tails:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("row 4: field `boxes` (from `boxes`): rows of shape [3]"),
        "{stdout}"
    );
    let kept: Vec<&Row> = want
        .iter()
        .enumerate()
        .filter_map(|(i, r)| (i != 4).then_some(r))
        .collect();
    check(&out, &kept);
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out.beton.skipped.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["records"], 6);
    assert_eq!(report["skipped"].as_array().unwrap().len(), 1);
    assert_eq!(report["skipped"][0]["record"], 4);
    assert_eq!(report["skipped"][0]["file"], p);
    // Rows of two lengths within one record are no array at all: the record fails
    // naming the column.
    want[4].boxes = vec![vec![1.0, 2.0], vec![3.0]];
    let ragged = dir.path().join("ragged.arrow");
    arrow_file(&ragged, &[batch(&want)], true);
    let r = ragged.to_str().unwrap();
    ffcv(["write", "arrow", r, out.to_str().unwrap()]).assert_runtime_error(&format!(
        "{r}: row 4: column `boxes`: nested lists of shapes [2] and [1] are not an array"
    ));
}

#[test]
fn tfrecord_lists_keep_their_inference_and_are_var_arrays_with_field() {
    let dir = tempfile::tempdir().unwrap();
    let want = rows(9);
    let mut records: Vec<Vec<u8>> = want
        .iter()
        .map(|r| {
            example(&[
                ("ids", F::Ints(r.tokens.clone())),
                ("xy", F::Floats(r.boxes.concat())),
                ("label", F::Ints(vec![r.label])),
            ])
        })
        .collect();
    let path = dir.path().join("train.tfrecord");
    std::fs::write(&path, tfrecord(&records)).unwrap();
    let p = path.to_str().unwrap();
    let out = dir.path().join("out.beton");
    // Inferred as before: record 0's empty lists are JSON.
    let stdout = ok(&["write", "tfrecord", p, out.to_str().unwrap()]);
    assert!(
        stdout.starts_with(
            "fields: --field ids=ids:json --field label=label:int --field xy=xy:json\n"
        ),
        "{stdout}"
    );
    let fields = [
        "--field",
        "ids=ids:var_array",
        "--field",
        "xy=xy:var_array",
        "--field",
        "label=label:int",
    ];
    let mut args = vec!["write", "tfrecord", p, out.to_str().unwrap()];
    args.extend(fields);
    ok(&args);
    let r = Reader::open(&out).unwrap();
    assert_eq!(
        r.fields()[0].field_type,
        FieldType::VarArray(VarArrayArgs::new(i64s(), vec![]).unwrap())
    );
    // A TFRecord feature is one flat list: its rows are its elements.
    assert_eq!(
        r.fields()[1].field_type,
        FieldType::VarArray(VarArrayArgs::new(f32s(), vec![]).unwrap())
    );
    for (i, w) in want.iter().enumerate() {
        let i = i as u64;
        assert_eq!(
            r.value(i, 0).unwrap(),
            FieldValue::NdArray(le(&w.tokens, i64::to_le_bytes)),
            "{i}"
        );
        assert_eq!(
            r.value(i, 1).unwrap(),
            FieldValue::NdArray(le(&w.boxes.concat(), f32::to_le_bytes)),
            "{i}"
        );
        assert_eq!(r.value(i, 2).unwrap(), FieldValue::Int(w.label));
    }
    // Record 5's ids are floats: an error naming the record and the column, or skipped.
    records[5] = example(&[
        ("ids", F::Floats(vec![1.5])),
        ("xy", F::Floats(vec![])),
        ("label", F::Ints(vec![0])),
    ]);
    std::fs::write(&path, tfrecord(&records)).unwrap();
    let mut args = vec!["write", "tfrecord", p, out.to_str().unwrap()];
    args.extend(fields);
    let run = ffcv(&args);
    run.assert_runtime_error(&format!("{p}: record 5 (offset "));
    assert!(
        run.stderr
            .contains("field `ids` (from `ids`): a list of <f4 elements, the field's are <i8"),
        "{}",
        run.stderr
    );
    args.push("--skip-unreadable");
    let stdout = ok(&args);
    assert!(
        stdout.contains("skipped 1 unreadable records or file tails:"),
        "{stdout}"
    );
    let r = Reader::open(&out).unwrap();
    assert_eq!(r.num_samples(), 8);
    assert_eq!(
        r.value(5, 0).unwrap(),
        FieldValue::NdArray(le(&want[6].tokens, i64::to_le_bytes))
    );
}
