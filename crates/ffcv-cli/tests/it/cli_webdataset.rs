//! `ffcv write webdataset`: tar shards made here (generated PNGs, the test photographs,
//! `cls`, `json`, `npy` and `txt` members) convert to a file holding exactly their
//! records, fields and values; brace lists and globs expand sorted; a corrupt record
//! fails naming its shard and key, or is skipped and listed; hostile tars (noise, a
//! header claiming more bytes than the file) are one-line errors; and `--shards N
//! --shard-index I` run as N processes writes the same bytes as one process writing all
//! N shards, for webdataset, image-folder and synthetic inputs.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use ffcv::image::RgbImage;
use ffcv_testkit::image_variants::{PHOTO_NAMES, PHOTOS};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::ffcv;

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A `w x h` image whose pixels follow from `k`.
fn picture(w: u32, h: u32, k: u32) -> RgbImage {
    let pixels = (0..w * h * 3)
        .map(|i| ((i / 3 % w) * 5 + (i / 3 / w) * 11 + (i % 3) * 70 + k * 37) as u8)
        .collect();
    RgbImage::new(w, h, pixels).unwrap()
}

fn png(image: &RgbImage) -> Vec<u8> {
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

/// A `.npy` file (format 1.0) of little-endian f32 values with `shape`.
fn npy(values: &[f32], shape: &str) -> Vec<u8> {
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Writes a tar file of `members` (name, bytes) in order.
pub(crate) fn tar(path: &Path, members: &[(String, Vec<u8>)]) {
    let mut builder = tar::Builder::new(std::fs::File::create(path).unwrap());
    for (name, bytes) in members {
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, name, bytes.as_slice())
            .unwrap();
    }
    builder.finish().unwrap();
}

fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
    args.iter().map(Into::into).collect()
}

fn dump(path: &Path) -> Vec<Value> {
    ffcv(os(&["dump", path.to_str().unwrap()])).json_lines()
}

/// One record of the generated shards: its key, label, image and values.
pub(crate) struct Source {
    key: String,
    label: i64,
    image: RgbImage,
    json: Value,
    array: [f32; 3],
    text: Vec<u8>,
}

/// Three shards (`shard-000.tar` … `shard-002.tar`) of 4, 1 and 3 records, each with
/// `png`, `cls`, `json`, `npy` and `txt` members; the tars also hold a member without an
/// extension and a top-level `__meta__` file, which belong to no record.
pub(crate) fn generated_shards(dir: &Path) -> Vec<Source> {
    let mut all = Vec::new();
    let mut k = 0u32;
    for (s, count) in [4, 1, 3].into_iter().enumerate() {
        let mut members = vec![
            ("train/README".to_owned(), b"no extension".to_vec()),
            ("__meta__".to_owned(), b"WebDataset metadata".to_vec()),
        ];
        for _ in 0..count {
            let source = Source {
                key: format!("train/{k:05}"),
                label: i64::from(k % 3) - 1,
                image: picture(10 + k, 7 + 2 * k, k),
                json: json!({"id": k, "tags": ["a", k.to_string()], "w": 0.5 + f64::from(k)}),
                array: [k as f32, -1.5, 1e-3 * k as f32],
                text: format!("caption {k}").into_bytes().repeat(k as usize),
            };
            let key = &source.key;
            members.push((format!("{key}.png"), png(&source.image)));
            members.push((
                format!("{key}.cls"),
                format!("{}\n", source.label).into_bytes(),
            ));
            members.push((format!("{key}.json"), source.json.to_string().into_bytes()));
            members.push((format!("{key}.npy"), npy(&source.array, "(3,)")));
            members.push((format!("{key}.txt"), source.text.clone()));
            all.push(source);
            k += 1;
        }
        tar(&dir.join(format!("shard-{s:03}.tar")), &members);
    }
    all
}

