//! The baseline decoder against libjpeg-turbo 2.1.5 `TJFLAG_FASTDCT` decodes
//! of JPEG layouts the FFCV fixture does not cover: every chroma subsampling
//! the fast path handles, tiny and odd sizes, restart intervals, 16-bit
//! quantization tables, grayscale; plus the general decoder's fallback for
//! progressive and 4:1:1 files.

use crate::image_support;

use image_support::{b64, channel_diff};
use rgb_image::{JpegDecoder, decode_jpeg_into};
use serde_json::Value;

#[test]
fn baseline_layouts_decode_bit_identical_to_libjpeg_turbo_fastdct() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/turbo_fastdct.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut decoder = JpegDecoder::new();
    let mut out = vec![0u8; 80 * 80 * 3];
    let mut exact = 0;
    for c in doc["cases"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let jpeg = b64(c["jpeg_b64"].as_str().unwrap());
        let expected = b64(c["fastdct_b64"].as_str().unwrap());
        let (h, w) = decoder.decode_into(&jpeg, &mut out).unwrap();
        assert_eq!(
            (u64::from(h), u64::from(w)),
            (c["height"].as_u64().unwrap(), c["width"].as_u64().unwrap()),
            "{name}"
        );
        let ours = &out[..expected.len()];
        if name.contains("general decoder") {
            // jpeg-decoder's accurate IDCT: close to the fast one, not equal.
            let (mean, max) = channel_diff(ours, &expected);
            assert!(
                mean.iter().all(|&m| m < 2.5) && max.iter().all(|&m| m <= 12),
                "{name}: {mean:?} {max:?}"
            );
        } else {
            assert!(
                ours == &expected[..],
                "{name}: differs from libjpeg-turbo {:?}",
                channel_diff(ours, &expected)
            );
            exact += 1;
        }
        // The one-shot function gives the same bytes as the reused decoder.
        let mut again = vec![0u8; expected.len()];
        decode_jpeg_into(&jpeg, &mut again).unwrap();
        assert_eq!(again, ours, "{name}");
    }
    assert_eq!(exact, 13);
}

/// Truncations and bit flips of every layout (restart markers, 4:2:2, 4:4:0,
/// tiny sizes, progressive) give Ok or an error, never a panic; most
/// truncations are errors.
#[test]
fn damaged_layouts_never_panic() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/turbo_fastdct.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut decoder = JpegDecoder::new();
    const CAP: usize = 80 * 80 * 3;
    let mut out = vec![0u8; CAP];
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut errors = 0usize;
    for c in doc["cases"].as_array().unwrap() {
        let jpeg = b64(c["jpeg_b64"].as_str().unwrap());
        for cut in (0..jpeg.len()).step_by(7) {
            errors += usize::from(decoder.decode_into(&jpeg[..cut], &mut out).is_err());
        }
        for _ in 0..150 {
            let mut bad = jpeg.clone();
            for _ in 0..1 + next() % 4 {
                let r = next();
                let at = (r % bad.len() as u64) as usize;
                bad[at] ^= 1 << (r >> 61);
            }
            if let Ok((h, w)) = decoder.decode_into(&bad, &mut out) {
                assert!((h * w * 3) as usize <= CAP);
            }
        }
    }
    assert!(errors > 500, "{errors}");
}

/// The boxes a region decode is checked on for a `h x w` image: the whole
/// image, every corner pixel, single rows and columns at the edges and the
/// middle, and pseudo-random boxes of every size class.
fn region_boxes(h: u32, w: u32) -> Vec<rgb_image::CropBox> {
    use rgb_image::CropBox;
    let mut boxes = vec![
        CropBox { i: 0, j: 0, h, w },
        CropBox {
            i: 0,
            j: 0,
            h: 1,
            w: 1,
        },
        CropBox {
            i: h - 1,
            j: w - 1,
            h: 1,
            w: 1,
        },
        CropBox {
            i: 0,
            j: w - 1,
            h: 1,
            w: 1,
        },
        CropBox {
            i: h - 1,
            j: 0,
            h: 1,
            w: 1,
        },
        CropBox {
            i: h / 2,
            j: 0,
            h: 1,
            w,
        },
        CropBox {
            i: 0,
            j: w / 2,
            h,
            w: 1,
        },
        CropBox {
            i: h - 1,
            j: 0,
            h: 1,
            w,
        },
        CropBox {
            i: 0,
            j: w - 1,
            h,
            w: 1,
        },
    ];
    // A small LCG so the boxes are the same on every run.
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(h * 1000 + w);
    let mut next = |n: u32| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) % u64::from(n)) as u32
    };
    for _ in 0..40 {
        let (bh, bw) = (1 + next(h), 1 + next(w));
        boxes.push(CropBox {
            i: next(h - bh + 1),
            j: next(w - bw + 1),
            h: bh,
            w: bw,
        });
    }
    boxes
}

