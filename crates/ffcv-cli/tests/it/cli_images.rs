//! Image commands: `ffcv write image-folder` round trips (PNG pixels exact, JPEG inputs as
//! their PIL-matching decode, a folder of real photographs and odd formats in every write
//! mode with `--skip-unreadable`, labels = sorted class index, every write mode), `ffcv write synthetic
//! --kind jpeg` files that `ffcv dump` decodes, `ffcv dump --decoder` equal to FFCV's
//! recorded crops and to the loader's first epoch; bad input exits 1.

use crate::support;
use ffcv_testkit::image_variants;

use std::path::{Path, PathBuf};

use ffcv::decode::RandomResizedCropRGBImageDecoder;
use ffcv::image::{RgbImage, decode_jpeg_accurate, encode_jpeg};
use ffcv::{Loader, PipelineSpec};
use sha2::{Digest, Sha256};
use support::{expected, ffcv, fixture};

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A `w x h` image whose pixels follow from `k`.
fn picture(w: u32, h: u32, k: u32) -> RgbImage {
    let pixels = (0..w * h * 3)
        .map(|i| ((i / 3 % w) * 7 + (i / 3 / w) * 3 + (i % 3) * 50 + k * 31) as u8)
        .collect();
    RgbImage::new(w, h, pixels).unwrap()
}

fn write_png(path: &Path, image: &RgbImage) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut encoder = png::Encoder::new(file, image.width(), image.height());
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().unwrap();
    writer.write_image_data(image.pixels()).unwrap();
}

/// One written image as the file should hold it: (label, pixels, width, height).
type Expected = (i64, Vec<u8>, u32, u32);

/// An image folder: classes `b_dog` (2 PNGs, 1 JPEG) and `a_cat` (1 PNG, 1 JPEG), and a
/// stray text file. Returns the folder and, in file order (`a_cat` first), each image's
/// (label, expected pixels, width, height).
fn image_folder(dir: &Path) -> (PathBuf, Vec<Expected>) {
    let src = dir.join("src");
    let (cat, dog) = (src.join("a_cat"), src.join("b_dog"));
    std::fs::create_dir_all(&cat).unwrap();
    std::fs::create_dir_all(&dog).unwrap();
    std::fs::write(dog.join("notes.txt"), b"not an image").unwrap();
    let mut want = Vec::new();
    let jpeg = |path: &Path, img: &RgbImage| {
        let bytes = encode_jpeg(img, 85).unwrap();
        std::fs::write(path, &bytes).unwrap();
        decode_jpeg_accurate(&bytes, 1 << 20).unwrap().into_pixels()
    };
    // a_cat: 1.png, 2.jpg
    let img = picture(20, 12, 1);
    write_png(&cat.join("1.png"), &img);
    want.push((0, img.pixels().to_vec(), 20, 12));
    let img = picture(18, 30, 2);
    want.push((0, jpeg(&cat.join("2.jpg"), &img), 18, 30));
    // b_dog: a.png, b.JPEG, c.png
    let img = picture(40, 40, 3);
    write_png(&dog.join("a.png"), &img);
    want.push((1, img.pixels().to_vec(), 40, 40));
    let img = picture(33, 17, 4);
    want.push((1, jpeg(&dog.join("b.JPEG"), &img), 33, 17));
    let img = picture(8, 9, 5);
    write_png(&dog.join("c.png"), &img);
    want.push((1, img.pixels().to_vec(), 8, 9));
    (src, want)
}

