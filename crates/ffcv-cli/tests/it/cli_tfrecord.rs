//! `ffcv write tfrecord`: TFRecord files of `tf.train.Example`s, encoded here byte by byte
//! from the protobuf wire format (not through the command's own structs), with generated
//! PNGs and the photographs as `bytes_list` images, `int64_list` labels, `float_list`
//! scores and vectors, convert to a file holding exactly their records, fields and
//! values; a record whose data checksum does not match fails naming the file and the
//! record, or is skipped and listed; a file cut short keeps its records before the cut
//! with `--skip-unreadable`.

use crate::cli_tables::{dump, hex, ok, picture, png};
use crate::support::ffcv;

use ffcv_testkit::image_variants::{PHOTO_NAMES, PHOTOS};
use serde_json::{Value, json};

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited protobuf field.
fn field(tag: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(tag << 3 | 2, &mut out);
    varint(bytes.len() as u64, &mut out);
    out.extend_from_slice(bytes);
    out
}

/// A `tf.train.Feature`.
pub(crate) enum F {
    Bytes(Vec<Vec<u8>>),
    Floats(Vec<f32>),
    Ints(Vec<i64>),
}

/// A serialized `tf.train.Example` of `features` (key, feature), in the given order.
pub(crate) fn example(features: &[(&str, F)]) -> Vec<u8> {
    let mut map = Vec::new();
    for (key, feature) in features {
        let list = match feature {
            F::Bytes(values) => field(
                1,
                &values.iter().flat_map(|v| field(1, v)).collect::<Vec<_>>(),
            ),
            F::Floats(values) => field(
                2,
                &field(
                    1,
                    &values
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect::<Vec<_>>(),
                ),
            ),
            F::Ints(values) => {
                let mut packed = Vec::new();
                values.iter().for_each(|&v| varint(v as u64, &mut packed));
                field(3, &field(1, &packed))
            }
        };
        let mut entry = field(1, key.as_bytes());
        entry.extend(field(2, &list));
        map.extend(field(1, &entry));
    }
    field(1, &map)
}

fn masked_crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
        .rotate_right(15)
        .wrapping_add(0xa282_ead8)
}

/// The TFRecord framing of `records`.
pub(crate) fn tfrecord(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let len = (r.len() as u64).to_le_bytes();
        out.extend_from_slice(&len);
        out.extend_from_slice(&masked_crc(&len).to_le_bytes());
        out.extend_from_slice(r);
        out.extend_from_slice(&masked_crc(r).to_le_bytes());
    }
    out
}

/// `n` generated records: image (PNG), label, score, vec (3 floats), ids (2 ints), text.
fn generated(n: u32) -> (Vec<Vec<u8>>, Vec<Value>) {
    let mut records = Vec::new();
    let mut want = Vec::new();
    for k in 0..n {
        let image = picture(8 + k, 5 + k, k);
        let label = i64::from(k) - 2;
        let score = 0.25 * k as f32 + 0.1;
        let vec = [k as f32, -0.5, 1e-3];
        let ids = [i64::from(k) << 40, -7];
        let text = format!("text {k}");
        records.push(example(&[
            ("image/encoded", F::Bytes(vec![png(&image)])),
            ("label", F::Ints(vec![label])),
            ("score", F::Floats(vec![score])),
            ("vec", F::Floats(vec.to_vec())),
            ("ids", F::Ints(ids.to_vec())),
            ("text", F::Bytes(vec![text.clone().into_bytes()])),
        ]));
        let vec_bytes: Vec<u8> = vec.iter().flat_map(|v| v.to_le_bytes()).collect();
        let id_bytes: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
        want.push(json!({
            "ids": {"dtype": "<i8", "shape": [2], "sha256": hex(&id_bytes)},
            "image_encoded": {"width": image.width(), "height": image.height(), "sha256": hex(image.pixels())},
            "label": label,
            "score.bits": f64::from(score).to_bits(),
            "text": {"len": text.len(), "sha256": hex(text.as_bytes())},
            "vec": {"dtype": "<f4", "shape": [3], "sha256": hex(&vec_bytes)},
        }));
    }
    (records, want)
}

