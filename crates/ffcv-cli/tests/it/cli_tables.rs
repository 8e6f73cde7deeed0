//! `ffcv write parquet` and `ffcv write arrow`: Parquet files (several row groups,
//! snappy) and Arrow IPC files (stream and file format) made here, with image structs
//! `{bytes, path}` of generated PNGs, ints, floats, strings, numeric lists (a list type
//! inferred as a VarArrayField, a fixed-size list as an NDArrayField) and lists of
//! strings, convert to a file holding exactly their records, fields and values; the
//! photographs as a binary column decode as PIL does; a corrupt record fails naming the
//! file and the row, or is skipped and listed; a file that is not Parquet or Arrow is a
//! one-line error; `--shards N --shard-index I` writes shard I's rows, the bytes of the
//! all-N write's shard I.

use crate::support;

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{
    FixedSizeListBuilder, Float32Builder, Int32Builder, ListBuilder, StringBuilder,
};
use arrow_array::{
    ArrayRef, BinaryArray, Float64Array, Int64Array, RecordBatch, StringArray, StructArray,
};
use arrow_schema::{DataType, Field, Fields};
use beton_io::{FieldType, FieldValue, Reader, VarArrayArgs};
use ffcv::image::RgbImage;
use ffcv_testkit::image_variants::{PHOTO_NAMES, PHOTOS};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::ffcv;

pub(crate) fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A `w x h` image whose pixels follow from `k`.
pub(crate) fn picture(w: u32, h: u32, k: u32) -> RgbImage {
    let pixels = (0..w * h * 3)
        .map(|i| ((i / 3 % w) * 5 + (i / 3 / w) * 11 + (i % 3) * 70 + k * 37) as u8)
        .collect();
    RgbImage::new(w, h, pixels).unwrap()
}

pub(crate) fn png(image: &RgbImage) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, image.width(), image.height());
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(image.pixels()).unwrap();
    }
    out
}

pub(crate) fn ok(args: &[&str]) -> String {
    let run = ffcv(args.iter().map(std::ffi::OsString::from));
    assert_eq!(
        run.code,
        Some(0),
        "stdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
    run.stdout
}

pub(crate) fn dump(path: &Path) -> Vec<Value> {
    ffcv(["dump", path.to_str().unwrap()]).json_lines()
}

/// One generated record.
struct Row {
    image: RgbImage,
    label: i64,
    score: f64,
    caption: String,
    ids: [i32; 3],
    emb: [f32; 2],
    tags: Vec<String>,
}

fn rows(n: u32) -> Vec<Row> {
    (0..n)
        .map(|k| Row {
            image: picture(9 + k, 6 + 2 * k, k),
            label: i64::from(k) * 1_000_000_007 - 3,
            score: 0.1 + f64::from(k) / 3.0,
            caption: format!("caption {k} \u{e9}"),
            ids: [k as i32, -(k as i32), 7],
            emb: [k as f32 * 0.5, -1e-3],
            tags: (0..k % 3).map(|t| format!("t{t}")).collect(),
        })
        .collect()
}

/// The record batch of `rows`, with `datasets`' column types: `image` a struct
/// `{bytes: binary, path: string}`, `ids` a list of int32, `emb` a fixed-size list.
fn batch(rows: &[Row], bad_image: Option<usize>) -> RecordBatch {
    let image_fields = Fields::from(vec![
        Field::new("bytes", DataType::Binary, true),
        Field::new("path", DataType::Utf8, true),
    ]);
    let bytes: Vec<Vec<u8>> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if Some(i) == bad_image {
                b"\x89PNG\r\n\x1a\nnot really".to_vec()
            } else {
                png(&r.image)
            }
        })
        .collect();
    let image = StructArray::new(
        image_fields.clone(),
        vec![
            Arc::new(BinaryArray::from_iter_values(bytes.iter())) as ArrayRef,
            Arc::new(StringArray::from_iter_values(
                (0..rows.len()).map(|i| format!("img{i}.png")),
            )),
        ],
        None,
    );
    let mut ids = ListBuilder::new(Int32Builder::new());
    let mut emb = FixedSizeListBuilder::new(Float32Builder::new(), 2);
    let mut tags = ListBuilder::new(StringBuilder::new());
    for r in rows {
        ids.append_value(r.ids.map(Some));
        emb.values().append_slice(&r.emb);
        emb.append(true);
        tags.append_value(r.tags.iter().map(Some));
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("image", Arc::new(image)),
        (
            "label",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.label))),
        ),
        (
            "score",
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.score))),
        ),
        (
            "caption",
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.caption.clone()),
            )),
        ),
        ("ids", Arc::new(ids.finish())),
        ("emb", Arc::new(emb.finish())),
        ("tags", Arc::new(tags.finish())),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

