//! JPEG decoding against FFCV's libjpeg-turbo decodes (bit-identical), the
//! end-to-end center-crop pipeline against the loader's recorded outputs,
//! and corrupt input handling.

use crate::image_support;

use image_support::{channel_diff, jpeg_samples};
use rgb_image::{
    AreaResizer, CropBox, ImageError, JpegDecoder, RgbImage, center_crop_box, decode_jpeg_into,
    encode_jpeg, jpeg_info,
};

/// The baseline decoder reproduces libjpeg-turbo's TJFLAG_FASTDCT decode
/// (FFCV's `imdecode`) byte for byte on all 24 fixture images.
#[test]
fn full_decodes_equal_libjpeg_turbo_fast_dct() {
    let mut decoder = JpegDecoder::new();
    let mut out = vec![0u8; 120 * 120 * 3];
    for s in jpeg_samples() {
        let (h, w) = decoder.decode_into(&s.jpeg, &mut out).unwrap();
        assert_eq!((h, w), (s.height, s.width), "sample {}", s.sample);
        let ours = &out[..(h * w * 3) as usize];
        assert!(
            ours == &s.full_decode[..],
            "sample {}: {:?}",
            s.sample,
            channel_diff(ours, &s.full_decode)
        );
    }
}

/// decode -> center crop 224/256 -> INTER_AREA 32x32 against FFCV 1.0.2's
/// loader output: identical for all 24 images (so within the bound
/// of mean <= 1.0 and max <= 12 per channel, which is asserted too).
#[test]
fn center_crop_pipeline_reproduces_ffcv_outputs() {
    let samples = jpeg_samples();
    let mut decoder = JpegDecoder::new();
    let mut full = vec![0u8; 120 * 120 * 3];
    let mut resizer = AreaResizer::new();
    let mut out = vec![0u8; 32 * 32 * 3];
    let (mut sum, mut max) = ([0.0f64; 3], [0u8; 3]);
    for s in &samples {
        let (h, w) = decoder.decode_into(&s.jpeg, &mut full).unwrap();
        let crop = center_crop_box(h, w, 224.0 / 256.0);
        resizer
            .resize_crop_into(&full, h, w, crop, &mut out, 32, 32)
            .unwrap();
        assert!(out == s.output, "sample {}", s.sample);
        let (m, x) = channel_diff(&out, &s.output);
        for c in 0..3 {
            sum[c] += m[c];
            max[c] = max[c].max(x[c]);
        }
    }
    let mean = sum.map(|v| v / samples.len() as f64);
    eprintln!("all 24 outputs: per-channel mean {mean:.3?}, max {max:?}");
    assert!(mean.iter().all(|&m| m <= 1.0), "mean {mean:?}");
    assert!(max.iter().all(|&m| m <= 12), "max {max:?}");
}

#[test]
fn jpeg_info_reads_the_header() {
    let s = &jpeg_samples()[0];
    let info = jpeg_info(&s.jpeg).unwrap();
    assert_eq!(
        (info.height, info.width, info.components),
        (s.height, s.width, 3)
    );
}

#[test]
fn too_small_output_is_an_error_before_decoding() {
    let s = &jpeg_samples()[0];
    let mut out = vec![0u8; (s.height * s.width * 3 - 1) as usize];
    match decode_jpeg_into(&s.jpeg, &mut out) {
        Err(ImageError::BufferTooSmall { height, width, .. }) => {
            assert_eq!((height, width), (s.height, s.width));
        }
        other => panic!("expected BufferTooSmall, got {other:?}"),
    }
}

#[test]
fn grayscale_jpeg_decodes_to_equal_rgb_channels() {
    let mut gray = Vec::new();
    for y in 0..24u32 {
        for x in 0..40u32 {
            gray.push((x * 4 + y * 2) as u8);
        }
    }
    let mut jpeg = Vec::new();
    jpeg_encoder::Encoder::new(&mut jpeg, 95)
        .encode(&gray, 40, 24, jpeg_encoder::ColorType::Luma)
        .unwrap();
    assert_eq!(jpeg_info(&jpeg).unwrap().components, 1);
    let mut out = vec![0u8; 40 * 24 * 3];
    assert_eq!(decode_jpeg_into(&jpeg, &mut out).unwrap(), (24, 40));
    for (px, &g) in out.chunks_exact(3).zip(&gray) {
        assert!(px[0] == px[1] && px[1] == px[2]);
        assert!(px[0].abs_diff(g) <= 4, "{} vs {g}", px[0]);
    }
}