fn check(rows: &[Value], want: &[Value]) {
    assert_eq!(rows.len(), want.len());
    for (i, (row, w)) in rows.iter().zip(want).enumerate() {
        for key in ["ids", "label", "score.bits", "text", "vec"] {
            assert_eq!(row[key], w[key], "record {i}, {key}");
        }
        for key in ["width", "height", "sha256"] {
            assert_eq!(
                row["image_encoded"][key], w["image_encoded"][key],
                "record {i}"
            );
        }
    }
}

const INFERRED: &str = "fields: --field ids=ids:array --field image_encoded=image/encoded:image \
     --field label=label:int --field score=score:float --field text=text:bytes --field \
     vec=vec:array\n";

#[test]
fn tfrecord_files_convert_with_every_record_field_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let (records, want) = generated(7);
    std::fs::write(
        dir.path().join("train.tfrecord-00000-of-00002"),
        tfrecord(&records[..4]),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("train.tfrecord-00001-of-00002"),
        tfrecord(&records[4..]),
    )
    .unwrap();
    let out = dir.path().join("out.beton");
    let stdout = ok(&[
        "write",
        "tfrecord",
        dir.path().to_str().unwrap(),
        out.to_str().unwrap(),
        "--workers",
        "2",
    ]);
    assert!(stdout.starts_with(INFERRED), "{stdout}");
    assert!(
        stdout.contains(": 7 records from 2 TFRecord files, first image field 7 raw + 0 jpg"),
        "{stdout}"
    );
    check(&dump(&out), &want);
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
            "NDArrayField",
            "RGBImageField",
            "IntField",
            "FloatField",
            "BytesField",
            "NDArrayField"
        ]
    );
}

#[test]
fn photographs_as_tfds_writes_them_decode_as_pil_does() {
    let dir = tempfile::tempdir().unwrap();
    let photos: Vec<Vec<u8>> = PHOTO_NAMES
        .iter()
        .map(|n| std::fs::read(format!("{PHOTOS}/{n}")).unwrap())
        .collect();
    let records: Vec<Vec<u8>> = photos
        .iter()
        .enumerate()
        .map(|(i, p)| {
            example(&[
                ("image", F::Bytes(vec![p.clone()])),
                ("label", F::Ints(vec![i as i64])),
            ])
        })
        .collect();
    let path = dir.path().join("photos.tfrecord");
    std::fs::write(&path, tfrecord(&records)).unwrap();
    let out = dir.path().join("out.beton");
    let stdout = ok(&[
        "write",
        "tfrecord",
        path.to_str().unwrap(),
        out.to_str().unwrap(),
        "--field",
        "img=image:image",
        "--field",
        "y=label:int",
    ]);
    assert!(
        stdout.starts_with("fields: --field img=image:image --field y=label:int\n"),
        "{stdout}"
    );
    for (i, (row, bytes)) in dump(&out).iter().zip(&photos).enumerate() {
        let image = rgb_image::read_image_bytes(bytes).unwrap();
        assert_eq!(row["y"], i);
        assert_eq!(row["img"]["width"], image.width());
        assert_eq!(row["img"]["height"], image.height());
        assert_eq!(
            row["img"]["sha256"],
            hex(image.pixels()),
            "{}",
            PHOTO_NAMES[i]
        );
    }
    // A feature of another kind than the flag's fails naming the record.
    let run = ffcv([
        "write",
        "tfrecord",
        path.to_str().unwrap(),
        out.to_str().unwrap(),
        "--field",
        "y=label:float",
    ]);
    run.assert_runtime_error(&format!(
        "{}: record 0 (offset 0): field `y` (from `label`): a <i8 array of shape [1] cannot be stored as float",
        path.display()
    ));
}