/// Writes `batches` as one Parquet file (snappy, row groups of `group_rows`).
pub(crate) fn parquet_file(path: &Path, batches: &[RecordBatch], group_rows: usize) {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(group_rows))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batches[0].schema(), Some(props)).unwrap();
    for b in batches {
        writer.write(b).unwrap();
    }
    writer.close().unwrap();
}

/// Writes `batches` as an Arrow IPC stream (`stream`) or file.
pub(crate) fn arrow_file(path: &Path, batches: &[RecordBatch], stream: bool) {
    let file = std::fs::File::create(path).unwrap();
    let schema = batches[0].schema();
    if stream {
        let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &schema).unwrap();
        batches.iter().for_each(|b| w.write(b).unwrap());
        w.finish().unwrap();
    } else {
        let mut w = arrow_ipc::writer::FileWriter::try_new(file, &schema).unwrap();
        batches.iter().for_each(|b| w.write(b).unwrap());
        w.finish().unwrap();
    }
}

const INFERRED: &str = "fields: --field image=image:image --field label=label:int --field \
     score=score:float --field caption=caption:bytes --field ids=ids:var_array \
     --field emb=emb:array --field tags=tags:json\n";

/// Checks that `out` holds exactly `want`, with the inferred fields.
fn check(out: &Path, want: &[Row]) {
    let dumped = dump(out);
    assert_eq!(dumped.len(), want.len());
    let reader = Reader::open(out).unwrap();
    assert_eq!(
        reader.fields()[4].field_type,
        FieldType::VarArray(VarArrayArgs::new("<i4".parse().unwrap(), vec![]).unwrap())
    );
    for (i, (row, w)) in dumped.iter().zip(want).enumerate() {
        assert_eq!(row["image"]["mode"], "raw", "{i}");
        assert_eq!(row["image"]["width"], w.image.width());
        assert_eq!(row["image"]["height"], w.image.height());
        assert_eq!(row["image"]["sha256"], hex(w.image.pixels()), "{i}");
        assert_eq!(row["label"], w.label);
        assert_eq!(row["score.bits"], w.score.to_bits(), "{i}");
        assert_eq!(row["caption"]["len"], w.caption.len());
        assert_eq!(row["caption"]["sha256"], hex(w.caption.as_bytes()));
        let ids: Vec<u8> = w.ids.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            reader.value(i as u64, 4).unwrap(),
            FieldValue::NdArray(ids),
            "{i}"
        );
        let emb: Vec<u8> = w.emb.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            row["emb"],
            json!({"dtype": "<f4", "shape": [2], "sha256": hex(&emb)})
        );
        assert_eq!(row["tags"], json!(w.tags), "{i}");
    }
    let inspect = ffcv(["inspect", "--json", out.to_str().unwrap()]).json();
    let types: Vec<&str> = inspect["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "RGBImageField",
            "IntField",
            "FloatField",
            "BytesField",
            "VarArrayField",
            "NDArrayField",
            "JSONField"
        ]
    );
}

#[test]
fn parquet_files_convert_with_every_record_field_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let want = rows(7);
    // Two files, the first of three row groups (2 + 2 + 1 rows), the second of one.
    parquet_file(
        &dir.path().join("train-00000.parquet"),
        &[batch(&want[..5], None)],
        2,
    );
    parquet_file(
        &dir.path().join("train-00001.parquet"),
        &[batch(&want[5..], None)],
        100,
    );
    let out = dir.path().join("out.beton");
    let inputs = format!("{}/train-{{00001,00000}}.parquet", dir.path().display());
    let stdout = ok(&[
        "write",
        "parquet",
        &inputs,
        out.to_str().unwrap(),
        "--workers",
        "2",
    ]);
    assert!(stdout.starts_with(INFERRED), "{stdout}");
    assert!(
        stdout.contains(": 7 records from 2 Parquet files, first image field 7 raw + 0 jpg"),
        "{stdout}"
    );
    check(&out, &want);
}

