//! The AVX2 kernels against the portable ones on many random inputs, and
//! both against the recorded libjpeg-turbo and OpenCV outputs. On a CPU
//! without AVX2 each test says so on stderr and checks only the
//! portable path where it has a reference.
//!
//! (Compiled on x86_64 only: elsewhere there is no AVX2 path.)

use super::CropBox;
use super::resize::{AreaResizer, hsum_area, pair_weights, sat_u8_row, scale_add};
use super::simd::Isa;
use super::turbo::{Outcome, TurboDecoder, h2v1_fancy, h2v2_fancy, idct_ifast, ycc_to_rgb_row};
use base64::Engine;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// `Isa::Avx2` when this CPU runs the AVX2 kernels; otherwise says why the
/// comparison is skipped (`simd_resize`'s tests use it too).
pub(super) fn avx2(test: &str) -> Option<Isa> {
    match Isa::detect() {
        Isa::Avx2 => Some(Isa::Avx2),
        Isa::Scalar => {
            eprintln!("{test}: this CPU lacks AVX2, the AVX2 kernels are not tested here");
            None
        }
    }
}

/// splitmix64: reproducible inputs without a dependency (shared with
/// `simd_resize`'s tests).
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(super) fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn ycc_to_rgb_avx2_equals_portable_for_every_input() {
    let Some(fast) = avx2("ycc_to_rgb") else {
        return;
    };
    // Every (y, cb, cr): one row per (y, cb), cr running over all values.
    let cr: Vec<u8> = (0..=255).collect();
    let (mut a, mut b) = (vec![0u8; 768], vec![0u8; 768]);
    for y in 0..=255u8 {
        let yrow = vec![y; 256];
        for cb in 0..=255u8 {
            let cbrow = vec![cb; 256];
            ycc_to_rgb_row(Isa::Scalar, &yrow, &cbrow, &cr, &mut a);
            ycc_to_rgb_row(fast, &yrow, &cbrow, &cr, &mut b);
            assert_eq!(a, b, "y {y} cb {cb}");
        }
    }
    // Every row length around the 16-pixel groups, random samples.
    let mut rng = Rng(1);
    for n in 0..80 {
        let (y, cb, cr) = (rng.bytes(n), rng.bytes(n), rng.bytes(n));
        let (mut a, mut b) = (vec![7u8; 3 * n], vec![7u8; 3 * n]);
        ycc_to_rgb_row(Isa::Scalar, &y, &cb, &cr, &mut a);
        ycc_to_rgb_row(fast, &y, &cb, &cr, &mut b);
        assert_eq!(a, b, "{n} pixels");
    }
}

#[test]
fn fancy_upsampling_avx2_equals_portable_for_every_span() {
    let Some(fast) = avx2("fancy upsampling") else {
        return;
    };
    let mut rng = Rng(2);
    let mut spans = 0;
    for n in 3..=90usize {
        let (this, near) = (rng.bytes(n), rng.bytes(n));
        for s0 in 0..n {
            for s1 in s0 + 1..=n {
                // Every span for short rows, a sample of them for long ones.
                if n > 40 && rng.below(8) != 0 {
                    continue;
                }
                spans += 1;
                let fill = rng.bytes(2 * n + 2);
                let (mut a, mut b) = (fill.clone(), fill.clone());
                h2v1_fancy(Isa::Scalar, &this, (s0, s1), &mut a);
                h2v1_fancy(fast, &this, (s0, s1), &mut b);
                assert_eq!(a, b, "h2v1 n {n} span {s0}..{s1}");
                let (mut a, mut b) = (fill.clone(), fill);
                h2v2_fancy(Isa::Scalar, &this, &near, (s0, s1), &mut a);
                h2v2_fancy(fast, &this, &near, (s0, s1), &mut b);
                assert_eq!(a, b, "h2v2 n {n} span {s0}..{s1}");
            }
        }
    }
    assert!(spans > 20_000, "{spans}");
}