fn ok(args: &[&str]) -> String {
    let run = ffcv(os(args));
    assert_eq!(
        run.code,
        Some(0),
        "stdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
    run.stdout
}

#[test]
fn every_record_field_and_value_of_the_shards_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let want = generated_shards(dir.path());
    let out = dir.path().join("out.beton");
    let inputs = dir.path().join("shard-*.tar");
    let stdout = ok(&[
        "write",
        "webdataset",
        inputs.to_str().unwrap(),
        out.to_str().unwrap(),
        "--workers",
        "2",
    ]);
    assert!(
        stdout.starts_with(
            "fields: --field png=png:image --field cls=cls:int --field json=json:json \
             --field npy=npy:array --field txt=txt:bytes\n"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("wrote "), "{stdout}");
    assert!(
        stdout.contains(": 8 records from 3 shards, first image field 8 raw + 0 jpg"),
        "{stdout}"
    );
    let rows = dump(&out);
    assert_eq!(rows.len(), want.len());
    for (row, w) in rows.iter().zip(&want) {
        assert_eq!(row["cls"], w.label, "{}", w.key);
        assert_eq!(row["png"]["mode"], "raw");
        assert_eq!(row["png"]["width"], w.image.width());
        assert_eq!(row["png"]["height"], w.image.height());
        assert_eq!(row["png"]["sha256"], hex(w.image.pixels()), "{}", w.key);
        assert_eq!(row["json"], w.json, "{}", w.key);
        assert_eq!(row["txt"]["len"], w.text.len());
        assert_eq!(row["txt"]["sha256"], hex(&w.text));
        let array: Vec<u8> = w.array.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            row["npy"],
            json!({"dtype": "<f4", "shape": [3], "sha256": hex(&array)})
        );
    }
    let inspect = ffcv(os(&["inspect", "--json", out.to_str().unwrap()])).json();
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
            "JSONField",
            "NDArrayField",
            "BytesField"
        ]
    );
}

#[test]
fn field_flags_choose_names_kinds_and_order_and_photographs_decode_as_pil_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut members = Vec::new();
    let mut want = Vec::new();
    for (i, name) in PHOTO_NAMES.iter().enumerate() {
        let bytes = std::fs::read(format!("{PHOTOS}/{name}")).unwrap();
        want.push(rgb_image::read_image_bytes(&bytes).unwrap());
        let key = format!("{i:03}");
        members.push((format!("{key}.cls"), i.to_string().into_bytes()));
        members.push((format!("{key}.JPG"), bytes));
        members.push((format!("{key}.txt"), name.as_bytes().to_vec()));
    }
    let shard = dir.path().join("photos.tar");
    tar(&shard, &members);
    let out = dir.path().join("out.beton");
    let stdout = ok(&[
        "write",
        "webdataset",
        shard.to_str().unwrap(),
        out.to_str().unwrap(),
        "--field",
        "image=jpg:image",
        "--field",
        "label=cls:int",
    ]);
    assert!(
        stdout.starts_with("fields: --field image=jpg:image --field label=cls:int\n"),
        "{stdout}"
    );
    let rows = dump(&out);
    assert_eq!(rows.len(), PHOTO_NAMES.len());
    for (i, (row, image)) in rows.iter().zip(&want).enumerate() {
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
    // Image options as for image folders: JPEG at most 64 px on the longest side.
    let small = dir.path().join("small.beton");
    ok(&[
        "write",
        "webdataset",
        shard.to_str().unwrap(),
        small.to_str().unwrap(),
        "--field",
        "image=jpg:image",
        "--write-mode",
        "jpg",
        "--max-resolution",
        "64",
    ]);
    for (row, image) in dump(&small).iter().zip(&want) {
        assert_eq!(row["image"]["mode"], "jpg");
        let longest = row["image"]["width"]
            .as_u64()
            .unwrap()
            .max(row["image"]["height"].as_u64().unwrap());
        assert_eq!(
            longest,
            64.min(u64::from(image.width().max(image.height())))
        );
    }
}

/// One-record shards `NAME.tar` whose only label is `label`.
fn label_shard(dir: &Path, name: &str, label: i64) {
    tar(
        &dir.join(format!("{name}.tar")),
        &[(format!("{name}-key.cls"), label.to_string().into_bytes())],
    );
}

fn labels(path: &Path) -> Vec<i64> {
    dump(path)
        .iter()
        .map(|r| r["cls"].as_i64().unwrap())
        .collect()
}

