//! `--jpeg-passthrough` of `ffcv write image-folder` and `ffcv write webdataset`: a source
//! JPEG that fits `--max-resolution` and that the loader's fast decoder takes is stored
//! byte for byte, with its own height and width, and decodes to what the source decodes
//! to; an oversize, progressive, 4:1:1, CMYK or YCCK JPEG and every PNG is stored exactly
//! as without the flag (decoded as PIL's `convert("RGB")`, resized to the bound, encoded);
//! the raw/JPEG decision of `smart` and `proportion` is the one without the flag; a cut
//! JPEG still fails the write; the flag is refused with `--write-mode raw`.

use crate::support;

use std::path::Path;

use ffcv::image::{decode_jpeg, encode_jpeg, read_image_bytes};
use ffcv_testkit::image_variants::{self, Variant};
use serde_json::Value;
use sha2::{Digest, Sha256};
use support::ffcv;

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The files stored unchanged with `--max-resolution 480`: baseline 4:2:0, 4:4:4, 4:2:2,
/// 4:4:0, gray, with restart markers, RGB-coded (Adobe transform 0), odd sides.
const UNCHANGED: [&str; 10] = [
    "astronaut.jpg",
    "chelsea.jpg",
    "coffee.jpg",
    "coffee_444.jpg",
    "coffee_422.jpg",
    "coffee_440.jpg",
    "coffee_gray.jpg",
    "coffee_restart.jpg",
    "coffee_rgb_adobe.jpg",
    "astronaut_odd_420.jpg",
];

/// The readable test images in image-folder order (classes, then names, sorted).
fn readable() -> Vec<Variant> {
    let mut all: Vec<Variant> = image_variants::variants()
        .into_iter()
        .filter(|v| v.readable)
        .collect();
    all.sort_by(|a, b| (a.class, a.name.as_bytes()).cmp(&(b.class, b.name.as_bytes())));
    all
}

fn write_folder(dir: &Path, images: &[Variant]) {
    for v in images {
        std::fs::create_dir_all(dir.join(v.class)).unwrap();
        std::fs::write(dir.join(v.class).join(&v.name), &v.bytes).unwrap();
    }
}

/// One tar shard holding record `NNN` per image: `NNN.jpg` (PNGs too: the writer goes by
/// content) and `NNN.cls`.
fn write_shard(path: &Path, images: &[Variant]) {
    let mut builder = tar::Builder::new(std::fs::File::create(path).unwrap());
    for (k, v) in images.iter().enumerate() {
        let label = format!("{}", k % 3).into_bytes();
        for (name, bytes) in [
            (format!("{k:03}.jpg"), &v.bytes),
            (format!("{k:03}.cls"), &label),
        ] {
            let mut header = tar::Header::new_ustar();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            builder
                .append_data(&mut header, name, bytes.as_slice())
                .unwrap();
        }
    }
    builder.finish().unwrap();
}

/// Runs a write and returns the dump's image column (one object per sample).
fn write_and_dump(command: &[&str], out: &Path, options: &[&str]) -> (String, Vec<Value>) {
    let mut args: Vec<String> = command.iter().map(|s| (*s).to_owned()).collect();
    args.push(out.to_str().unwrap().to_owned());
    args.extend(["--workers", "2"].map(String::from));
    args.extend(options.iter().map(|s| (*s).to_owned()));
    let run = ffcv(&args);
    assert_eq!(run.code, Some(0), "{args:?}: {}", run.stderr);
    let dump = ffcv(["dump", out.to_str().unwrap()]);
    assert_eq!(dump.code, Some(0), "{}", dump.stderr);
    let images = dump
        .json_lines()
        .into_iter()
        .map(|row| row["image"].clone())
        .collect();
    (run.stdout, images)
}