#[test]
fn idct_avx2_equals_portable_on_random_blocks() {
    let Some(fast) = avx2("idct") else {
        return;
    };
    let mut rng = Rng(3);
    for round in 0..20_000 {
        // Realistic blocks (small tables, few coefficients) and extreme ones
        // (any 16-bit value, where the 32-bit arithmetic wraps).
        let extreme = round % 4 == 0;
        let coef: [i16; 64] = std::array::from_fn(|k| {
            if extreme {
                rng.next() as i16
            } else if k == 0 || rng.below(64) < 64 / (k + 1) + 2 {
                (rng.below(512) as i16) - 256
            } else {
                0
            }
        });
        let q: [i32; 64] = std::array::from_fn(|_| {
            if extreme {
                i32::from(rng.next() as i16)
            } else {
                1 + rng.below(200) as i32
            }
        });
        let stride = 8 + rng.below(20);
        let fill = rng.bytes(7 * stride + 8);
        let (mut a, mut b) = (fill.clone(), fill);
        idct_ifast(Isa::Scalar, &coef, &q, &mut a, stride);
        idct_ifast(fast, &coef, &q, &mut b, stride);
        assert_eq!(a, b, "round {round}");
    }
}

#[test]
fn area_passes_avx2_equal_portable() {
    let Some(fast) = avx2("INTER_AREA passes") else {
        return;
    };
    let mut rng = Rng(4);
    // Vertical accumulation: both forms, every length around 8 lanes.
    for n in 0..40 {
        let b: Vec<f32> = (0..n).map(|_| rng.below(1 << 20) as f32 / 977.0).collect();
        let start: Vec<f32> = (0..n).map(|_| rng.below(1 << 20) as f32 / 311.0).collect();
        let beta = rng.below(1000) as f32 / 999.0;
        for add in [false, true] {
            let (mut x, mut y) = (start.clone(), start.clone());
            scale_add(Isa::Scalar, &mut x, &b, beta, add);
            scale_add(fast, &mut y, &b, beta, add);
            assert!(x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()));
        }
    }
    // Rounding to bytes: ties, both sides of every bound, huge values, NaN.
    let mut special = vec![
        f32::NAN,
        f32::INFINITY,
        -f32::INFINITY,
        1e30,
        -1e30,
        -0.0,
        0.0,
    ];
    special.extend((-8..=520).map(|k| k as f32 * 0.5));
    special.extend([
        -0.49999997,
        0.49999997,
        254.49998,
        254.50002,
        255.49998,
        255.5,
    ]);
    special.extend((0..3000).map(|_| rng.below(1 << 24) as f32 / 61_000.0 - 10.0));
    for n in [0, 1, 7, 8, 9, 15, 16, 17, special.len()] {
        let (mut a, mut b) = (vec![1u8; n], vec![2u8; n]);
        sat_u8_row(Isa::Scalar, &special[..n], &mut a);
        sat_u8_row(fast, &special[..n], &mut b);
        assert_eq!(a, b, "{n} values");
    }
    // Horizontal sums over random tap tables of every width.
    for ntap in 1..=8usize {
        for npix in 1..20usize {
            let row = rng.bytes(3 * (npix + ntap) + 4);
            let taps: Vec<(u32, f32)> = (0..npix * ntap)
                .map(|_| {
                    let off = rng.below(row.len() - 3) as u32;
                    (off, rng.below(1 << 16) as f32 / 65_537.0)
                })
                .collect();
            let mut weights = Vec::new();
            pair_weights(&taps, ntap, &mut weights);
            let (mut a, mut b) = (vec![0f32; 3 * npix + 2], vec![0f32; 3 * npix + 2]);
            hsum_area(Isa::Scalar, &row, &taps, &weights, ntap, npix / 2, &mut a);
            hsum_area(fast, &row, &taps, &weights, ntap, npix / 2, &mut b);
            assert!(
                a[..3 * npix]
                    .iter()
                    .zip(&b[..3 * npix])
                    .all(|(p, q)| p.to_bits() == q.to_bits()),
                "{ntap} taps, {npix} pixels"
            );
        }
    }
}