#[test]
fn garbage_and_empty_input_are_errors() {
    let mut out = vec![0u8; 64 * 64 * 3];
    for bad in [
        &b""[..],
        b"\xff\xd8",
        b"not a jpeg at all",
        &[0xFF, 0xD8, 0xFF, 0xC0, 0, 2],
    ] {
        assert!(
            matches!(
                decode_jpeg_into(bad, &mut out),
                Err(ImageError::JpegDecode { .. })
            ),
            "{bad:?}"
        );
    }
}

/// Every truncation and thousands of bit flips of real JPEGs: the decoder
/// returns Ok or a typed error and never panics.
#[test]
fn truncated_and_bit_flipped_jpegs_never_panic() {
    let samples = jpeg_samples();
    let mut out = vec![0u8; 120 * 120 * 3];
    let mut errors = 0usize;
    for s in samples.iter().take(6) {
        for cut in 0..s.jpeg.len() {
            if decode_jpeg_into(&s.jpeg[..cut], &mut out).is_err() {
                errors += 1;
            }
        }
    }
    // Cutting the header or scan leaves nothing decodable in most prefixes.
    assert!(errors > 1000, "{errors}");
    let source = RgbImage::new(
        48,
        40,
        (0..48 * 40 * 3).map(|v| (v * 7 % 251) as u8).collect(),
    )
    .unwrap();
    let own = encode_jpeg(&source, 90).unwrap();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for jpeg in samples.iter().take(4).map(|s| &s.jpeg).chain([&own]) {
        for _ in 0..400 {
            let mut bad = jpeg.clone();
            for _ in 0..3 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let at = (state % bad.len() as u64) as usize;
                bad[at] ^= 1 << (state >> 60 & 7);
            }
            if let Ok((h, w)) = decode_jpeg_into(&bad, &mut out) {
                assert!(h * w * 3 <= 120 * 120 * 3);
            }
        }
    }
}

/// Region decodes (what the crop decoders run, with their early stop below the crop and
/// blocks outside it stepped over) of truncated and bit-flipped JPEGs, with crops at
/// random places: Ok or a typed error, never a panic, and pixels inside the crop of an
/// undamaged prefix equal to the full decode's.
#[test]
fn region_decodes_of_damaged_jpegs_never_panic() {
    let samples = jpeg_samples();
    let mut full = vec![0u8; 120 * 120 * 3];
    let mut region = vec![0u8; 120 * 120 * 3];
    let mut decoder = JpegDecoder::new();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |m: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % m.max(1)
    };
    let mut compared = 0usize;
    for s in samples.iter().take(6) {
        let info = jpeg_info(&s.jpeg).unwrap();
        let (h, w) = (info.height as u64, info.width as u64);
        for round in 0..300 {
            let i = next(h) as u32;
            let j = next(w) as u32;
            let crop = CropBox {
                i,
                j,
                h: 1 + next(h - u64::from(i)) as u32,
                w: 1 + next(w - u64::from(j)) as u32,
            };
            let mut bad = s.jpeg.clone();
            if round % 2 == 0 {
                bad.truncate(next(bad.len() as u64) as usize);
            } else {
                for _ in 0..3 {
                    let at = next(bad.len() as u64) as usize;
                    bad[at] ^= 1 << next(8);
                }
            }
            let _ = decoder.decode_region_into(&bad, crop, &mut region);
        }
        // Undamaged: the crop's pixels equal the full decode's, wherever the crop is.
        decode_jpeg_into(&s.jpeg, &mut full).unwrap();
        for _ in 0..50 {
            let i = next(h) as u32;
            let j = next(w) as u32;
            let crop = CropBox {
                i,
                j,
                h: 1 + next(h - u64::from(i)) as u32,
                w: 1 + next(w - u64::from(j)) as u32,
            };
            decoder
                .decode_region_into(&s.jpeg, crop, &mut region)
                .unwrap();
            for y in crop.i..crop.i + crop.h {
                let row = (y as usize * w as usize + crop.j as usize) * 3;
                let len = crop.w as usize * 3;
                assert_eq!(
                    region[row..row + len],
                    full[row..row + len],
                    "crop {crop:?} row {y}"
                );
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 6 * 50);
}
