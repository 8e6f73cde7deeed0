//! Source images decode as `PIL.Image.open(p).convert("RGB")` does: real
//! photographs and every odd format generated from them
//! (`image_variants`), checked against digests of Pillow 13's decode
//! (`data/pil_rgb.json`, made by `data/gen_pil_rgb.py`).
//!
//! Set `FFCV_IMAGE_FOLDER_OUT=DIR` to also write the test folder to `DIR`
//! (how `docs/images.md` feeds the same files to Pillow and FFCV 1.0.2).

use ffcv_testkit::image_variants;

use rgb_image::{ImageError, read_image_bytes, read_image_file};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn pil_digests() -> serde_json::Map<String, Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pil_rgb.json");
    let text = std::fs::read_to_string(path).expect("read pil_rgb.json");
    match serde_json::from_str(&text).expect("parse pil_rgb.json") {
        Value::Object(m) => m,
        _ => panic!("pil_rgb.json is not an object"),
    }
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn every_readable_variant_decodes_exactly_as_pillow() {
    if let Some(dir) = std::env::var_os("FFCV_IMAGE_FOLDER_OUT") {
        image_variants::write_folder(std::path::Path::new(&dir));
    }
    let pil = pil_digests();
    let mut checked = 0;
    for v in image_variants::variants().iter().filter(|v| v.readable) {
        let key = format!("{}/{}", v.class, v.name);
        let want = pil
            .get(&key)
            .unwrap_or_else(|| panic!("{key} missing from pil_rgb.json"));
        let img = read_image_bytes(&v.bytes).unwrap_or_else(|e| panic!("{key}: {e}"));
        let shape = [img.height(), img.width(), 3].map(|x| Value::from(x as u64));
        assert_eq!(want["shape"], Value::Array(shape.to_vec()), "{key}: shape");
        if v.name == "chelsea_gray16.png" {
            // Our documented rule differs from Pillow's here (see below).
            continue;
        }
        assert_eq!(
            want["sha256"].as_str(),
            Some(hex(img.pixels()).as_str()),
            "{key}: pixels differ from Pillow's decode"
        );
        checked += 1;
    }
    assert!(checked >= 26, "only {checked} variants compared");
}

#[test]
fn sixteen_bit_samples_keep_their_high_byte() {
    // Pillow takes the high byte of 16-bit RGB (checked by the digest
    // above) but clips 16-bit gray (`I;16`) to 255, which whitens nearly
    // every image; we take the high byte for gray too, so
    // `chelsea_gray16.png` (high bytes = `chelsea_gray.png`) decodes to the
    // 8-bit file's pixels.
    let all = image_variants::variants();
    let find = |n: &str| {
        let v = all.iter().find(|v| v.name == n).expect("variant");
        read_image_bytes(&v.bytes).expect("decode")
    };
    assert_eq!(find("chelsea_gray16.png"), find("chelsea_gray.png"));
    let pil = pil_digests();
    assert_ne!(
        pil["c_png/chelsea_gray16.png"]["sha256"], pil["c_png/chelsea_gray.png"]["sha256"],
        "Pillow's clipping should differ from the 8-bit file"
    );
}

#[test]
fn a_png_named_jpeg_is_sniffed_by_content() {
    let all = image_variants::variants();
    let lying = all
        .iter()
        .find(|v| v.name.ends_with(".JPEG"))
        .expect("variant");
    let rgb = all
        .iter()
        .find(|v| v.name == "chelsea_rgb.png")
        .expect("variant");
    assert_eq!(lying.bytes, rgb.bytes);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(&lying.name);
    std::fs::write(&path, &lying.bytes).expect("write");
    assert_eq!(
        read_image_file(&path).expect("decode"),
        read_image_bytes(&rgb.bytes).expect("decode")
    );
}