/// Checks a passthrough write against the same write without the flag, image by image.
fn check_against_reencoding(command: &[&str], fields: &[&str], dir: &Path, images: &[Variant]) {
    let jpg = [fields, &["--write-mode", "jpg", "--max-resolution", "480"]].concat();
    let (stdout, kept) = write_and_dump(
        command,
        &dir.join("kept.beton"),
        &[&jpg[..], &["--jpeg-passthrough"]].concat(),
    );
    let (_, encoded) = write_and_dump(command, &dir.join("encoded.beton"), &jpg);
    assert_eq!(kept.len(), images.len());
    assert!(
        stdout.contains(&format!(
            "0 raw + {} jpg ({} stored unchanged)",
            images.len(),
            UNCHANGED.len()
        )),
        "{stdout}"
    );
    for ((v, kept), encoded) in images.iter().zip(&kept).zip(&encoded) {
        if UNCHANGED.contains(&v.name.as_str()) {
            let source = read_image_bytes(&v.bytes).unwrap();
            assert_eq!(kept["mode"], "jpg", "{}", v.name);
            assert_eq!(kept["jpeg_sha256"], hex(&v.bytes), "{}", v.name);
            assert_eq!(kept["jpeg_len"], v.bytes.len(), "{}", v.name);
            assert_eq!(
                (kept["height"].as_u64(), kept["width"].as_u64()),
                (
                    Some(u64::from(source.height())),
                    Some(u64::from(source.width()))
                ),
                "{}",
                v.name
            );
            // The loader's decode of the stored image is its decode of the source.
            let pixels = decode_jpeg(&v.bytes, 1 << 24).unwrap().into_pixels();
            assert_eq!(kept["sha256"], hex(&pixels), "{}", v.name);
            assert_ne!(kept, encoded, "{}", v.name);
        } else {
            assert_eq!(kept, encoded, "{}", v.name);
            assert_ne!(kept["jpeg_sha256"], hex(&v.bytes), "{}", v.name);
        }
    }
}

#[test]
fn image_folder_keeps_fitting_baseline_jpegs_and_encodes_the_rest_as_without_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let images = readable();
    write_folder(&src, &images);
    check_against_reencoding(
        &["write", "image-folder", src.to_str().unwrap()],
        &[],
        dir.path(),
        &images,
    );
}

#[test]
fn webdataset_keeps_fitting_baseline_jpegs_and_encodes_the_rest_as_without_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("shard-000.tar");
    let images = readable();
    write_shard(&shard, &images);
    check_against_reencoding(
        &["write", "webdataset", shard.to_str().unwrap()],
        &["--field", "image=jpg:image", "--field", "label=cls:int"],
        dir.path(),
        &images,
    );
}

#[test]
fn oversize_cmyk_and_gray_sources_are_stored_as_decided() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let images: Vec<Variant> = readable()
        .into_iter()
        .filter(|v| ["rocket.jpg", "coffee_cmyk.jpg", "coffee_gray.jpg"].contains(&v.name.as_str()))
        .collect();
    write_folder(&src, &images);
    let (_, rows) = write_and_dump(
        &["write", "image-folder", src.to_str().unwrap()],
        &dir.path().join("out.beton"),
        &[
            "--write-mode",
            "jpg",
            "--max-resolution",
            "480",
            "--jpeg-passthrough",
        ],
    );
    let by_name = |name: &str| {
        let i = images.iter().position(|v| v.name == name).unwrap();
        (&images[i], &rows[i])
    };
    // rocket.jpg is 640x427: resized to the bound (FFCV's truncated ratio) and encoded.
    let (rocket, row) = by_name("rocket.jpg");
    assert_eq!(
        (row["width"].as_u64(), row["height"].as_u64()),
        (Some(480), Some(320))
    );
    let resized =
        ffcv::image::downscale_to_max_resolution(&read_image_bytes(&rocket.bytes).unwrap(), 480)
            .unwrap()
            .unwrap();
    assert_eq!(row["jpeg_sha256"], hex(&encode_jpeg(&resized, 90).unwrap()));
    // CMYK: PIL's convert("RGB") of the source, encoded as a baseline YCbCr JPEG.
    let (cmyk, row) = by_name("coffee_cmyk.jpg");
    let rgb = read_image_bytes(&cmyk.bytes).unwrap();
    assert_eq!(row["jpeg_sha256"], hex(&encode_jpeg(&rgb, 90).unwrap()));
    assert_eq!(
        (row["width"].as_u64(), row["height"].as_u64()),
        (Some(480), Some(320))
    );
    // Gray: stored unchanged and decoded to RGB with R = G = B. Its pixels differ from
    // PIL's convert("RGB") only by the fast IDCT's rounding, less than re-encoding them
    // (without the flag) would make them differ.
    let (gray, row) = by_name("coffee_gray.jpg");
    assert_eq!(row["jpeg_sha256"], hex(&gray.bytes));
    let pixels = decode_jpeg(&gray.bytes, 1 << 24).unwrap().into_pixels();
    assert!(pixels.chunks_exact(3).all(|p| p[0] == p[1] && p[1] == p[2]));
    let pil = read_image_bytes(&gray.bytes).unwrap();
    let reencoded = decode_jpeg(&encode_jpeg(&pil, 90).unwrap(), 1 << 24)
        .unwrap()
        .into_pixels();
    let distance = |a: &[u8]| -> (u8, u64) {
        let diffs = a.iter().zip(pil.pixels()).map(|(x, y)| x.abs_diff(*y));
        (
            diffs.clone().max().unwrap(),
            diffs.map(u64::from).sum::<u64>(),
        )
    };
    let (kept_max, kept_sum) = distance(&pixels);
    let (_, reencoded_sum) = distance(&reencoded);
    assert!(
        kept_max <= 8,
        "largest difference from PIL's decode: {kept_max}"
    );
    assert!(
        kept_sum < reencoded_sum,
        "{kept_sum} (kept) against {reencoded_sum} (re-encoded)"
    );
}