#[test]
fn brace_lists_and_globs_expand_to_the_sorted_shards() {
    let dir = tempfile::tempdir().unwrap();
    for (i, name) in ["a-000", "a-001", "a-002", "a-003", "b-7", "b-8"]
        .iter()
        .enumerate()
    {
        label_shard(dir.path(), name, i as i64);
    }
    let d = dir.path().to_str().unwrap();
    let out = dir.path().join("out.beton");
    let out = out.to_str().unwrap();
    // Given out of order, with a repeat: written sorted, once each.
    let inputs = [
        format!("{d}/b-{{8,7}}.tar"),
        format!("{d}/a-{{003..001}}.tar"),
        format!("{d}/a-00[02].tar"),
        format!("{d}/a-001.tar"),
    ];
    let mut args: Vec<&str> = vec!["write", "webdataset"];
    args.extend(inputs.iter().map(String::as_str));
    args.push(out);
    ok(&args);
    assert_eq!(labels(Path::new(out)), [0, 1, 2, 3, 4, 5]);
    ok(&[
        "write",
        "webdataset",
        &format!("{d}/a-{{000..002}}.tar"),
        out,
    ]);
    assert_eq!(labels(Path::new(out)), [0, 1, 2]);
    ok(&[
        "write",
        "webdataset",
        &format!("{d}/{{b-*,a-003}}.tar"),
        out,
    ]);
    assert_eq!(labels(Path::new(out)), [3, 4, 5]);
    // A pattern that matches nothing and a missing shard are errors naming them.
    ffcv(os(&["write", "webdataset", &format!("{d}/c-*.tar"), out]))
        .assert_runtime_error("c-*.tar: the pattern matches no file");
    ffcv(os(&[
        "write",
        "webdataset",
        &format!("{d}/a-{{003..004}}.tar"),
        out,
    ]))
    .assert_runtime_error("a-004.tar: cannot open");
    let gz = dir.path().join("g.tar.gz");
    std::fs::write(&gz, b"\x1f\x8b\x08\x00 compressed").unwrap();
    ffcv(os(&["write", "webdataset", gz.to_str().unwrap(), out]))
        .assert_runtime_error("g.tar.gz: a gzip-compressed shard");
}

/// A tar's members: (name, bytes).
type Members = Vec<(String, Vec<u8>)>;

/// The records of the corrupt-record shards: name, members.
fn corrupt_cases() -> Vec<(&'static str, Members)> {
    let good = |key: &str, label: i64| {
        vec![
            (format!("{key}.png"), png(&picture(4, 3, label as u32))),
            (format!("{key}.cls"), label.to_string().into_bytes()),
        ]
    };
    let with = |mut members: Members, extra: Members| {
        members.extend(extra);
        members
    };
    vec![
        (
            "bad-image",
            with(
                good("k0", 0),
                vec![
                    ("k1.png".into(), b"\x89PNG\r\n\x1a\n truncated".to_vec()),
                    ("k1.cls".into(), b"1".to_vec()),
                ],
            ),
        ),
        (
            "bad-cls",
            with(
                good("k2", 2),
                vec![
                    ("k3.png".into(), png(&picture(4, 3, 3))),
                    ("k3.cls".into(), b"three".to_vec()),
                ],
            ),
        ),
        (
            "missing",
            with(
                good("k4", 4),
                vec![("k5.png".into(), png(&picture(4, 3, 5)))],
            ),
        ),
    ]
}