#[test]
fn arrow_stream_and_file_format_convert_with_every_record_field_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let want = rows(6);
    // As `save_to_disk` lays a dataset out: stream files in a folder, several batches each.
    let saved = dir.path().join("saved");
    std::fs::create_dir(&saved).unwrap();
    arrow_file(
        &saved.join("data-00000-of-00002.arrow"),
        &[batch(&want[..2], None), batch(&want[2..4], None)],
        true,
    );
    arrow_file(
        &saved.join("data-00001-of-00002.arrow"),
        &[batch(&want[4..], None)],
        true,
    );
    std::fs::write(saved.join("state.json"), "{}").unwrap();
    let out = dir.path().join("out.beton");
    let stdout = ok(&[
        "write",
        "arrow",
        saved.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(stdout.starts_with(INFERRED), "{stdout}");
    assert!(
        stdout.contains(": 6 records from 2 Arrow IPC files"),
        "{stdout}"
    );
    check(&out, &want);
    // The file format (`ARROW1` magic, footer) reads the same.
    let file = dir.path().join("all.arrow");
    arrow_file(
        &file,
        &[batch(&want[..3], None), batch(&want[3..], None)],
        false,
    );
    let out2 = dir.path().join("out2.beton");
    ok(&[
        "write",
        "arrow",
        file.to_str().unwrap(),
        out2.to_str().unwrap(),
        "--workers",
        "3",
    ]);
    check(&out2, &want);
}

#[test]
fn field_flags_choose_columns_and_photographs_decode_as_pil_does() {
    let dir = tempfile::tempdir().unwrap();
    let photos: Vec<Vec<u8>> = PHOTO_NAMES
        .iter()
        .map(|n| std::fs::read(format!("{PHOTOS}/{n}")).unwrap())
        .collect();
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "name",
            Arc::new(StringArray::from_iter_values(PHOTO_NAMES.iter())),
        ),
        (
            "jpeg",
            Arc::new(BinaryArray::from_iter_values(photos.iter())),
        ),
        (
            "cls",
            Arc::new(Int64Array::from_iter_values(0..PHOTO_NAMES.len() as i64)),
        ),
    ];
    let b = RecordBatch::try_from_iter(columns).unwrap();
    let path = dir.path().join("photos.parquet");
    parquet_file(&path, std::slice::from_ref(&b), 2);
    let out = dir.path().join("out.beton");
    let stdout = ok(&[
        "write",
        "parquet",
        path.to_str().unwrap(),
        out.to_str().unwrap(),
        "--field",
        "image=jpeg:image",
        "--field",
        "label=cls:int",
    ]);
    assert!(
        stdout.starts_with("fields: --field image=jpeg:image --field label=cls:int\n"),
        "{stdout}"
    );
    let rows = dump(&out);
    assert_eq!(rows.len(), PHOTO_NAMES.len());
    for (i, (row, bytes)) in rows.iter().zip(&photos).enumerate() {
        let image = rgb_image::read_image_bytes(bytes).unwrap();
        assert_eq!(row["label"], i);
        assert_eq!(row["image"]["width"], image.width());
        assert_eq!(row["image"]["height"], image.height());
        assert_eq!(
            row["image"]["sha256"],
            hex(image.pixels()),
            "{}",
            PHOTO_NAMES[i]
        );
        assert_eq!(
            row.as_object().unwrap().len(),
            3,
            "only sample, image, label: {row}"
        );
    }
    // Inferred: the JPEG bytes are an image by their content; with passthrough they are
    // stored as they are.
    let ipc = dir.path().join("photos.arrow");
    arrow_file(&ipc, &[b], true);
    let pass = dir.path().join("pass.beton");
    let stdout = ok(&[
        "write",
        "arrow",
        ipc.to_str().unwrap(),
        pass.to_str().unwrap(),
        "--write-mode",
        "jpg",
        "--jpeg-passthrough",
    ]);
    assert!(
        stdout.starts_with(
            "fields: --field name=name:bytes --field jpeg=jpeg:image --field cls=cls:int\n"
        ),
        "{stdout}"
    );
    // Every photograph the loader's fast decoder takes is stored as it is.
    let stored = stdout
        .split(" stored unchanged")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap();
    let rows = dump(&pass);
    let unchanged = rows
        .iter()
        .zip(&photos)
        .filter(|(row, bytes)| row["jpeg"]["jpeg_sha256"] == hex(bytes))
        .count();
    assert!(stored > 0 && unchanged == stored, "{stdout}");
    assert!(rows.iter().all(|row| row["jpeg"]["mode"] == "jpg"));
    // A column that is not there is a usage error naming the columns.
    let run = ffcv([
        "write",
        "parquet",
        path.to_str().unwrap(),
        out.to_str().unwrap(),
        "--field",
        "x=nope:int",
    ]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("no column `nope` (it has: name, jpeg, cls)"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_corrupt_record_fails_naming_file_and_row_or_is_skipped_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let want = rows(5);
    let path = dir.path().join("bad.parquet");
    parquet_file(&path, &[batch(&want, Some(3))], 2);
    let out = dir.path().join("out.beton");
    let run = ffcv([
        "write",
        "parquet",
        path.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    run.assert_runtime_error(&format!(
        "{}: row 3: field `image` (from `image`): cannot decode the image",
        path.display()
    ));
    assert!(!out.exists());
    let stdout = ok(&[
        "write",
        "parquet",
        path.to_str().unwrap(),
        out.to_str().unwrap(),
        "--skip-unreadable",
    ]);
    assert!(
        stdout.contains("skipped 1 unreadable records or file tails:"),
        "{stdout}"
    );
    let kept: Vec<Row> = want
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .map(|(_, r)| r)
        .collect();
    check(&out, &kept);
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out.beton.skipped.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["records"], 5);
    assert_eq!(report["skipped"].as_array().unwrap().len(), 1);
    assert_eq!(report["skipped"][0]["record"], 3);
    assert_eq!(report["skipped"][0]["file"], path.to_str().unwrap());
    // The same in an Arrow stream, and a null label.
    let ipc = dir.path().join("bad.arrow");
    let mut b = batch(&rows(3), None);
    let labels = Int64Array::from(vec![Some(1), None, Some(3)]);
    b = b.project(&[0, 2, 3, 4, 5, 6]).unwrap();
    let mut columns: Vec<(String, ArrayRef)> = b
        .schema()
        .fields()
        .iter()
        .zip(b.columns())
        .map(|(f, c)| (f.name().clone(), c.clone()))
        .collect();
    columns.insert(1, ("label".into(), Arc::new(labels)));
    arrow_file(&ipc, &[RecordBatch::try_from_iter(columns).unwrap()], true);
    let run = ffcv([
        "write",
        "arrow",
        ipc.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    run.assert_runtime_error(&format!(
        "{}: row 1: field `label` (from `label`): no value (null or missing)",
        ipc.display()
    ));
    // Not Parquet, not Arrow, cut short: one-line errors naming the file.
    let junk = dir.path().join("junk.parquet");
    std::fs::write(&junk, b"definitely not parquet").unwrap();
    ffcv([
        "write",
        "parquet",
        junk.to_str().unwrap(),
        out.to_str().unwrap(),
    ])
    .assert_runtime_error(&format!("{}: not a readable Parquet file", junk.display()));
    let cut = dir.path().join("cut.arrow");
    let bytes = std::fs::read(&ipc).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    ffcv([
        "write",
        "arrow",
        cut.to_str().unwrap(),
        out.to_str().unwrap(),
    ])
    .assert_runtime_error(&format!("{}: message at offset", cut.display()));
    let noise = dir.path().join("noise.arrow");
    std::fs::write(
        &noise,
        (0..4096u32)
            .map(|i| (i * 7919 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    ffcv([
        "write",
        "arrow",
        noise.to_str().unwrap(),
        out.to_str().unwrap(),
    ])
    .assert_runtime_error(&noise.display().to_string());
}

/// A Parquet file and an Arrow IPC stream of two records with one int column `label`, in
/// `dir` (for the flag tests).
pub(crate) fn label_files(dir: &Path) -> [std::path::PathBuf; 2] {
    let columns: Vec<(&str, ArrayRef)> =
        vec![("label", Arc::new(Int64Array::from_iter_values([4, 5])))];
    let b = RecordBatch::try_from_iter(columns).unwrap();
    let paths = [dir.join("labels.parquet"), dir.join("labels.arrow")];
    parquet_file(&paths[0], std::slice::from_ref(&b), 10);
    arrow_file(&paths[1], std::slice::from_ref(&b), true);
    paths
}

#[test]
fn shards_split_the_records_and_one_shard_index_writes_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let want = rows(7);
    let path = dir.path().join("all.parquet");
    parquet_file(&path, &[batch(&want, None)], 3);
    let all = dir.path().join("all").join("train.beton");
    std::fs::create_dir(all.parent().unwrap()).unwrap();
    let one = dir.path().join("one").join("train.beton");
    std::fs::create_dir(one.parent().unwrap()).unwrap();
    let p = path.to_str().unwrap();
    ok(&[
        "write",
        "parquet",
        p,
        all.to_str().unwrap(),
        "--shards",
        "2",
        "--workers",
        "1",
    ]);
    ok(&[
        "write",
        "parquet",
        p,
        one.to_str().unwrap(),
        "--shards",
        "2",
        "--shard-index",
        "1",
        "--workers",
        "1",
    ]);
    let shard = |dir: &Path, k: u32| dir.join(format!("train-0000{k}-of-00002.beton"));
    let all_dir = all.parent().unwrap();
    check(&shard(all_dir, 0), &want[..4]);
    check(&shard(all_dir, 1), &want[4..]);
    assert!(!shard(one.parent().unwrap(), 0).exists());
    assert_eq!(
        std::fs::read(shard(one.parent().unwrap(), 1)).unwrap(),
        std::fs::read(shard(all_dir, 1)).unwrap()
    );
}
