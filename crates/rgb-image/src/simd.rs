//! Which instruction set the image kernels run with, chosen once per
//! decoder or resizer at run time.
//!
//! Every kernel has a portable version; on x86_64 CPUs with AVX2 the hot
//! ones (the IDCT, fancy upsampling, YCbCr to RGB, the `INTER_AREA` passes)
//! run as the explicit AVX2 code below instead, with results identical to
//! the portable code: the same integer results, or the same `f32`
//! operations in the same order (`simd_tests` compares the two on random
//! and exhaustive inputs, and both with the libjpeg-turbo and OpenCV
//! references). Other targets, and x86_64 CPUs without AVX2, use the
//! portable code.

/// The instruction set a kernel runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// Portable Rust, whatever the target.
    Scalar,
    /// x86_64 with AVX2, detected at run time.
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Isa {
    /// The best instruction set this CPU supports.
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    }
}

impl Default for Isa {
    fn default() -> Self {
        Self::detect()
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use avx2::{
    h2v1_fancy_avx2, h2v2_fancy_avx2, hsum_area_avx2, idct_ifast_avx2, sat_u8_row_avx2,
    scale_add_avx2, ycc_to_rgb_row_avx2,
};

/// The AVX2 kernels. Each reproduces its portable counterpart in
/// `turbo.rs` or `resize.rs` exactly (same integer results, or the same
/// `f32` operations in the same order) on the whole chunks it handles and
/// leaves the rest of the row to that counterpart.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// jdcolor's YCbCr -> RGB for `y.len()` pixels into `out` (3 bytes per
    /// pixel); `cb`, `cr` and `out` hold at least as many. Converts all `n`
    /// pixels when `n >= 16` (in groups of 16, the last one overlapping)
    /// and returns `n`; returns 0 for shorter rows.
    ///
    /// The tables' 16-bit fixed-point products are split so that they fit
    /// `pmaddwd`'s signed 16-bit factors, which is exact: with
    /// `91881 = 65536 + 26345`, `(91881 * cr + 2^15) >> 16` equals
    /// `((26345 * cr + 2^15) >> 16) + cr` (adding a multiple of 2^16 before
    /// a floor shift adds its quotient after), and likewise
    /// `-46802 = 18734 - 65536` for green and `116130 = 131072 - 14942`
    /// for blue. The rounding constant `2^15` enters as `2 * 16384`.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn ycc_to_rgb_row_avx2(
        y: &[u8],
        cb: &[u8],
        cr: &[u8],
        out: &mut [u8],
    ) -> usize {
        let n = y.len().min(cb.len()).min(cr.len()).min(out.len() / 3);
        if n < 16 {
            return 0;
        }
        let k128 = _mm256_set1_epi16(128);
        let two = _mm256_set1_epi16(2);
        let half = _mm256_set1_epi32(1 << 15);
        // (factor for the first of a pair, factor for the second) as one i32.
        let pair = |a: i16, b: i16| _mm256_set1_epi32((i32::from(b) << 16) | i32::from(a as u16));
        let kr = pair(26345, 16384);
        let kg = pair(-22554, 18734);
        let kb = pair(-14942, 16384);
        let masks = rgb_interleave_masks();
        groups_of_16(0, n, |i| {
            // SAFETY: `i + 16 <= n <= len` for `y`, `cb` and `cr`.
            let (yv, cbv, crv) = unsafe {
                (
                    _mm_loadu_si128(y.as_ptr().add(i).cast()),
                    _mm_loadu_si128(cb.as_ptr().add(i).cast()),
                    _mm_loadu_si128(cr.as_ptr().add(i).cast()),
                )
            };
            let yv = _mm256_cvtepu8_epi16(yv);
            let cbv = _mm256_sub_epi16(_mm256_cvtepu8_epi16(cbv), k128);
            let crv = _mm256_sub_epi16(_mm256_cvtepu8_epi16(crv), k128);
            // pmaddwd over (a, b) pairs; unpacklo/hi split each 128-bit lane
            // and packs_epi32 puts the pixels back in order lane by lane.
            let madd = |a: __m256i, b: __m256i, k: __m256i, add: __m256i| {
                let lo = _mm256_add_epi32(_mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), k), add);
                let hi = _mm256_add_epi32(_mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), k), add);
                _mm256_packs_epi32(_mm256_srai_epi32::<16>(lo), _mm256_srai_epi32::<16>(hi))
            };
            let zero = _mm256_setzero_si256();
            let r = _mm256_add_epi16(_mm256_add_epi16(yv, madd(crv, two, kr, zero)), crv);
            let g = _mm256_sub_epi16(_mm256_add_epi16(yv, madd(cbv, crv, kg, half)), crv);
            let b = _mm256_add_epi16(
                _mm256_add_epi16(yv, madd(cbv, two, kb, zero)),
                _mm256_add_epi16(cbv, cbv),
            );
            // Saturate to bytes: [r0-7 g0-7 | r8-15 g8-15] -> [r | g].
            let rg = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi16(r, g));
            let bb = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi16(b, b));
            let (rv, gv, bv) = (
                _mm256_castsi256_si128(rg),
                _mm256_extracti128_si256::<1>(rg),
                _mm256_castsi256_si128(bb),
            );
            let part = |j: usize| {
                _mm_or_si128(
                    _mm_or_si128(
                        _mm_shuffle_epi8(rv, masks[j][0]),
                        _mm_shuffle_epi8(gv, masks[j][1]),
                    ),
                    _mm_shuffle_epi8(bv, masks[j][2]),
                )
            };
            let o = out[3 * i..3 * i + 48].as_mut_ptr();
            // SAFETY: `o` points at 48 writable bytes (the slice above).
            unsafe {
                _mm_storeu_si128(o.cast(), part(0));
                _mm_storeu_si128(o.add(16).cast(), part(1));
                _mm_storeu_si128(o.add(32).cast(), part(2));
            }
        });
        n
    }

    /// Calls `body(at)` for 16-element groups starting at `at` that cover
    /// `start..end` (`end - start >= 16`): whole groups, then one last group
    /// ending at `end` that overlaps the one before. A kernel whose outputs
    /// depend only on its inputs writes the same bytes twice there, so the
    /// short tail needs no scalar loop.
    #[inline(always)]
    fn groups_of_16(start: usize, end: usize, mut body: impl FnMut(usize)) {
        let mut at = start;
        loop {
            let g = at.min(end - 16);
            body(g);
            at = g + 16;
            if at >= end {
                break;
            }
        }
    }

    /// `pshufb` masks that spread 16 R, G and B bytes over three 16-byte
    /// blocks of packed RGB: `[block][channel]` (0x80 = a zero byte).
    const RGB_MASKS: [[[u8; 16]; 3]; 3] = {
        let mut m = [[[0x80u8; 16]; 3]; 3];
        let mut k = 0;
        while k < 48 {
            m[k / 16][k % 3][k % 16] = (k / 3) as u8;
            k += 1;
        }
        m
    };

    #[target_feature(enable = "avx2")]
    fn rgb_interleave_masks() -> [[__m128i; 3]; 3] {
        // SAFETY: each load reads one 16-byte array.
        RGB_MASKS.map(|block| block.map(|m| unsafe { _mm_loadu_si128(m.as_ptr().cast()) }))
    }

    /// The inner part of libjpeg-turbo's h2v2 fancy upsampling: for samples
    /// `i` from `s0.max(1)` up to `min(s1, this.len() - 1)` (the right
    /// neighbour is read), writes `dst[2i]` and `dst[2i + 1]` from the
    /// column sums `3 * this + near` at `i - 1`, `i`, `i + 1`, in groups of
    /// 16 (the last one overlapping) when the span holds at least 16. Returns
    /// where it stopped; the caller finishes from there.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn h2v2_fancy_avx2(
        this: &[u8],
        near: &[u8],
        (s0, s1): (usize, usize),
        dst: &mut [u8],
    ) -> usize {
        let n = this.len().min(near.len());
        let start = s0.max(1);
        // The right neighbour is read: groups end at most at `n - 1`.
        let end = s1.min(n.saturating_sub(1)).min(dst.len() / 2);
        if end < start + 16 {
            return start;
        }
        let three = _mm256_set1_epi16(3);
        let (b8, b7) = (_mm256_set1_epi16(8), _mm256_set1_epi16(7));
        groups_of_16(start, end, |i| {
            let load = |s: &[u8], at: usize| {
                // SAFETY: `at + 16 <= n <= s.len()` for the three offsets
                // used below (`i - 1`, `i`, `i + 1` with `i + 17 <= n`).
                _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(s.as_ptr().add(at).cast()) })
            };
            let col = |at: usize| {
                _mm256_add_epi16(_mm256_mullo_epi16(load(this, at), three), load(near, at))
            };
            let (cm, c0, cp) = (col(i - 1), col(i), col(i + 1));
            let v = _mm256_mullo_epi16(c0, three);
            let d0 = _mm256_srli_epi16::<4>(_mm256_add_epi16(_mm256_add_epi16(v, cm), b8));
            let d1 = _mm256_srli_epi16::<4>(_mm256_add_epi16(_mm256_add_epi16(v, cp), b7));
            // Each 16-bit lane becomes the byte pair (d0, d1) in memory order.
            let pairs = _mm256_or_si256(d0, _mm256_slli_epi16::<8>(d1));
            let o = dst[2 * i..2 * i + 32].as_mut_ptr();
            // SAFETY: `o` points at 32 writable bytes (the slice above).
            unsafe { _mm256_storeu_si256(o.cast(), pairs) };
        });
        end
    }

    /// [`h2v2_fancy_avx2`] for h2v1 (no context row; biases 1 and 2 over 4).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn h2v1_fancy_avx2(
        src: &[u8],
        (s0, s1): (usize, usize),
        dst: &mut [u8],
    ) -> usize {
        let n = src.len();
        let start = s0.max(1);
        let end = s1.min(n.saturating_sub(1)).min(dst.len() / 2);
        if end < start + 16 {
            return start;
        }
        let three = _mm256_set1_epi16(3);
        let (b1, b2) = (_mm256_set1_epi16(1), _mm256_set1_epi16(2));
        groups_of_16(start, end, |i| {
            let load = |at: usize| {
                // SAFETY: `at + 16 <= n` for `at` in `i - 1..=i + 1`.
                _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(src.as_ptr().add(at).cast()) })
            };
            let v = _mm256_mullo_epi16(load(i), three);
            let d0 = _mm256_srli_epi16::<2>(_mm256_add_epi16(_mm256_add_epi16(v, load(i - 1)), b1));
            let d1 = _mm256_srli_epi16::<2>(_mm256_add_epi16(_mm256_add_epi16(v, load(i + 1)), b2));
            let pairs = _mm256_or_si256(d0, _mm256_slli_epi16::<8>(d1));
            let o = dst[2 * i..2 * i + 32].as_mut_ptr();
            // SAFETY: `o` points at 32 writable bytes (the slice above).
            unsafe { _mm256_storeu_si256(o.cast(), pairs) };
        });
        end
    }

    /// `INTER_AREA`'s horizontal pass for the first `npairs` pairs of output
    /// pixels: pixel `d`'s three channel sums `sum over taps of s[off + c] *
    /// w`, tap by tap in table order from 0, into `buf[3d..3d + 3]`, as the
    /// portable `weigh` does. One 256-bit register holds two pixels (RGB plus
    /// one unused lane each); the products and sums are the same `f32`
    /// operations in the same order, so the same roundings.
    ///
    /// `weights` holds, per pair and tap, the two pixels' weights spread
    /// over their four lanes each (`resize::pair_weights`).
    ///
    /// Needs `taps.len() >= 2 * npairs * N`, `weights.len() >= npairs * N`,
    /// every tap offset of those
    /// pixels plus 4 within `s` (4 bytes are read per pixel), and
    /// `buf.len() >= 6 * npairs + 2` (each store writes 8 lanes; the last two
    /// are overwritten by the next pair or are slack). Out-of-range indexes
    /// panic rather than read outside the slices.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn hsum_area_avx2<const N: usize>(
        s: &[u8],
        taps: &[(u32, f32)],
        weights: &[[f32; 8]],
        npairs: usize,
        buf: &mut [f32],
    ) {
        let compact = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
        let pixel = |off: u32| {
            let o = off as usize;
            let mut b = [0u8; 4];
            b.copy_from_slice(&s[o..o + 4]);
            _mm_cvtsi32_si128(i32::from_le_bytes(b))
        };
        let pairs = taps[..2 * npairs * N]
            .chunks_exact(2 * N)
            .zip(weights[..npairs * N].chunks_exact(N));
        for (p, (t, w8)) in pairs.enumerate() {
            let (ta, tb) = t.split_at(N);
            let mut acc = _mm256_setzero_ps();
            for ((&(oa, _), &(ob, _)), w) in ta.iter().zip(tb).zip(w8) {
                let v = _mm256_cvtepu8_epi32(_mm_unpacklo_epi32(pixel(oa), pixel(ob)));
                // SAFETY: `w` is 8 floats.
                let w = unsafe { _mm256_loadu_ps(w.as_ptr()) };
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(v), w));
            }
            let out = &mut buf[6 * p..6 * p + 8];
            // SAFETY: `out` is 8 writable floats.
            unsafe {
                _mm256_storeu_ps(out.as_mut_ptr(), _mm256_permutevar8x32_ps(acc, compact));
            }
        }
    }

    /// `sum[i] = beta * b[i]` (`add == false`) or `sum[i] += beta * b[i]`
    /// for `i` below the shorter length: separate multiply and add, as the
    /// portable loop (no fused multiply-add, whose single rounding would
    /// differ).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn scale_add_avx2(sum: &mut [f32], b: &[f32], beta: f32, add: bool) {
        let n = sum.len().min(b.len());
        let k = _mm256_set1_ps(beta);
        let mut i = 0;
        while i + 8 <= n {
            let (d, x) = (&mut sum[i..i + 8], &b[i..i + 8]);
            // SAFETY: `d` and `x` are 8 floats each.
            unsafe {
                let prod = _mm256_mul_ps(k, _mm256_loadu_ps(x.as_ptr()));
                let v = if add {
                    _mm256_add_ps(_mm256_loadu_ps(d.as_ptr()), prod)
                } else {
                    prod
                };
                _mm256_storeu_ps(d.as_mut_ptr(), v);
            }
            i += 8;
        }
        for (d, &x) in sum[i..n].iter_mut().zip(&b[i..n]) {
            *d = if add { *d + beta * x } else { beta * x };
        }
    }

    /// jidctfst's `MULTIPLY`: the 32-bit product shifted down 8 bits.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn mul8(a: __m256i, c: i32) -> __m256i {
        _mm256_srai_epi32::<8>(_mm256_mullo_epi32(a, _mm256_set1_epi32(c)))
    }

    /// The 8-point butterfly of `ifast_idct::butterfly`, eight lanes at once
    /// (32-bit wrapping adds and products, as there).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn butterfly(x: [__m256i; 8]) -> [__m256i; 8] {
        use super::super::ifast_idct::{
            FIX_1_082392200, FIX_1_414213562, FIX_1_847759065, FIX_2_613125930,
        };
        let (add, sub) = (_mm256_add_epi32, _mm256_sub_epi32);
        let tmp10 = add(x[0], x[4]);
        let tmp11 = sub(x[0], x[4]);
        let tmp13 = add(x[2], x[6]);
        let tmp12 = sub(mul8(sub(x[2], x[6]), FIX_1_414213562), tmp13);
        let e0 = add(tmp10, tmp13);
        let e3 = sub(tmp10, tmp13);
        let e1 = add(tmp11, tmp12);
        let e2 = sub(tmp11, tmp12);
        let z13 = add(x[5], x[3]);
        let z10 = sub(x[5], x[3]);
        let z11 = add(x[1], x[7]);
        let z12 = sub(x[1], x[7]);
        let t7 = add(z11, z13);
        let t11 = mul8(sub(z11, z13), FIX_1_414213562);
        let z5 = mul8(add(z10, z12), FIX_1_847759065);
        let t10 = sub(mul8(z12, FIX_1_082392200), z5);
        let t12 = add(mul8(z10, -FIX_2_613125930), z5);
        let t6 = sub(t12, t7);
        let t5 = sub(t11, t6);
        let t4 = add(t10, t5);
        [
            add(e0, t7),
            add(e1, t6),
            add(e2, t5),
            sub(e3, t4),
            add(e3, t4),
            sub(e2, t5),
            sub(e1, t6),
            sub(e0, t7),
        ]
    }

    /// Transposes an 8x8 matrix of `i32` held as eight rows.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn transpose(r: [__m256i; 8]) -> [__m256i; 8] {
        let t: [__m256i; 8] = std::array::from_fn(|k| {
            let (a, b) = (r[2 * (k / 2)], r[2 * (k / 2) + 1]);
            if k % 2 == 0 {
                _mm256_unpacklo_epi32(a, b)
            } else {
                _mm256_unpackhi_epi32(a, b)
            }
        });
        // t[0] = r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5], etc.
        let u: [__m256i; 8] = std::array::from_fn(|k| {
            let base = 4 * (k / 4);
            let (a, b) = (t[base + (k % 4) / 2], t[base + 2 + (k % 4) / 2]);
            if k % 2 == 0 {
                _mm256_unpacklo_epi64(a, b)
            } else {
                _mm256_unpackhi_epi64(a, b)
            }
        });
        // u[c] (c < 4) = column c of rows 0-3 | column c + 4 of rows 0-3;
        // u[4 + c] the same for rows 4-7.
        [
            _mm256_permute2x128_si256::<0x20>(u[0], u[4]),
            _mm256_permute2x128_si256::<0x20>(u[1], u[5]),
            _mm256_permute2x128_si256::<0x20>(u[2], u[6]),
            _mm256_permute2x128_si256::<0x20>(u[3], u[7]),
            _mm256_permute2x128_si256::<0x31>(u[0], u[4]),
            _mm256_permute2x128_si256::<0x31>(u[1], u[5]),
            _mm256_permute2x128_si256::<0x31>(u[2], u[6]),
            _mm256_permute2x128_si256::<0x31>(u[3], u[7]),
        ]
    }

    /// `turbo::idct_ifast` with each pass's eight lanes in one register:
    /// dequantise, butterflies over columns, transpose, butterflies over
    /// rows, transpose back, then libjpeg's range limit (the low 10 bits of
    /// `x >> 5` as a signed value, plus 128, saturated to a byte). Writes
    /// `out[r * stride..r * stride + 8]` for rows `r` in `0..8`.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn idct_ifast_avx2(
        coef: &[i16; 64],
        q: &[i32; 64],
        out: &mut [u8],
        stride: usize,
    ) {
        let rows: [__m256i; 8] = std::array::from_fn(|r| {
            // SAFETY: row `r` of both 64-entry tables: 8 `i16` (16 bytes) and
            // 8 `i32` (32 bytes) starting at `8 * r`.
            let (c, qv) = unsafe {
                (
                    _mm_loadu_si128(coef.as_ptr().add(8 * r).cast()),
                    _mm256_loadu_si256(q.as_ptr().add(8 * r).cast()),
                )
            };
            _mm256_mullo_epi32(_mm256_cvtepi16_epi32(c), qv)
        });
        let ws = butterfly(rows);
        let res = butterfly(transpose(ws));
        let px = transpose(res).map(|v| {
            let v = _mm256_srai_epi32::<5>(v);
            let v = _mm256_srai_epi32::<22>(_mm256_slli_epi32::<22>(v));
            _mm256_add_epi32(v, _mm256_set1_epi32(128))
        });
        // Bytes of rows 0-3 and 4-7, each row's 8 bytes contiguous.
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let pack = |a: usize| {
            let lo = _mm256_packs_epi32(px[a], px[a + 1]);
            let hi = _mm256_packs_epi32(px[a + 2], px[a + 3]);
            _mm256_permutevar8x32_epi32(_mm256_packus_epi16(lo, hi), order)
        };
        let mut bytes = [0u8; 64];
        // SAFETY: two 32-byte stores into the 64-byte array.
        unsafe {
            _mm256_storeu_si256(bytes.as_mut_ptr().cast(), pack(0));
            _mm256_storeu_si256(bytes.as_mut_ptr().add(32).cast(), pack(4));
        }
        for (r, row) in bytes.chunks_exact(8).enumerate() {
            out[r * stride..r * stride + 8].copy_from_slice(row);
        }
    }

    /// OpenCV's `saturate_cast<uchar>(float)` over a row: round half to
    /// even (`cvtps2dq` in the default rounding mode) and saturate (the
    /// clamp to `0..=255` first keeps huge values and NaN where the portable
    /// `sat_u8` puts them: 255, and 0 for NaN, as `maxps` returns its second
    /// operand for NaN). Converts whole groups of 8 and returns how many
    /// values it converted.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn sat_u8_row_avx2(src: &[f32], out: &mut [u8]) -> usize {
        let n = src.len().min(out.len()) / 8 * 8;
        let (lo, hi) = (_mm256_setzero_ps(), _mm256_set1_ps(255.0));
        let order = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
        for (s, o) in src[..n].chunks_exact(8).zip(out[..n].chunks_exact_mut(8)) {
            // SAFETY: `s` is 8 floats.
            let v = unsafe { _mm256_loadu_ps(s.as_ptr()) };
            let v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
            let w = _mm256_packs_epi32(_mm256_cvtps_epi32(v), _mm256_setzero_si256());
            let b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w, w), order);
            // SAFETY: `o` is 8 writable bytes.
            unsafe { _mm_storel_epi64(o.as_mut_ptr().cast(), _mm256_castsi256_si128(b)) };
        }
        n
    }
}
