//! The baseline decoder against libjpeg-turbo 2.1.5 `TJFLAG_FASTDCT` decodes
//! of JPEG layouts the FFCV fixture does not cover: every chroma subsampling
//! the fast path handles, tiny and odd sizes, restart intervals, 16-bit
//! quantization tables, grayscale; plus the general decoder's fallback for
//! progressive and 4:1:1 files.

mod image_support;

use ffcv::image::{JpegDecoder, decode_jpeg_into};
use image_support::{b64, channel_diff};
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
