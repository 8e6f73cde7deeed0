//! AVX2 kernels for the `INTER_AREA` resizer's bilinear path (the one OpenCV takes when
//! some axis is upscaled): the horizontal pass `hresize` and the vertical pass `vresize`
//! of `resize_rows.rs`, each giving the same integers as its portable counterpart there
//! on the elements it handles and leaving the rest of the row to it; and a second form
//! of the area path's horizontal pass (`hsum_area`), with the same `f32` operations in
//! the same order.
//!
//! The bilinear horizontal pass reads each output element's two source bytes at
//! per-element offsets. [`HLinearGroup`]s, built once per size from the same tables the
//! portable pass reads, turn that into two 16-byte loads, one byte shuffle and one
//! `pmaddwd` per 8 outputs. [`AreaWindows`] do the same for the area pass: one 16-byte
//! load per pair of output pixels and a shuffle per tap. The tables are plain data,
//! built on every target; only the kernels need x86_64.

/// Eight consecutive outputs of the horizontal pass, as two halves of 4: each half
/// reads the 16 source bytes from `base[half]` and picks its bytes with `shuffle`
/// (the half's 16 bytes: for each output, its first byte, a zero, its second byte, a
/// zero, i.e. the two bytes widened to `i16`); `weights` holds each output's pair of
/// 11-bit weights in the same order, so one `pmaddwd` forms
/// `s[i0] * w0 + s[i1] * w1` exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(32))]
// Only the x86_64 kernels read the fields.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct HLinearGroup {
    shuffle: [u8; 32],
    weights: [i16; 16],
    base: [u32; 2],
}

/// `pshufb` index that writes a zero byte.
const ZERO: u8 = 0x80;

/// Fills `out` with the groups for the leading outputs of a horizontal pass whose
/// portable form is `s[xofs[dx]] * xalpha[dx][0] + s[xofs[dx] + 3] * xalpha[dx][1]` for
/// `dx < xmax` and `s[xofs[dx]] * 2^11` after, over source rows of `row_bytes` bytes.
/// Stops at the first group whose bytes do not fit two 16-byte windows inside the row
/// (crops downscaled more than about 2.5x horizontally, the last few outputs of short
/// rows); the portable pass does the rest.
pub(crate) fn hlinear_groups(
    xofs: &[u32],
    xalpha: &[[i16; 2]],
    xmax: usize,
    row_bytes: usize,
    out: &mut Vec<HLinearGroup>,
) {
    out.clear();
    if row_bytes < 16 {
        return;
    }
    let taps = |dx: usize| -> (usize, usize, [i16; 2]) {
        let i0 = xofs[dx] as usize;
        if dx < xmax {
            (i0, i0 + 3, xalpha[dx])
        } else {
            // s * 2^11 + s * 0: the same product, as a pair.
            (i0, i0, [1 << 11, 0])
        }
    };
    'groups: for first in (0..xofs.len().min(xalpha.len()) / 8).map(|g| 8 * g) {
        let mut group = HLinearGroup {
            shuffle: [ZERO; 32],
            weights: [0; 16],
            base: [0; 2],
        };
        for half in 0..2 {
            let dx0 = first + 4 * half;
            // The window starts at the half's lowest byte, moved left where it would
            // run past the row's end.
            let lowest = (dx0..dx0 + 4).map(|dx| taps(dx).0).min().unwrap_or(0);
            let base = lowest.min(row_bytes - 16);
            for k in 0..4 {
                let (i0, i1, w) = taps(dx0 + k);
                if i0 < base || i1 >= base + 16 {
                    break 'groups;
                }
                let at = 16 * half + 4 * k;
                group.shuffle[at] = (i0 - base) as u8;
                group.shuffle[at + 2] = (i1 - base) as u8;
                group.weights[8 * half + 2 * k] = w[0];
                group.weights[8 * half + 2 * k + 1] = w[1];
            }
            group.base[half] = base as u32;
        }
        out.push(group);
    }
}

/// One pair of output pixels of the area path's horizontal pass: every byte its taps
/// read lies in the 16 source bytes from `base`, and tap `t` picks its 8 lanes (each
/// pixel's R, G, B and a zero) with `shuffle[t]`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct AreaWindow {
    base: u32,
}

/// The area path's horizontal tables as the windowed AVX2 pass reads them: the leading
/// pairs of output pixels whose taps fit one 16-byte window of the source row.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct AreaWindows {
    windows: Vec<AreaWindow>,
    /// `ntap` masks per window, in tap order.
    shuffles: Vec<[u8; 16]>,
}