#[test]
fn smart_and_proportion_decide_raw_or_jpeg_as_without_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let images: Vec<Variant> = readable()
        .into_iter()
        .filter(|v| v.class != "c_png")
        .collect();
    write_folder(&src, &images);
    let folder = ["write", "image-folder", src.to_str().unwrap()];
    // Above 400000 raw bytes: the 333x217 crops stay raw, the larger images are JPEG.
    let bound = ["--max-resolution", "480"];
    for mode in [
        &["--write-mode", "smart", "--smart-threshold", "400000"][..],
        &[
            "--write-mode",
            "proportion",
            "--compress-probability",
            "0.5",
            "--seed",
            "3",
        ][..],
    ] {
        let mode = &[mode, &bound[..]].concat();
        let (_, kept) = write_and_dump(
            &folder,
            &dir.path().join("kept.beton"),
            &[&mode[..], &["--jpeg-passthrough"]].concat(),
        );
        let (_, encoded) = write_and_dump(&folder, &dir.path().join("encoded.beton"), mode);
        let modes =
            |rows: &[Value]| -> Vec<Value> { rows.iter().map(|r| r["mode"].clone()).collect() };
        assert_eq!(modes(&kept), modes(&encoded), "{mode:?}");
        assert!(modes(&kept).contains(&Value::from("raw")), "{mode:?}");
        let mut unchanged = 0;
        for ((v, kept), encoded) in images.iter().zip(&kept).zip(&encoded) {
            if kept["mode"] == "raw" {
                assert_eq!(kept, encoded, "{}", v.name);
            } else if UNCHANGED.contains(&v.name.as_str()) {
                assert_eq!(kept["jpeg_sha256"], hex(&v.bytes), "{}", v.name);
                unchanged += 1;
            } else {
                assert_eq!(kept, encoded, "{}", v.name);
            }
        }
        assert!(unchanged > 0, "{mode:?}");
    }
}

#[test]
fn a_cut_jpeg_fails_the_write_and_raw_mode_refuses_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let cut: Vec<Variant> = image_variants::variants()
        .into_iter()
        .filter(|v| v.name == "truncated.jpg")
        .collect();
    write_folder(&src, &cut);
    let out = dir.path().join("out.beton");
    let run = ffcv([
        "write",
        "image-folder",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--write-mode",
        "jpg",
        "--jpeg-passthrough",
    ]);
    run.assert_runtime_error("truncated.jpg");
    assert!(!out.exists());
    let run = ffcv([
        "write",
        "image-folder",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--jpeg-passthrough",
    ]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("--jpeg-passthrough"), "{}", run.stderr);
}
