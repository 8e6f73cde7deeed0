//! INTER_AREA resize is bit-identical to OpenCV: on the FFCV fixture's
//! recorded decodes and on OpenCV 4.10 outputs for assorted sizes.

use crate::image_support;

use image_support::{FIXTURES, b64, jpeg_samples};
use rgb_image::{AreaResizer, CropBox, center_crop_box, resize_area_into};
use serde_json::Value;
use sha2::{Digest, Sha256};

#[test]
fn center_crop_boxes_equal_the_fixture() {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/images_jpg.expected.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(doc["jpeg"]["crop_decoder"]["ratio"].as_f64(), Some(0.875));
    for s in jpeg_samples() {
        let b = center_crop_box(s.height, s.width, 224.0 / 256.0);
        assert_eq!([b.i, b.j, b.h, b.w], s.crop, "sample {}", s.sample);
    }
}

#[test]
fn inter_area_on_recorded_decodes_reproduces_every_fixture_output() {
    let mut resizer = AreaResizer::new();
    let mut out = vec![0u8; 32 * 32 * 3];
    for s in jpeg_samples() {
        let [i, j, h, w] = s.crop;
        let crop = CropBox { i, j, h, w };
        resizer
            .resize_crop_into(&s.full_decode, s.height, s.width, crop, &mut out, 32, 32)
            .unwrap();
        assert!(
            out == s.output,
            "sample {} ({}x{}, crop {:?}) differs",
            s.sample,
            s.height,
            s.width,
            crop
        );
    }
}

/// splitmix64 bytes, as the generator script's `gen_bytes`.
fn gen_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 8);
    let mut i: u64 = 0;
    while out.len() < n {
        let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
        i += 1;
    }
    out.truncate(n);
    out
}

fn hex_sha256(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

#[test]
fn inter_area_matches_opencv_4_10_for_every_path() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/opencv_inter_area.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 60);
    let mut resizer = AreaResizer::new();
    let mut failures = Vec::new();
    let (mut up, mut down_int, mut down_area) = (0, 0, 0);
    for c in cases {
        let g = |k: &str| c[k].as_u64().unwrap() as u32;
        let (sh, sw, dh, dw) = (g("src_h"), g("src_w"), g("dst_h"), g("dst_w"));
        let src = match c["src_b64"].as_str() {
            Some(s) => b64(s),
            None => gen_bytes(c["seed"].as_u64().unwrap(), (sh * sw * 3) as usize),
        };
        assert_eq!(hex_sha256(&src), c["src_sha256"].as_str().unwrap());
        let mut dst = vec![0u8; (dh * dw * 3) as usize];
        resizer
            .resize_into(&src, sw as usize * 3, sh, sw, &mut dst, dh, dw)
            .unwrap();
        if hex_sha256(&dst) != c["dst_sha256"].as_str().unwrap() {
            failures.push((sh, sw, dh, dw));
        }
        // The one-shot helper agrees with the reused resizer.
        let mut again = vec![0u8; dst.len()];
        resize_area_into(&src, sh, sw, &mut again, dh, dw).unwrap();
        assert_eq!(again, dst);
        if dh > sh || dw > sw {
            up += 1;
        } else if sh % dh == 0 && sw % dw == 0 {
            down_int += 1;
        } else {
            down_area += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "differs from OpenCV for (sh, sw, dh, dw) = {failures:?}"
    );
    // The data covers all three non-trivial OpenCV paths.
    assert!(
        up >= 10 && down_int >= 5 && down_area >= 10,
        "{up} {down_int} {down_area}"
    );
}

#[test]
fn resize_rejects_bad_buffers_and_crops() {
    let mut r = AreaResizer::new();
    let src = vec![0u8; 10 * 10 * 3];
    let mut dst = vec![0u8; 4 * 4 * 3];
    // Source too short for its claimed size.
    assert!(r.resize_into(&src, 30, 11, 10, &mut dst, 4, 4).is_err());
    // Destination too small.
    assert!(r.resize_into(&src, 30, 10, 10, &mut dst, 5, 4).is_err());
    // Empty sizes.
    assert!(r.resize_into(&src, 30, 0, 10, &mut dst, 4, 4).is_err());
    assert!(r.resize_into(&src, 30, 10, 10, &mut dst, 0, 4).is_err());
    // A crop leaving the image, and an empty crop.
    let outside = CropBox {
        i: 5,
        j: 0,
        h: 6,
        w: 4,
    };
    assert!(
        r.resize_crop_into(&src, 10, 10, outside, &mut dst, 4, 4)
            .is_err()
    );
    let empty = CropBox {
        i: 0,
        j: 0,
        h: 0,
        w: 4,
    };
    assert!(
        r.resize_crop_into(&src, 10, 10, empty, &mut dst, 4, 4)
            .is_err()
    );
    // A good call still works after the errors.
    r.resize_crop_into(
        &src,
        10,
        10,
        CropBox {
            i: 1,
            j: 1,
            h: 8,
            w: 8,
        },
        &mut dst,
        4,
        4,
    )
    .unwrap();
}