impl AreaWindows {
    /// The pairs of output pixels covered.
    #[cfg(test)]
    pub(crate) fn pairs(&self) -> usize {
        self.windows.len()
    }

    /// Rebuilds the tables for `taps` (`ntap` per output pixel: byte offset of the
    /// source pixel and weight, as `resize.rs` keeps them) over source rows of
    /// `row_bytes` bytes, stopping at the first pair whose bytes do not fit 16 (crops
    /// downscaled more than about 2x horizontally read wider) or that would read past
    /// the row's end.
    pub(crate) fn rebuild(&mut self, taps: &[(u32, f32)], ntap: usize, row_bytes: usize) {
        self.windows.clear();
        self.shuffles.clear();
        if ntap == 0 || row_bytes < 16 {
            return;
        }
        for pair in taps.chunks_exact(2 * ntap) {
            let lowest = pair.iter().map(|&(off, _)| off as usize).min().unwrap_or(0);
            let base = lowest.min(row_bytes - 16);
            if pair
                .iter()
                .any(|&(off, _)| (off as usize) < base || off as usize + 3 > base + 16)
            {
                return;
            }
            let (a, b) = pair.split_at(ntap);
            for (&(oa, _), &(ob, _)) in a.iter().zip(b) {
                let mut mask = [ZERO; 16];
                for c in 0..3 {
                    mask[c] = (oa as usize + c - base) as u8;
                    mask[4 + c] = (ob as usize + c - base) as u8;
                }
                self.shuffles.push(mask);
            }
            self.windows.push(AreaWindow { base: base as u32 });
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use avx2::{
    hresize_linear_avx2, hsum_area_windows_avx2, scale_add_sat_avx2, vresize_linear_avx2,
};

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{AreaWindows, HLinearGroup};
    use std::arch::x86_64::*;

    /// The horizontal pass for the first `8 * groups.len()` outputs (at most
    /// `out.len() / 8` groups) of source row `s`; returns how many outputs it wrote.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn hresize_linear_avx2(
        s: &[u8],
        groups: &[HLinearGroup],
        out: &mut [i32],
    ) -> usize {
        let n = groups.len().min(out.len() / 8);
        for (g, o) in groups[..n].iter().zip(out.chunks_exact_mut(8)) {
            // Slicing checks the windows against the row, whatever the table says.
            let lo = &s[g.base[0] as usize..g.base[0] as usize + 16];
            let hi = &s[g.base[1] as usize..g.base[1] as usize + 16];
            // SAFETY: each load reads the 16 bytes of a slice of that length, the
            // shuffle and weight loads the 32 bytes of their arrays, and the store
            // writes the 8 `i32` of `o`; the CPU has AVX2 (the caller's contract).
            unsafe {
                let v = _mm256_set_m128i(
                    _mm_loadu_si128(hi.as_ptr().cast()),
                    _mm_loadu_si128(lo.as_ptr().cast()),
                );
                let pairs = _mm256_shuffle_epi8(v, _mm256_loadu_si256(g.shuffle.as_ptr().cast()));
                let w = _mm256_loadu_si256(g.weights.as_ptr().cast());
                _mm256_storeu_si256(o.as_mut_ptr().cast(), _mm256_madd_epi16(pairs, w));
            }
        }
        8 * n
    }

    /// The area path's horizontal pass for the pairs of output pixels `tables` covers
    /// (`N` taps each; at most `(buf.len() - 2) / 6` pairs): the same `f32` products
    /// and sums in tap order from zero as `simd::hsum_area_avx2` and the portable
    /// pass, two pixels per vector, but each pair's source bytes come from one 16-byte
    /// load and a byte shuffle per tap instead of two loads per tap. `weights` are
    /// `resize::pair_weights`' vectors. Returns the pairs done; each store writes 8
    /// floats from `6 * pair` (the last 2 are slack or the next pair's).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn hsum_area_windows_avx2<const N: usize>(
        s: &[u8],
        tables: &AreaWindows,
        weights: &[[f32; 8]],
        buf: &mut [f32],
    ) -> usize {
        let n = tables
            .windows
            .len()
            .min(weights.len() / N)
            .min(buf.len().saturating_sub(2) / 6)
            .min(tables.shuffles.len() / N);
        let compact = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
        let shuffles = tables.shuffles[..n * N].chunks_exact(N);
        let pairs = tables.windows[..n]
            .iter()
            .zip(shuffles.zip(weights[..n * N].chunks_exact(N)));
        for (p, (win, (masks, w8))) in pairs.enumerate() {
            // Slicing checks the window against the row, whatever the table says.
            let bytes = &s[win.base as usize..win.base as usize + 16];
            // SAFETY: reads the 16 bytes of `bytes`; AVX2 per the caller's contract.
            let v = unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) };
            let mut acc = _mm256_setzero_ps();
            for (mask, w) in masks.iter().zip(w8) {
                // SAFETY: `mask` is 16 bytes and `w` 8 floats.
                unsafe {
                    let picked = _mm_shuffle_epi8(v, _mm_loadu_si128(mask.as_ptr().cast()));
                    let x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(picked));
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(x, _mm256_loadu_ps(w.as_ptr())));
                }
            }
            let out = &mut buf[6 * p..6 * p + 8];
            // SAFETY: `out` is 8 writable floats.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_permutevar8x32_ps(acc, compact)) };
        }
        n
    }

    /// The area path's last accumulation of an output row and its rounding to
    /// bytes in one pass over the leading multiple of 32 elements (of `sum`, `b`
    /// and `out`): `beta * b` (plus `sum` when `add`), separate multiply and add as
    /// `simd::scale_add_avx2`, then clamped to `0..=255` and converted with the
    /// current (nearest-even) rounding as `simd::sat_u8_row_avx2`, so the same
    /// bytes; the sums are not stored. Returns the elements done.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn scale_add_sat_avx2(
        sum: &[f32],
        b: &[f32],
        beta: f32,
        add: bool,
        out: &mut [u8],
    ) -> usize {
        let n = sum.len().min(b.len()).min(out.len()) / 32 * 32;
        let k = _mm256_set1_ps(beta);
        let (lo, hi) = (_mm256_setzero_ps(), _mm256_set1_ps(255.0));
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for x in (0..n).step_by(32) {
            let (d, s) = (&sum[x..x + 32], &b[x..x + 32]);
            let round = |i: usize| -> __m256i {
                let (d8, s8) = (&d[i..i + 8], &s[i..i + 8]);
                // SAFETY: `d8` and `s8` are 8 floats each.
                let (dv, sv) =
                    unsafe { (_mm256_loadu_ps(d8.as_ptr()), _mm256_loadu_ps(s8.as_ptr())) };
                let prod = _mm256_mul_ps(k, sv);
                let v = if add { _mm256_add_ps(dv, prod) } else { prod };
                _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi))
            };
            let lo16 = _mm256_packs_epi32(round(0), round(8));
            let hi16 = _mm256_packs_epi32(round(16), round(24));
            let bytes = _mm256_packus_epi16(lo16, hi16);
            let o = &mut out[x..x + 32];
            // SAFETY: the store writes the 32 bytes of `o`; the CPU has AVX2.
            unsafe {
                _mm256_storeu_si256(
                    o.as_mut_ptr().cast(),
                    _mm256_permutevar8x32_epi32(bytes, order),
                )
            };
        }
        n
    }

    /// The vertical pass over the leading multiple of 32 elements of `out` (and of
    /// `r0`, `r1`); returns how many it wrote. OpenCV's `VResizeLinearVec_32s8u`:
    /// `packs(r >> 4)`, `mulhi` by the weight, saturating add, `(x + 2) >> 2` with a
    /// saturating add (the same byte as the portable form's wider sum, as anything
    /// at or above 32766 packs to 255 either way), `packus`; the permute undoes the
    /// packs' interleaving of 128-bit lanes.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn vresize_linear_avx2(
        r0: &[i32],
        r1: &[i32],
        b0: i16,
        b1: i16,
        out: &mut [u8],
    ) -> usize {
        let n = out.len().min(r0.len()).min(r1.len()) / 32 * 32;
        let (vb0, vb1) = (_mm256_set1_epi16(b0), _mm256_set1_epi16(b1));
        let two = _mm256_set1_epi16(2);
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        // 16 elements of a row, shifted, packed to i16 and weighted.
        let weigh = |r: &[i32], b: __m256i| -> __m256i {
            // SAFETY: the two loads read `r`'s 16 elements; AVX2 as below.
            unsafe {
                let a = _mm256_loadu_si256(r.as_ptr().cast());
                let c = _mm256_loadu_si256(r.as_ptr().add(8).cast());
                let p = _mm256_packs_epi32(_mm256_srai_epi32::<4>(a), _mm256_srai_epi32::<4>(c));
                _mm256_mulhi_epi16(p, b)
            }
        };
        for x in (0..n).step_by(32) {
            let (s0, s1) = (&r0[x..x + 32], &r1[x..x + 32]);
            let v01 = _mm256_adds_epi16(weigh(&s0[..16], vb0), weigh(&s1[..16], vb1));
            let v23 = _mm256_adds_epi16(weigh(&s0[16..], vb0), weigh(&s1[16..], vb1));
            let round = |v| _mm256_srai_epi16::<2>(_mm256_adds_epi16(v, two));
            let bytes = _mm256_packus_epi16(round(v01), round(v23));
            let o = &mut out[x..x + 32];
            // SAFETY: the store writes the 32 bytes of `o`; the CPU has AVX2.
            unsafe {
                _mm256_storeu_si256(
                    o.as_mut_ptr().cast(),
                    _mm256_permutevar8x32_epi32(bytes, order),
                )
            };
        }
        n
    }
}