#[test]
fn a_corrupt_record_is_an_error_naming_shard_and_key_or_is_skipped_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("out.beton");
    let out = out.to_str().unwrap();
    let fields = ["--field", "image=png:image", "--field", "label=cls:int"];
    let errors = [
        (
            "bad-image",
            "record `k1`: field `image` (from `png`): cannot decode the image",
        ),
        (
            "bad-cls",
            "record `k3`: field `label` (from `cls`): not an integer: \"three\"",
        ),
        (
            "missing",
            "record `k5`: no `cls` member for field `label` (the record has: png)",
        ),
    ];
    for ((name, members), (_, needle)) in corrupt_cases().into_iter().zip(errors) {
        let shard = d.join(format!("{name}.tar"));
        tar(&shard, &members);
        let mut args = vec!["write", "webdataset", shard.to_str().unwrap(), out];
        args.extend(fields);
        let run = ffcv(os(&args));
        run.assert_runtime_error(&format!("{}: {needle}", shard.display()));
        assert!(
            !Path::new(out).exists(),
            "no file is left by a failed write"
        );
    }
    // A shard cut short inside its last member: the tar structure breaks there.
    let mut members = corrupt_cases().remove(0).1;
    members.truncate(2);
    // Its data is cut, not its header: the scan sees a member longer than the file.
    members.push(("k6.png".into(), vec![7; 5000]));
    let cut = d.join("cut.tar");
    tar(&cut, &members);
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len - 1024 - 2000)
        .unwrap();
    let mut args = vec!["write", "webdataset", cut.to_str().unwrap(), out];
    args.extend(fields);
    ffcv(os(&args)).assert_runtime_error("runs past the end of the file");

    // With --skip-unreadable all four shards give their good records, the rest listed.
    let mut args = vec!["write", "webdataset", "--skip-unreadable"];
    let all = d.join("*.tar");
    args.extend([all.to_str().unwrap(), out]);
    args.extend(fields);
    let stdout = ok(&args);
    assert!(
        stdout.contains("skipped 4 unreadable records or shard tails:"),
        "{stdout}"
    );
    let rows = dump(Path::new(out));
    let got: Vec<i64> = rows.iter().map(|r| r["label"].as_i64().unwrap()).collect();
    // Sorted shards: bad-cls (k2), bad-image (k0), cut (k0 again), missing (k4).
    assert_eq!(got, [2, 0, 0, 4]);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{out}.skipped.json")).unwrap())
            .unwrap();
    assert_eq!(report["records"], 7);
    let listed: Vec<(String, Value)> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let shard = PathBuf::from(s["shard"].as_str().unwrap());
            (
                shard.file_name().unwrap().to_str().unwrap().to_owned(),
                s["key"].clone(),
            )
        })
        .collect();
    // Nothing left to write is an error, after the list.
    let only_bad = d.join("missing.tar");
    let mut args = vec![
        "write",
        "webdataset",
        "--skip-unreadable",
        only_bad.to_str().unwrap(),
        out,
    ];
    args.extend(["--field", "label=cls:int", "--field", "image=jpg:image"]);
    ffcv(os(&args)).assert_runtime_error("every one of the 2 records was skipped as unreadable");
    assert_eq!(
        listed,
        [
            ("cut.tar".to_owned(), Value::Null),
            ("bad-cls.tar".to_owned(), json!("k3")),
            ("bad-image.tar".to_owned(), json!("k1")),
            ("missing.tar".to_owned(), json!("k5")),
        ]
    );
}