/// A crop of a random image resized with both instruction sets.
fn resize_both(rng: &mut Rng, fast: Isa, resizers: &mut [AreaResizer; 2]) -> (u32, u32) {
    let (h, w) = (1 + rng.below(160) as u32, 1 + rng.below(160) as u32);
    let image = rng.bytes((h * w * 3) as usize);
    // Crops touching every edge, some the whole image.
    let (ch, cw) = (
        1 + rng.below(h as usize) as u32,
        1 + rng.below(w as usize) as u32,
    );
    let i = match rng.below(3) {
        0 => 0,
        1 => h - ch,
        _ => rng.below((h - ch + 1) as usize) as u32,
    };
    let j = match rng.below(3) {
        0 => 0,
        1 => w - cw,
        _ => rng.below((w - cw + 1) as usize) as u32,
    };
    let crop = CropBox { i, j, h: ch, w: cw };
    let (dh, dw) = (1 + rng.below(72) as u32, 1 + rng.below(72) as u32);
    let mut outs = [
        vec![0u8; (dh * dw * 3) as usize],
        vec![0u8; (dh * dw * 3) as usize],
    ];
    for (r, out) in resizers.iter_mut().zip(&mut outs) {
        r.resize_crop_into(&image, h, w, crop, out, dh, dw).unwrap();
    }
    assert_eq!(
        outs[0], outs[1],
        "{h}x{w} crop {crop:?} -> {dh}x{dw} ({fast:?})"
    );
    (ch, cw)
}

#[test]
fn resize_avx2_equals_portable_on_random_crops() {
    let Some(fast) = avx2("INTER_AREA resize") else {
        return;
    };
    let mut rng = Rng(5);
    let mut resizers = [
        AreaResizer::with_isa(Isa::Scalar),
        AreaResizer::with_isa(fast),
    ];
    for _ in 0..1500 {
        resize_both(&mut rng, fast, &mut resizers);
    }
    // The vector pass covers most of a typical crop's pixels.
    let mut image = vec![0u8; 150 * 150 * 3];
    image
        .iter_mut()
        .enumerate()
        .for_each(|(k, v)| *v = (k * 7 % 251) as u8);
    let mut out = vec![0u8; 64 * 64 * 3];
    let r = &mut resizers[1];
    r.resize_into(&image, 450, 150, 150, &mut out, 64, 64)
        .unwrap();
    assert!(r.simd_pairs() >= 31, "{}", r.simd_pairs());
}

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

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("reference base64")
}

fn reference(name: &str) -> Value {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Both instruction sets give OpenCV 4.10's bytes on the recorded cases
/// (the integration tests check only the one this CPU picks).
#[test]
fn resize_matches_opencv_with_every_instruction_set() {
    let doc = reference("opencv_inter_area.json");
    let isas = [Some(Isa::Scalar), avx2("OpenCV cases")];
    for isa in isas.into_iter().flatten() {
        let mut resizer = AreaResizer::with_isa(isa);
        for c in doc["cases"].as_array().unwrap() {
            let g = |k: &str| c[k].as_u64().unwrap() as u32;
            let (sh, sw, dh, dw) = (g("src_h"), g("src_w"), g("dst_h"), g("dst_w"));
            let src = match c["src_b64"].as_str() {
                Some(s) => b64(s),
                None => gen_bytes(c["seed"].as_u64().unwrap(), (sh * sw * 3) as usize),
            };
            let mut dst = vec![0u8; (dh * dw * 3) as usize];
            resizer
                .resize_into(&src, sw as usize * 3, sh, sw, &mut dst, dh, dw)
                .unwrap();
            let hex: String = Sha256::digest(&dst)
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect();
            assert_eq!(
                hex,
                c["dst_sha256"].as_str().unwrap(),
                "{sh}x{sw} -> {dh}x{dw} {isa:?}"
            );
        }
    }
}

/// Both instruction sets give libjpeg-turbo's `TJFLAG_FASTDCT` bytes on the
/// recorded layouts.
#[test]
fn turbo_matches_libjpeg_turbo_with_every_instruction_set() {
    let doc = reference("turbo_fastdct.json");
    let isas = [Some(Isa::Scalar), avx2("libjpeg-turbo cases")];
    for isa in isas.into_iter().flatten() {
        let mut decoder = TurboDecoder::with_isa(isa);
        let mut out = vec![0u8; 80 * 80 * 3];
        let mut exact = 0;
        for c in doc["cases"].as_array().unwrap() {
            let name = c["name"].as_str().unwrap();
            let jpeg = b64(c["jpeg_b64"].as_str().unwrap());
            let expected = b64(c["fastdct_b64"].as_str().unwrap());
            match decoder.decode_into(&jpeg, &mut out).unwrap() {
                Outcome::Decoded(..) => {
                    assert!(out[..expected.len()] == expected[..], "{name} {isa:?}");
                    exact += 1;
                }
                Outcome::Unsupported => assert!(name.contains("general decoder"), "{name}"),
            }
        }
        assert_eq!(exact, 13, "{isa:?}");
    }
}

/// A `h x w` test picture: smooth gradients with noise, so blocks carry
/// both few and many coefficients.
fn picture(rng: &mut Rng, h: usize, w: usize, noise: usize) -> Vec<u8> {
    let mut px = Vec::with_capacity(h * w * 3);
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                let base = (x * (3 + c) + y * (5 - c) + 40 * c) % 256;
                let n = if noise > 0 { rng.below(noise) } else { 0 };
                px.push(((base + n) % 256) as u8);
            }
        }
    }
    px
}