/// The AVX2 passes against the portable ones (x86_64 with AVX2 only; elsewhere there is
/// nothing to compare, and on a CPU without AVX2 each test says so on stderr).
#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::CropBox;
    use super::super::resize::AreaResizer;
    use super::super::resize_rows::{
        hresize, hsum_area, hsum_area_row, pair_weights, sat_u8_row, scale_add, scale_add_sat,
        vresize,
    };
    use super::super::simd::Isa;
    use super::super::simd_tests::{Rng, avx2};
    use super::{AreaWindows, hlinear_groups};

    #[test]
    fn vresize_avx2_equals_portable_on_extreme_and_random_rows() {
        let Some(fast) = avx2("vresize") else {
            return;
        };
        let mut rng = Rng(21);
        // Around every saturation point of the 16-bit form, and the real range.
        let special = [
            i32::MIN,
            i32::MAX,
            0,
            -1,
            -16,
            15,
            16,
            (i16::MAX as i32) << 4,
            ((i16::MAX as i32) << 4) + 15,
            ((i16::MAX as i32) + 1) << 4,
            (i16::MIN as i32) << 4,
            ((i16::MIN as i32) << 4) - 1,
            255 << 11,
            (255 << 11) + 1,
        ];
        let weights = [i16::MIN, i16::MAX, 0, 1, -1, 2048, 1024, 2047, 1];
        for n in (0..100).chain([672, 673, 703]) {
            for _ in 0..4 {
                let mut row = || -> Vec<i32> {
                    (0..n)
                        .map(|_| match rng.below(3) {
                            0 => rng.pick(&special),
                            1 => rng.below(1 << 28) as i32 - (1 << 27),
                            _ => rng.below(255 << 11) as i32,
                        })
                        .collect()
                };
                let (r0, r1) = (row(), row());
                let b0 = match rng.below(2) {
                    0 => rng.pick(&weights),
                    _ => rng.next() as i16,
                };
                let b1 = match rng.below(2) {
                    0 => 2048 - b0.clamp(0, 2048),
                    _ => rng.next() as i16,
                };
                let (mut a, mut b) = (vec![7u8; n], vec![9u8; n]);
                vresize(Isa::Scalar, &r0, &r1, b0, b1, &mut a);
                vresize(fast, &r0, &r1, b0, b1, &mut b);
                assert_eq!(a, b, "{n} elements, weights {b0} {b1}");
            }
        }
    }

    #[test]
    fn hresize_avx2_equals_portable_on_random_tables() {
        let Some(fast) = avx2("hresize") else {
            return;
        };
        let mut rng = Rng(22);
        let mut groups = Vec::new();
        let mut covered = 0;
        for case in 0..3000 {
            let sw = 1 + rng.below(90);
            let dw = 1 + rng.below(90);
            let s: Vec<u8> = (0..3 * sw).map(|_| rng.next() as u8).collect();
            // Source pixels rising by random steps (as the real tables do), or anywhere.
            let step = rng.below(5);
            let mut sx = rng.below(sw);
            let xmax = rng.below(dw + 1);
            let (mut xofs, mut xalpha) = (Vec::new(), Vec::new());
            for dx in 0..dw {
                let px = if case % 4 == 0 {
                    rng.below(sw)
                } else {
                    sx = (sx + rng.below(step + 1)).min(sw - 1);
                    sx
                };
                // Before `xmax` the pixel has a right neighbour.
                let px = if dx < xmax {
                    px.min(sw.saturating_sub(2))
                } else {
                    px
                };
                let w = [rng.next() as i16, rng.next() as i16];
                for k in 0..3 {
                    xofs.push((3 * px + k) as u32);
                    xalpha.push(w);
                }
            }
            let xmax = if sw < 2 { 0 } else { 3 * xmax };
            hlinear_groups(&xofs, &xalpha, xmax, 3 * sw, &mut groups);
            covered += groups.len();
            let (mut a, mut b) = (vec![1i32; 3 * dw], vec![2i32; 3 * dw]);
            hresize(Isa::Scalar, &s, &xofs, &xalpha, &[], xmax, &mut a);
            hresize(fast, &s, &xofs, &xalpha, &groups, xmax, &mut b);
            assert_eq!(
                a,
                b,
                "{sw} -> {dw} px, xmax {xmax}, {} groups",
                groups.len()
            );
        }
        assert!(covered > 10_000, "{covered}");
    }

    /// `AreaResizer`s with each instruction set on crops that take the bilinear path.
    fn compare(
        resizers: &mut [AreaResizer; 2],
        image: &[u8],
        h: u32,
        w: u32,
        crop: CropBox,
        dh: u32,
        dw: u32,
    ) {
        let mut outs = [
            vec![0u8; (dh * dw * 3) as usize],
            vec![1u8; (dh * dw * 3) as usize],
        ];
        for (r, out) in resizers.iter_mut().zip(&mut outs) {
            r.resize_crop_into(image, h, w, crop, out, dh, dw).unwrap();
        }
        assert_eq!(outs[0], outs[1], "{h}x{w} crop {crop:?} -> {dh}x{dw}");
    }

    #[test]
    fn linear_resize_avx2_equals_portable_on_upscaling_crops() {
        let Some(fast) = avx2("bilinear resize") else {
            return;
        };
        let mut rng = Rng(23);
        let (h, w) = (181u32, 237u32);
        let image: Vec<u8> = (0..h * w * 3).map(|_| rng.next() as u8).collect();
        let mut resizers = [
            AreaResizer::with_isa(Isa::Scalar),
            AreaResizer::with_isa(fast),
        ];
        for case in 0..400 {
            let (hu, wu) = (h as usize, w as usize);
            let (dh, dw) = (1 + rng.below(120), 1 + rng.below(120));
            // Both axes up, one axis only, 1-pixel rows and columns, odd sizes.
            let (ch, cw) = match case % 5 {
                0 => (1 + rng.below(dh), 1 + rng.below(dw)),
                1 => (1 + rng.below(dh), dw + rng.below(wu - dw.min(wu) + 1)),
                2 => (dh + rng.below(hu - dh.min(hu) + 1), 1 + rng.below(dw)),
                3 => (1, 1 + rng.below(wu)),
                _ => (1 + rng.below(hu), 1),
            };
            let (dh, dw) = (dh as u32, dw as u32);
            let (ch, cw) = (ch.min(h as usize) as u32, cw.min(w as usize) as u32);
            let i = rng.below((h - ch + 1) as usize) as u32;
            let j = rng.below((w - cw + 1) as usize) as u32;
            compare(
                &mut resizers,
                &image,
                h,
                w,
                CropBox { i, j, h: ch, w: cw },
                dh,
                dw,
            );
        }
        // RandomResizedCrop-like cases at 224, with the vector pass covering nearly all
        // of each row.
        for (ch, cw) in [(150, 180), (170, 101), (97, 236), (181, 237), (5, 7)] {
            let crop = CropBox {
                i: h - ch,
                j: w - cw,
                h: ch,
                w: cw,
            };
            compare(&mut resizers, &image, h, w, crop, 224, 224);
            if cw >= 97 {
                assert!(resizers[1].simd_linear_groups() >= 80, "{cw}");
            }
        }
    }

    #[test]
    fn area_windows_avx2_equal_portable_on_random_tables() {
        let Some(fast) = avx2("windowed area pass") else {
            return;
        };
        let mut rng = Rng(24);
        let mut windows = AreaWindows::default();
        let (mut weights, mut covered) = (Vec::new(), 0);
        for case in 0..4000 {
            let ntap = 1 + rng.below(7);
            let npix = 1 + rng.below(40);
            let sw = 1 + rng.below(120);
            let s: Vec<u8> = (0..3 * sw).map(|_| rng.next() as u8).collect();
            // Runs of consecutive source pixels from rising starts, padded with
            // weight-0 taps on the first (as `resize.rs` builds them), or anywhere.
            let mut start = rng.below(sw);
            let mut taps = Vec::new();
            for _ in 0..npix {
                start = (start + rng.below(3)).min(sw - 1);
                let len = 1 + rng.below(ntap);
                for t in 0..ntap {
                    let px = match (case % 5, t < len) {
                        (0, _) => rng.below(sw),
                        (_, true) => (start + t).min(sw - 1),
                        (_, false) => start,
                    };
                    let w = if t < len {
                        rng.below(1 << 16) as f32 / 65_537.0
                    } else {
                        0.0
                    };
                    taps.push(((3 * px) as u32, w));
                }
            }
            pair_weights(&taps, ntap, &mut weights);
            windows.rebuild(&taps, ntap, 3 * sw);
            covered += windows.pairs();
            // The general AVX2 pass reads 4 bytes per tap: where the last pixel is
            // read, the portable pass takes over as in `resize.rs`.
            let npairs = taps
                .chunks_exact(2 * ntap)
                .take_while(|t| t.iter().all(|&(off, _)| off as usize + 4 <= 3 * sw))
                .count();
            let (mut a, mut b) = (vec![0f32; 3 * npix + 2], vec![0f32; 3 * npix + 2]);
            hsum_area(Isa::Scalar, &s, &taps, &weights, ntap, npairs, &mut a);
            hsum_area_row(fast, &s, &windows, &taps, &weights, ntap, npairs, &mut b);
            assert!(
                a[..3 * npix]
                    .iter()
                    .zip(&b[..3 * npix])
                    .all(|(p, q)| p.to_bits() == q.to_bits()),
                "case {case}: {ntap} taps, {npix} pixels, {sw} wide, {} windows",
                windows.pairs()
            );
        }
        assert!(covered > 20_000, "{covered}");
    }

    #[test]
    fn area_resize_avx2_equals_portable_on_photo_sized_crops() {
        let Some(fast) = avx2("area resize") else {
            return;
        };
        let mut rng = Rng(25);
        let (h, w) = (331u32, 497u32);
        let image: Vec<u8> = (0..h * w * 3).map(|_| rng.next() as u8).collect();
        let mut resizers = [
            AreaResizer::with_isa(Isa::Scalar),
            AreaResizer::with_isa(fast),
        ];
        // RandomResizedCrop's downscaling crops of a photograph, to 224 and 64, the
        // last ones at more than twice the output width (fewer or no windows).
        let crops = [
            (300, 400, 224),
            (230, 331, 224),
            (331, 497, 224),
            (250, 260, 64),
        ];
        for (k, (ch, cw, d)) in crops.into_iter().enumerate() {
            let crop = CropBox {
                i: h - ch,
                j: (w - cw) / 2,
                h: ch,
                w: cw,
            };
            compare(&mut resizers, &image, h, w, crop, d, d);
            if k < 2 {
                let windows = resizers[1].simd_area_windows();
                assert!(windows >= 100, "{cw} -> {d}: {windows} of 112 pairs");
            }
        }
    }

    #[test]
    fn fused_accumulate_and_round_equals_the_two_passes() {
        let Some(fast) = avx2("scale_add_sat") else {
            return;
        };
        let mut rng = Rng(26);
        let special = [
            f32::NAN,
            f32::INFINITY,
            -f32::INFINITY,
            -0.0,
            0.5,
            1.5,
            254.5,
            255.49998,
            255.5,
            -0.49999997,
            1e30,
        ];
        for n in (0..100).chain([672, 673, 701]) {
            for add in [false, true] {
                let value = |rng: &mut Rng| match rng.below(4) {
                    0 => rng.pick(&special),
                    1 => rng.below(600) as f32 * 0.5 - 20.0,
                    _ => rng.below(1 << 24) as f32 / 61_000.0,
                };
                let start: Vec<f32> = (0..n).map(|_| value(&mut rng)).collect();
                let b: Vec<f32> = (0..n + 2).map(|_| value(&mut rng)).collect();
                let beta = rng.below(1000) as f32 / 999.0;
                let (mut x, mut y) = (start.clone(), start.clone());
                let (mut p, mut q) = (vec![3u8; n], vec![4u8; n]);
                scale_add(Isa::Scalar, &mut x, &b, beta, add);
                sat_u8_row(Isa::Scalar, &x, &mut p);
                scale_add_sat(fast, &mut y, &b, beta, add, &mut q);
                assert_eq!(p, q, "{n} values, add {add}");
            }
        }
    }
}