#[test]
fn image_folder_raw_round_trip_keeps_pixels_and_sorted_labels() {
    let dir = tempfile::tempdir().unwrap();
    let (src, want) = image_folder(dir.path());
    let out = dir.path().join("out.beton");
    let run = ffcv([
        "write".into(),
        "image-folder".into(),
        src.into_os_string(),
        out.clone().into_os_string(),
        "--workers".into(),
        "2".into(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout
            .contains("5 images in 2 classes (a_cat, b_dog), 5 raw + 0 jpg"),
        "{}",
        run.stdout
    );
    let rows = ffcv(["dump".into(), out.into_os_string()]).json_lines();
    assert_eq!(rows.len(), 5);
    for (row, (label, pixels, w, h)) in rows.iter().zip(&want) {
        assert_eq!(row["label"], *label);
        assert_eq!(row["image"]["mode"], "raw");
        assert_eq!(row["image"]["width"], *w);
        assert_eq!(row["image"]["height"], *h);
        assert_eq!(
            row["image"]["sha256"],
            hex(pixels),
            "sample {}",
            row["sample"]
        );
    }
}

#[test]
fn image_folder_jpg_mode_with_max_resolution_downscales_keeping_aspect() {
    let dir = tempfile::tempdir().unwrap();
    let (src, want) = image_folder(dir.path());
    let out = dir.path().join("out.beton");
    let run = ffcv([
        "write".into(),
        "image-folder".into(),
        src.into_os_string(),
        out.clone().into_os_string(),
        "--write-mode".into(),
        "jpg".into(),
        "--max-resolution".into(),
        "20".into(),
        "--jpeg-quality".into(),
        "95".into(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stdout.contains("0 raw + 5 jpg"), "{}", run.stdout);
    let rows = ffcv(["dump".into(), out.into_os_string()]).json_lines();
    for (row, (_, _, w, h)) in rows.iter().zip(&want) {
        assert_eq!(row["image"]["mode"], "jpg");
        let (rw, rh) = (
            row["image"]["width"].as_u64().unwrap() as u32,
            row["image"]["height"].as_u64().unwrap() as u32,
        );
        // FFCV's resizer: scale = 20 / longest side, sides truncated.
        let longest = (*w).max(*h);
        let (ew, eh) = if longest > 20 {
            let s = 20.0 / f64::from(longest);
            ((f64::from(*w) * s) as u32, (f64::from(*h) * s) as u32)
        } else {
            (*w, *h)
        };
        assert_eq!((rw, rh), (ew, eh), "sample {}", row["sample"]);
    }
}

#[test]
fn image_folder_smart_mode_compresses_only_images_above_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let (src, want) = image_folder(dir.path());
    let out = dir.path().join("out.beton");
    // 40x40x3 = 4800 bytes and 18x30x3 = 1620 are above 1500; the others are below.
    let run = ffcv([
        "write".into(),
        "image-folder".into(),
        src.into_os_string(),
        out.clone().into_os_string(),
        "--write-mode".into(),
        "smart".into(),
        "--smart-threshold".into(),
        "1500".into(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let rows = ffcv(["dump".into(), out.into_os_string()]).json_lines();
    for (row, (_, _, w, h)) in rows.iter().zip(&want) {
        let mode = if w * h * 3 > 1500 { "jpg" } else { "raw" };
        assert_eq!(row["image"]["mode"], mode, "sample {}", row["sample"]);
    }
}

#[test]
fn image_folder_errors_exit_1_naming_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.beton");
    let missing = dir.path().join("missing");
    ffcv([
        "write".into(),
        "image-folder".into(),
        missing.into_os_string(),
        out.clone().into_os_string(),
    ])
    .assert_runtime_error("missing: not a folder");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(empty.join("class")).unwrap();
    ffcv([
        "write".into(),
        "image-folder".into(),
        empty.into_os_string(),
        out.clone().into_os_string(),
    ])
    .assert_runtime_error("has no .jpg, .jpeg or .png files");
    let (src, _) = image_folder(dir.path());
    std::fs::write(src.join("b_dog").join("d.jpg"), b"\xff\xd8 not really").unwrap();
    ffcv([
        "write".into(),
        "image-folder".into(),
        src.into_os_string(),
        out.into_os_string(),
    ])
    .assert_runtime_error("d.jpg");
}

#[test]
fn synthetic_jpeg_is_deterministic_and_dump_decodes_it() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, seed: &str| {
        let out = dir.path().join(name);
        let run = ffcv([
            "write".into(),
            "synthetic".into(),
            out.clone().into_os_string(),
            "--kind".into(),
            "jpeg".into(),
            "--samples".into(),
            "12".into(),
            "--min-size".into(),
            "24".into(),
            "--max-size".into(),
            "48".into(),
            "--seed".into(),
            seed.into(),
        ]);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        out
    };
    let a = write("a.beton", "5");
    let b = write("b.beton", "5");
    let c = write("c.beton", "6");
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert_ne!(std::fs::read(&a).unwrap(), std::fs::read(&c).unwrap());
    let rows = ffcv(["dump".into(), a.into_os_string(), "--raw".into()]).json_lines();
    assert_eq!(rows.len(), 12);
    for row in &rows {
        let image = &row["image"];
        assert_eq!(image["mode"], "jpg");
        let (w, h) = (
            image["width"].as_u64().unwrap(),
            image["height"].as_u64().unwrap(),
        );
        assert!((24..=48).contains(&w) && (24..=48).contains(&h), "{w}x{h}");
        assert_eq!(image["shape"], serde_json::json!([h, w, 3]));
        assert_eq!(image["sha256"].as_str().unwrap().len(), 64);
        let label = row["label"].as_i64().unwrap();
        assert!((0..10).contains(&label));
    }
}

#[test]
fn dump_center_crop_decoder_equals_ffcvs_recorded_crops() {
    let exp = expected("images_jpg");
    let samples = exp["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "image")
        .unwrap()["samples"]
        .as_array()
        .unwrap()
        .clone();
    let rows = ffcv([
        "dump".into(),
        fixture("images_jpg").into_os_string(),
        "--decoder".into(),
        "image=center-crop:32x32:0.875".into(),
        "--fields".into(),
        "image".into(),
    ])
    .json_lines();
    assert_eq!(rows.len(), samples.len());
    for (row, sample) in rows.iter().zip(&samples) {
        assert_eq!(row["image"]["decoder"], "CenterCropRGBImageDecoder");
        assert_eq!(row["image"]["shape"], serde_json::json!([32, 32, 3]));
        assert_eq!(
            row["image"]["sha256"], sample["sha256"],
            "sample {}",
            row["sample"]
        );
    }
}

#[test]
fn dump_random_crop_with_a_seed_equals_the_loaders_first_epoch() {
    let dump = |seed: &str| -> Vec<String> {
        ffcv([
            "dump".into(),
            fixture("images_jpg").into_os_string(),
            "--decoder".into(),
            "image=random-resized-crop:16x24".into(),
            "--seed".into(),
            seed.into(),
            "--start".into(),
            "4".into(),
            "--count".into(),
            "10".into(),
        ])
        .json_lines()
        .iter()
        .map(|r| r["image"]["sha256"].as_str().unwrap().to_owned())
        .collect()
    };
    let mut loader = Loader::builder(fixture("images_jpg"))
        .batch_size(24)
        .drop_last(false)
        .order(ffcv::Order::Random)
        .seed(42)
        .num_workers(2)
        .pipeline(
            "image",
            PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((16, 24))),
        )
        .build()
        .unwrap();
    let batch = loader.iter().next().unwrap().unwrap();
    let img = batch.get::<u8>("image").unwrap();
    let mut by_id = vec![String::new(); 24];
    for (row, &s) in batch.sample_ids().iter().enumerate() {
        by_id[s as usize] = hex(&img.as_slice()[row * 1152..(row + 1) * 1152]);
    }
    assert_eq!(dump("42"), by_id[4..14].to_vec());
    assert_ne!(dump("43"), by_id[4..14].to_vec());
}

#[test]
fn dump_decoder_errors() {
    let path = fixture("images_jpg").into_os_string();
    ffcv([
        "dump".into(),
        path.clone(),
        "--decoder".into(),
        "image=simple".into(),
    ])
    .assert_runtime_error("one size");
    ffcv([
        "dump".into(),
        path.clone(),
        "--decoder".into(),
        "picture=simple".into(),
    ])
    .assert_runtime_error("no field named `picture`");
    let run = ffcv([
        "dump".into(),
        path,
        "--decoder".into(),
        "image=center-crop:32".into(),
    ]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("not HxW"), "{}", run.stderr);
}

/// `ffcv write image-folder SRC OUT --skip-unreadable` plus `extra` arguments.
fn write_folder_skipping(src: &Path, out: &Path, extra: &[&str]) -> support::Run {
    let mut args: Vec<std::ffi::OsString> = vec![
        "write".into(),
        "image-folder".into(),
        src.into(),
        out.into(),
        "--skip-unreadable".into(),
        "--workers".into(),
        "2".into(),
    ];
    args.extend(extra.iter().map(Into::into));
    ffcv(args)
}

#[test]
fn real_photographs_and_odd_formats_write_in_every_mode_skipping_the_truncated_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let variants = image_variants::write_folder(&src);
    let readable: Vec<_> = variants.iter().filter(|v| v.readable).collect();
    // Folder order: classes sorted, files sorted byte-wise within each.
    let mut order: Vec<_> = readable
        .iter()
        .map(|v| (v.class, v.name.as_str()))
        .collect();
    order.sort();
    let classes = ["a_photos", "b_jpeg", "c_png"];
    for (mode, extra) in [
        ("raw", vec![]),
        ("jpg", vec!["--max-resolution", "256"]),
        ("smart", vec!["--smart-threshold", "200000"]),
        ("proportion", vec!["--compress-probability", "0.5"]),
    ] {
        let out = dir.path().join(format!("{mode}.beton"));
        let mut args = vec!["--write-mode", mode];
        args.extend(extra);
        let run = write_folder_skipping(&src, &out, &args);
        assert_eq!(run.code, Some(0), "{mode}: {}", run.stderr);
        let n = readable.len();
        assert!(
            run.stdout.contains(&format!(
                "{n} images in 3 classes (a_photos, b_jpeg, c_png)"
            )),
            "{mode}: {}",
            run.stdout
        );
        assert!(
            run.stdout
                .contains("ignored 2 non-image files in the class folders"),
            "{}",
            run.stdout
        );
        assert!(
            run.stdout.contains("skipped 1 unreadable files:"),
            "{}",
            run.stdout
        );
        assert!(run.stdout.contains("truncated.jpg: "), "{}", run.stdout);
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(format!("{mode}.beton.skipped.json")))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(report["images"], n);
        let skipped = report["skipped"].as_array().unwrap();
        assert_eq!(skipped.len(), 1);
        assert!(
            skipped[0]["path"]
                .as_str()
                .unwrap()
                .ends_with("b_jpeg/truncated.jpg")
        );
        assert!(
            skipped[0]["error"]
                .as_str()
                .unwrap()
                .contains("premature end"),
            "{}",
            skipped[0]
        );
        assert_eq!(report["non_images"].as_array().unwrap().len(), 2);

        let rows = ffcv(["dump".into(), out.into_os_string()]).json_lines();
        assert_eq!(rows.len(), n, "{mode}");
        for (row, (class, name)) in rows.iter().zip(&order) {
            let label = classes.iter().position(|c| c == class).unwrap();
            assert_eq!(row["label"], label, "{mode} {name}");
            let v = readable.iter().find(|v| v.name == *name).unwrap();
            let img = ffcv::image::read_image_bytes(&v.bytes).unwrap();
            let (w, h) = (
                row["image"]["width"].as_u64().unwrap(),
                row["image"]["height"].as_u64().unwrap(),
            );
            if mode == "jpg" {
                assert_eq!(row["image"]["mode"], "jpg");
                assert!(w.max(h) <= 256 && w.max(h) >= 255, "{name}: {w}x{h}");
            } else {
                assert_eq!((w, h), (u64::from(img.width()), u64::from(img.height())));
            }
            if mode == "raw" {
                // Stored as decoded: PIL's pixels (see image_sources.rs).
                assert_eq!(row["image"]["sha256"], hex(img.pixels()), "{name}");
            }
        }
    }
}

#[test]
fn an_unreadable_file_fails_the_write_by_default_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    image_variants::write_folder(&src);
    let out = dir.path().join("out.beton");
    ffcv([
        "write".into(),
        "image-folder".into(),
        src.into_os_string(),
        out.clone().into_os_string(),
    ])
    .assert_runtime_error("truncated.jpg");
    assert!(!out.exists());
    assert!(!dir.path().join("out.beton.skipped.json").exists());
}

#[test]
fn skipping_every_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("a").join("x.jpg"), b"\xff\xd8\xff").unwrap();
    write_folder_skipping(&src, &dir.path().join("o.beton"), &[])
        .assert_runtime_error("has no readable .jpg, .jpeg or .png files");
}