#[test]
fn hostile_tars_exit_1_with_one_line_naming_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.beton");
    let noise = dir.path().join("noise.tar");
    // Deterministic noise: not a tar header.
    let bytes: Vec<u8> = (0u32..4096)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&noise, bytes).unwrap();
    // A header claiming 8 GiB of data in a file of a few KiB: refused, nothing allocated.
    let huge = dir.path().join("huge.tar");
    let mut header = tar::Header::new_ustar();
    header.set_path("k.cls").unwrap();
    header.set_size(8 << 30);
    header.set_mode(0o644);
    header.set_cksum();
    let mut bytes = header.as_bytes().to_vec();
    bytes.extend_from_slice(&[b'1'; 512]);
    std::fs::write(&huge, bytes).unwrap();
    let empty = dir.path().join("empty.tar");
    tar(&empty, &[]);
    for (shard, needle) in [
        (&noise, "noise.tar: not a tar file"),
        (
            &huge,
            "huge.tar: member `k.cls` (8589934592 bytes at byte 512) runs past the end",
        ),
        (&empty, "empty.tar: no records in the 1 shards given"),
    ] {
        for skip in [false, true] {
            let mut args = vec![
                "write",
                "webdataset",
                shard.to_str().unwrap(),
                out.to_str().unwrap(),
            ];
            if skip {
                args.push("--skip-unreadable");
            }
            ffcv(os(&args)).assert_runtime_error(needle);
        }
    }
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    label_shard(dir.path(), "s", 1);
    let shard = dir.path().join("s.tar");
    let shard = shard.to_str().unwrap();
    for bad in [
        vec!["--field", "label=cls"],
        vec!["--field", "label=cls:float"],
        vec!["--field", "label=cls:int", "--field", "label=cls:bytes"],
        vec!["--shards", "2", "--shard-index", "2"],
        vec!["--shards", "2"],
        vec!["--write-mode", "raw", "--smart-threshold", "10"],
    ] {
        let mut args = vec!["write", "webdataset", shard, "out.beton"];
        args.extend(bad.iter().copied());
        let run = ffcv(os(&args));
        assert_eq!(run.code, Some(2), "{bad:?}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
}

/// Runs `args` once per index as concurrent processes, each with `--shard-index I`.
fn run_split(args: &[String], n: u64) {
    let children: Vec<_> = (0..n)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_ffcv"))
                .args(args)
                .args(["--shard-index", &i.to_string()])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Writes with `args` (inputs, then the output `DIR/NAME.beton`) as 3 shards in one
/// process and as 3 processes, and checks the files are the same bytes and together
/// hold the single-file write's samples.
fn split_matches_one_write(dir: &Path, args: impl Fn(&Path) -> Vec<String>) {
    let (all, split, single) = (dir.join("all"), dir.join("split"), dir.join("single"));
    for d in [&all, &split, &single] {
        std::fs::create_dir_all(d).unwrap();
    }
    let with = |out: &Path, extra: &[&str]| {
        let mut a = args(out);
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        a
    };
    let run = ffcv(with(
        &all.join("set.beton"),
        &["--shards", "3", "--workers", "1"],
    ));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    run_split(
        &with(
            &split.join("set.beton"),
            &["--shards", "3", "--workers", "1"],
        ),
        3,
    );
    let run = ffcv(with(&single.join("set.beton"), &["--workers", "1"]));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    for k in 0..3 {
        let name = format!("set-{k:05}-of-00003.beton");
        let a = std::fs::read(all.join(&name)).unwrap();
        let b = std::fs::read(split.join(&name)).unwrap();
        assert!(
            a == b,
            "{name}: the split write differs from the all-shards write"
        );
    }
    let mut names: Vec<_> = std::fs::read_dir(&split)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "only the shards: {names:?}");
    // Read as one set by the sharded reader, global ids and all, they are the one file.
    let set = split.join("set-*.beton");
    assert_eq!(dump(&set), dump(&single.join("set.beton")));
}

#[test]
fn shards_written_by_separate_processes_are_the_bytes_of_one_sharded_write() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    generated_shards(&src);
    let pattern = src.join("shard-{000..002}.tar");
    split_matches_one_write(&dir.path().join("wds"), |out| {
        [
            "write",
            "webdataset",
            pattern.to_str().unwrap(),
            out.to_str().unwrap(),
            "--write-mode",
            "proportion",
        ]
        .map(str::to_owned)
        .to_vec()
    });

    let folder = dir.path().join("folder");
    for (class, n) in [("a", 3u32), ("b", 2)] {
        std::fs::create_dir_all(folder.join(class)).unwrap();
        for i in 0..n {
            let bytes = png(&picture(6 + i, 5, i + n));
            std::fs::write(folder.join(class).join(format!("{i}.png")), bytes).unwrap();
        }
    }
    split_matches_one_write(&dir.path().join("folder-out"), |out| {
        [
            "write",
            "image-folder",
            folder.to_str().unwrap(),
            out.to_str().unwrap(),
        ]
        .map(str::to_owned)
        .to_vec()
    });
    split_matches_one_write(&dir.path().join("synthetic"), |out| {
        [
            "write",
            "synthetic",
            out.to_str().unwrap(),
            "--kind",
            "bytes",
            "--samples",
            "10",
        ]
        .map(str::to_owned)
        .to_vec()
    });
}