#[test]
fn a_checksum_mismatch_fails_naming_the_record_or_is_skipped_and_a_cut_file_keeps_its_head() {
    let dir = tempfile::tempdir().unwrap();
    let (records, want) = generated(5);
    let mut bytes = tfrecord(&records);
    // Flip one byte inside record 2's data.
    let offset: usize = records[..2].iter().map(|r| r.len() + 16).sum();
    bytes[offset + 12 + 20] ^= 0x40;
    let path = dir.path().join("bad.tfrecord");
    std::fs::write(&path, &bytes).unwrap();
    let out = dir.path().join("out.beton");
    ffcv([
        "write",
        "tfrecord",
        path.to_str().unwrap(),
        out.to_str().unwrap(),
    ])
    .assert_runtime_error(&format!(
        "{}: record 2 (offset {offset}): data checksum mismatch",
        path.display()
    ));
    assert!(!out.exists());
    let stdout = ok(&[
        "write",
        "tfrecord",
        path.to_str().unwrap(),
        out.to_str().unwrap(),
        "--skip-unreadable",
    ]);
    assert!(
        stdout.contains("skipped 1 unreadable records or file tails:"),
        "{stdout}"
    );
    let kept: Vec<Value> = want
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, w)| w.clone())
        .collect();
    check(&dump(&out), &kept);
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out.beton.skipped.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["records"], 5);
    assert_eq!(report["skipped"][0]["record"], 2);
    assert!(
        report["skipped"][0]["error"]
            .as_str()
            .unwrap()
            .contains("data checksum mismatch")
    );
    // Cut in the middle of record 3: records 0..3 are kept and the tail is listed.
    let cut = dir.path().join("cut.tfrecord");
    let good = tfrecord(&records);
    let at: usize = records[..3].iter().map(|r| r.len() + 16).sum::<usize>() + 30;
    std::fs::write(&cut, &good[..at]).unwrap();
    let cut_at = at - 30;
    ffcv([
        "write",
        "tfrecord",
        cut.to_str().unwrap(),
        out.to_str().unwrap(),
    ])
    .assert_runtime_error(&format!(
        "{}: record 3 (offset {cut_at}): claims",
        cut.display()
    ));
    let stdout = ok(&[
        "write",
        "tfrecord",
        cut.to_str().unwrap(),
        out.to_str().unwrap(),
        "--skip-unreadable",
    ]);
    assert!(stdout.contains("past the end of the file"), "{stdout}");
    check(&dump(&out), &want[..3]);
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out.beton.skipped.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["skipped"][0]["record"], Value::Null);
    // A length checksum mismatch, gzip and noise: one-line errors naming the file.
    let mut framing = good.clone();
    framing[9] ^= 1;
    let bad_len = dir.path().join("len.tfrecord");
    std::fs::write(&bad_len, &framing).unwrap();
    ffcv([
        "write",
        "tfrecord",
        bad_len.to_str().unwrap(),
        out.to_str().unwrap(),
    ])
    .assert_runtime_error("record 0 (offset 0): length checksum mismatch");
    let gz = dir.path().join("x.tfrecord.gz");
    std::fs::write(&gz, b"\x1f\x8b\x08\x00rest").unwrap();
    ffcv([
        "write",
        "tfrecord",
        gz.to_str().unwrap(),
        out.to_str().unwrap(),
    ])
    .assert_runtime_error("gzip-compressed");
    // A record whose data is not an Example.
    let not_example = dir.path().join("ne.tfrecord");
    std::fs::write(&not_example, tfrecord(&[b"\xff\xff\xff".to_vec()])).unwrap();
    ffcv([
        "write",
        "tfrecord",
        not_example.to_str().unwrap(),
        out.to_str().unwrap(),
    ])
    .assert_runtime_error("record 0 (offset 0): not a tf.train.Example");
}

/// A TFRecord file of one `label` int64 feature per record (for the flag tests).
pub(crate) fn label_file(path: &std::path::Path, labels: &[i64]) {
    let records: Vec<Vec<u8>> = labels
        .iter()
        .map(|&l| example(&[("label", F::Ints(vec![l]))]))
        .collect();
    std::fs::write(path, tfrecord(&records)).unwrap();
}