#[test]
fn jpeg_region_decodes_avx2_equal_portable_for_every_layout_and_alignment() {
    let Some(fast) = avx2("JPEG decode") else {
        return;
    };
    use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
    let mut rng = Rng(6);
    let layouts = [
        Some(SamplingFactor::F_1_1),
        Some(SamplingFactor::F_2_1),
        Some(SamplingFactor::F_1_2),
        Some(SamplingFactor::F_2_2),
        None, // grayscale
    ];
    let sizes = [
        (1, 1),
        (2, 3),
        (7, 13),
        (16, 16),
        (17, 33),
        (33, 17),
        (45, 71),
        (90, 83),
    ];
    let mut decoders = [
        TurboDecoder::with_isa(Isa::Scalar),
        TurboDecoder::with_isa(fast),
    ];
    let mut crops = 0;
    for (li, layout) in layouts.iter().enumerate() {
        for (si, &(h, w)) in sizes.iter().enumerate() {
            let quality = [60, 90, 100][(li + si) % 3];
            let noise = [0, 24, 256][(li * 3 + si) % 3];
            let rgb = picture(&mut rng, h, w, noise);
            let mut jpeg = Vec::new();
            let mut enc = Encoder::new(&mut jpeg, quality);
            if (li + si) % 4 == 1 {
                enc.set_restart_interval(1 + (si % 3) as u16);
            }
            let what = format!("{h}x{w} {layout:?} q{quality} noise {noise}");
            match layout {
                Some(f) => {
                    enc.set_sampling_factor(*f);
                    enc.encode(&rgb, w as u16, h as u16, ColorType::Rgb)
                        .unwrap();
                }
                None => {
                    let luma: Vec<u8> = rgb.iter().step_by(3).copied().collect();
                    enc.encode(&luma, w as u16, h as u16, ColorType::Luma)
                        .unwrap();
                }
            }
            let mut full = [vec![0u8; h * w * 3], vec![0u8; h * w * 3]];
            for (d, out) in decoders.iter_mut().zip(&mut full) {
                let got = d.decode_into(&jpeg, out).unwrap();
                assert_eq!(got, Outcome::Decoded(h as u32, w as u32), "{what}");
            }
            assert_eq!(full[0], full[1], "full decode {what}");
            // Crops starting at every column and row offset within two MCUs,
            // random sizes.
            for a in 0..h.min(32) {
                for b in 0..w.min(32) {
                    if h * w > 64 && rng.below(4) != 0 {
                        continue;
                    }
                    let (i, j) = (a as u32, b as u32);
                    let ch = 1 + rng.below(h - a) as u32;
                    let cw = 1 + rng.below(w - b) as u32;
                    let crop = CropBox { i, j, h: ch, w: cw };
                    crops += 1;
                    for d in &mut decoders {
                        let mut out = vec![0x5Au8; h * w * 3];
                        d.decode_region_into(&jpeg, Some(crop), &mut out).unwrap();
                        for y in i..i + ch {
                            let row = (y as usize * w + j as usize) * 3;
                            let end = row + cw as usize * 3;
                            assert!(
                                out[row..end] == full[0][row..end],
                                "{what} crop {crop:?} row {y}"
                            );
                        }
                    }
                }
            }
        }
    }
    assert!(crops > 1000, "{crops}");
}