#[test]
fn a_truncated_jpeg_is_an_error_naming_the_file() {
    let all = image_variants::variants();
    let cut = all.iter().find(|v| !v.readable).expect("variant");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(&cut.name);
    std::fs::write(&path, &cut.bytes).expect("write");
    let err = read_image_file(&path).unwrap_err();
    assert!(matches!(err, ImageError::File { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("truncated.jpg"), "{msg}");
    assert!(msg.contains("premature end"), "{msg}");
    // Cut anywhere in the scan (not just at 60 %), it never panics.
    let full = std::fs::read(format!("{}/coffee.jpg", image_variants::PHOTOS)).expect("read");
    for end in (700..full.len() - 2).step_by(997) {
        assert!(read_image_bytes(&full[..end]).is_err(), "cut at {end}");
    }
    let prog = std::fs::read(format!(
        "{}/chelsea_progressive.jpg",
        image_variants::PHOTOS
    ))
    .expect("read");
    for end in (700..prog.len() - 2).step_by(991) {
        assert!(
            read_image_bytes(&prog[..end]).is_err(),
            "progressive cut at {end}"
        );
    }
}

#[test]
fn exif_orientation_is_not_applied() {
    // PIL's `convert("RGB")` ignores EXIF orientation; so do we: a JPEG
    // tagged "rotate 90" decodes to the stored pixels, not turned.
    let px: Vec<u8> = (0..40 * 24 * 3).map(|i| (i * 7 % 251) as u8).collect();
    let encode = |exif: bool| {
        let mut out = Vec::new();
        let mut enc = jpeg_encoder::Encoder::new(&mut out, 90);
        if exif {
            // A little-endian TIFF header with one IFD entry: Orientation
            // (0x0112), SHORT, count 1, value 6 (rotate 90 clockwise).
            let tiff: [u8; 26] = [
                b'I', b'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0,
                0, 0, 0,
            ];
            enc.add_exif_metadata(&tiff).expect("exif");
        }
        enc.encode(&px, 40, 24, jpeg_encoder::ColorType::Rgb)
            .expect("encode");
        out
    };
    let (plain, tagged) = (encode(false), encode(true));
    assert_ne!(plain, tagged);
    let (a, b) = (
        read_image_bytes(&plain).expect("decode"),
        read_image_bytes(&tagged).expect("decode"),
    );
    assert_eq!((b.width(), b.height()), (40, 24));
    assert_eq!(a, b);
}

#[test]
fn unsupported_jpeg_kinds_are_clear_errors() {
    // An arithmetic-coded frame header (SOF9) after SOI.
    let sof9 = [0xFF, 0xD8, 0xFF, 0xC9, 0, 11, 8, 0, 8, 0, 8, 1, 1, 0x11, 0];
    let err = read_image_bytes(&sof9).unwrap_err();
    assert!(err.to_string().contains("arithmetic"), "{err}");
    // 12-bit samples.
    let sof1 = [0xFF, 0xD8, 0xFF, 0xC1, 0, 11, 12, 0, 8, 0, 8, 1, 1, 0x11, 0];
    let err = read_image_bytes(&sof1).unwrap_err();
    assert!(err.to_string().contains("12-bit"), "{err}");
}

#[test]
fn damaged_jpegs_give_errors_or_pixels_never_a_panic() {
    // Bytes flipped all over real baseline and progressive files (headers,
    // tables, scans): the decode returns, whatever it returns.
    for name in ["coffee.jpg", "chelsea_progressive.jpg", "rocket.jpg"] {
        let good = std::fs::read(format!("{}/{name}", image_variants::PHOTOS)).expect("read");
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..60 {
            let mut bad = good.clone();
            for _ in 0..1 + round % 4 {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                // Half the flips in the first 700 bytes (the headers).
                let span = if state >> 63 == 1 { 700 } else { bad.len() };
                let at = (state >> 20) as usize % span;
                bad[at] ^= (state >> 8) as u8 | 1;
            }
            let _ = read_image_bytes(&bad);
        }
    }
}

#[test]
fn an_image_folder_skips_unreadable_files_keeping_class_labels() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let photo = std::fs::read(format!("{}/chelsea.jpg", image_variants::PHOTOS)).expect("read");
    for class in ["a", "b", "c"] {
        std::fs::create_dir_all(root.join(class)).expect("mkdir");
    }
    std::fs::write(root.join("a/1.jpg"), &photo).expect("write");
    // Class b holds only an unreadable file: its label (1) stays taken.
    std::fs::write(root.join("b/bad.png"), b"\x89PNG\r\n\x1a\nbroken").expect("write");
    std::fs::write(root.join("c/2.JPG"), &photo).expect("write");
    std::fs::write(root.join("c/notes.txt"), b"text").expect("write");
    let mut folder = rgb_image::ImageFolder::scan(root).expect("scan");
    assert_eq!(folder.classes(), ["a", "b", "c"]);
    assert_eq!(folder.images().len(), 3);
    assert_eq!(folder.non_images(), [root.join("c/notes.txt")]);
    let skipped = folder.skip_unreadable(2).expect("skip").to_vec();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].path, root.join("b/bad.png"));
    assert!(skipped[0].error.contains("PNG"), "{}", skipped[0].error);
    let labels: Vec<i64> = folder.images().iter().map(|i| i.label).collect();
    assert_eq!(labels, [0, 2]);
    assert_eq!(folder.read(1).expect("read").width(), 451);
    let report: Value = serde_json::from_str(&folder.report_json()).expect("json");
    assert_eq!(report["images"], 2);
    assert_eq!(
        report["skipped"][0]["error"].as_str(),
        Some(skipped[0].error.as_str())
    );
    assert_eq!(report["non_images"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_large_frame_cut_after_its_headers_is_a_truncation_error() {
    // A real 4:2:0 file whose frame header is patched to claim 12000x12000
    // and whose scan is cut after a few hundred bytes is a truncation error
    // (the decoder stops at the first MCU row that runs out rather than
    // decoding 2.25 million blocks of padding; that speed is not asserted).
    let mut jpeg = std::fs::read(format!("{}/coffee.jpg", image_variants::PHOTOS)).expect("read");
    let sof = jpeg
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("SOF0");
    jpeg[sof + 5..sof + 9].copy_from_slice(&[0x2E, 0xE0, 0x2E, 0xE0]);
    let sos = jpeg
        .windows(2)
        .position(|w| w == [0xFF, 0xDA])
        .expect("SOS");
    jpeg.truncate(sos + 400);
    let err = read_image_bytes(&jpeg).unwrap_err();
    assert!(err.to_string().contains("premature end"), "{err}");
}