/// Asserts that `region` holds `full`'s pixels inside `b` (both packed
/// `w`-wide RGB).
fn assert_box_equal(region: &[u8], full: &[u8], w: u32, b: rgb_image::CropBox, what: &str) {
    for y in b.i..b.i + b.h {
        let start = ((y * w + b.j) * 3) as usize;
        let end = start + (b.w * 3) as usize;
        assert!(
            region[start..end] == full[start..end],
            "{what}: row {y} of box {b:?} differs from the full decode"
        );
    }
}

/// A region decode gives libjpeg-turbo's pixels inside the box for every
/// layout (4:2:0, 4:2:2, 4:4:0, 4:4:4, grayscale, odd and tiny sizes,
/// restart intervals, the general decoder's fallback), whatever the output
/// buffer and the decoder's planes held before.
#[test]
fn region_decode_matches_full_decode_inside_the_box() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/turbo_fastdct.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    let mut decoder = JpegDecoder::new();
    let mut full = vec![0u8; 80 * 80 * 3];
    let mut region = vec![0u8; 80 * 80 * 3];
    let mut checked = 0;
    for (n, c) in cases.iter().enumerate() {
        let name = c["name"].as_str().unwrap();
        let jpeg = b64(c["jpeg_b64"].as_str().unwrap());
        let (h, w) = decoder.decode_into(&jpeg, &mut full).unwrap();
        let previous = b64(cases[(n + 1) % cases.len()]["jpeg_b64"].as_str().unwrap());
        for (k, b) in region_boxes(h, w).into_iter().enumerate() {
            // Leave another image in the decoder's planes and junk in the
            // output, so the box cannot pass by reusing earlier samples.
            if k % 3 == 0 {
                decoder.decode_into(&previous, &mut region).unwrap();
            }
            region.fill(0xA5 ^ k as u8);
            let got = decoder.decode_region_into(&jpeg, b, &mut region).unwrap();
            assert_eq!(got, (h, w), "{name}");
            assert_box_equal(&region, &full, w, b, name);
            checked += 1;
        }
    }
    assert_eq!(checked, cases.len() * 49);
}

/// The benchmark's kind of image (160–256 px 4:2:0 quality 90, what FFCV's
/// writer stores) under many boxes, and a box that does not fit the JPEG
/// falls back to the whole image.
#[test]
fn region_decode_of_synthetic_jpegs_and_oversized_box() {
    use rgb_image::{CropBox, SyntheticImageSpec, synthetic_jpeg};
    let spec = SyntheticImageSpec {
        min_side: 160,
        max_side: 256,
    };
    let mut decoder = JpegDecoder::new();
    let mut full = vec![0u8; 256 * 256 * 3];
    let mut region = vec![0u8; 256 * 256 * 3];
    for index in 0..6 {
        let (jpeg, w, h) = synthetic_jpeg(3, index, spec, 90).unwrap();
        assert_eq!(decoder.decode_into(&jpeg, &mut full).unwrap(), (h, w));
        for b in region_boxes(h, w) {
            region.fill(0x5A);
            assert_eq!(
                decoder.decode_region_into(&jpeg, b, &mut region).unwrap(),
                (h, w)
            );
            assert_box_equal(&region, &full, w, b, "synthetic");
        }
        let too_big = CropBox { i: 1, j: 0, h, w };
        region.fill(0);
        decoder
            .decode_region_into(&jpeg, too_big, &mut region)
            .unwrap();
        let n = (h * w * 3) as usize;
        assert!(region[..n] == full[..n], "oversized box decodes everything");
    }
}
