//! The row passes of the `INTER_AREA` resizer (`resize.rs`): the portable
//! reference of each, which also finishes the rows' tails, and the dispatch to
//! its AVX2 form (`simd.rs`, `simd_resize.rs`) where the CPU has it. The area
//! path weighs each source row horizontally in `f32` ([`hsum_area_row`]),
//! accumulates rows ([`scale_add`]) and rounds ([`sat_u8_row`]); the bilinear
//! path resizes rows horizontally in integers ([`hresize`]) and blends two
//! ([`vresize`]).

use super::simd::Isa;
use super::simd_resize::{AreaWindows, HLinearGroup};

/// Channels per pixel: the resizer works on packed RGB.
pub(super) const CN: usize = 3;
/// OpenCV's `INTER_RESIZE_COEF_BITS` / `INTER_RESIZE_COEF_SCALE`.
pub(super) const COEF_BITS: u32 = 11;

/// `saturate_cast<uchar>(float)`: round half to even, clamp. Clamping
/// first gives the same byte (the bounds are integers), and then adding and
/// subtracting 2^23 rounds half to even in the default rounding mode: the
/// same as `round_ties_even`, which without SSE4.1 is a libm call per pixel.
pub(super) fn sat_u8(x: f32) -> u8 {
    const MAGIC: f32 = 8_388_608.0;
    ((x.clamp(0.0, 255.0) + MAGIC) - MAGIC) as u8
}

/// [`sat_u8`] over `src` into `out` (the shorter length).
pub(super) fn sat_u8_row(isa: Isa, src: &[f32], out: &mut [u8]) {
    let done = match isa {
        Isa::Scalar => 0,
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
        Isa::Avx2 => unsafe { super::simd::sat_u8_row_avx2(src, out) },
    };
    for (o, &x) in out[done..].iter_mut().zip(&src[done..]) {
        *o = sat_u8(x);
    }
}

/// One source row weighted horizontally: `buf[dx] = sum of s[sx] * w` over
/// the pixel's taps in table order, starting from 0 as OpenCV's buffer does.
/// The common tap counts get their own copy with the count fixed. With
/// AVX2 the first `npairs` pairs of pixels go through the vector kernel.
// `npairs` is only read by the AVX2 arm.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
pub(super) fn hsum_area(
    isa: Isa,
    s: &[u8],
    taps: &[(u32, f32)],
    weights: &[[f32; 8]],
    ntap: usize,
    npairs: usize,
    buf: &mut [f32],
) {
    let done = match isa {
        Isa::Scalar => 0,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
            unsafe {
                match ntap {
                    1 => super::simd::hsum_area_avx2::<1>(s, taps, weights, npairs, buf),
                    2 => super::simd::hsum_area_avx2::<2>(s, taps, weights, npairs, buf),
                    3 => super::simd::hsum_area_avx2::<3>(s, taps, weights, npairs, buf),
                    4 => super::simd::hsum_area_avx2::<4>(s, taps, weights, npairs, buf),
                    5 => super::simd::hsum_area_avx2::<5>(s, taps, weights, npairs, buf),
                    6 => super::simd::hsum_area_avx2::<6>(s, taps, weights, npairs, buf),
                    _ => return hsum_area_scalar(s, taps, ntap, buf),
                }
            }
            2 * npairs
        }
    };
    hsum_area_scalar(s, &taps[done * ntap..], ntap, &mut buf[done * CN..]);
}

/// [`hsum_area`] with the windowed AVX2 pass first: it takes the leading
/// pairs `windows` covers, the general AVX2 pass the rest of the first
/// `npairs`, the portable pass what remains.
// The x table's parts (`windows`, `taps`, `weights`, `ntap`, `npairs`) come as the
// resizer's fields, borrowed beside the row buffers it mutates; the SIMD tests call this
// with tables of their own.
#[allow(clippy::too_many_arguments)]
pub(super) fn hsum_area_row(
    isa: Isa,
    s: &[u8],
    windows: &AreaWindows,
    taps: &[(u32, f32)],
    weights: &[[f32; 8]],
    ntap: usize,
    npairs: usize,
    buf: &mut [f32],
) {
    let k = hsum_area_windows(isa, s, windows, weights, ntap, buf).min(npairs);
    hsum_area(
        isa,
        s,
        &taps[2 * k * ntap..],
        &weights[k * ntap..],
        ntap,
        npairs - k,
        &mut buf[6 * k..],
    );
}

/// The leading pairs of [`hsum_area`]'s output that the windowed AVX2 pass
/// covers (none without AVX2 or for more than 6 taps); returns how many.
// Only the AVX2 arm reads its inputs.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
pub(super) fn hsum_area_windows(
    isa: Isa,
    s: &[u8],
    windows: &AreaWindows,
    weights: &[[f32; 8]],
    ntap: usize,
    buf: &mut [f32],
) -> usize {
    match isa {
        Isa::Scalar => 0,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            use super::simd_resize::hsum_area_windows_avx2 as hsum;
            // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
            unsafe {
                match ntap {
                    1 => hsum::<1>(s, windows, weights, buf),
                    2 => hsum::<2>(s, windows, weights, buf),
                    3 => hsum::<3>(s, windows, weights, buf),
                    4 => hsum::<4>(s, windows, weights, buf),
                    5 => hsum::<5>(s, windows, weights, buf),
                    6 => hsum::<6>(s, windows, weights, buf),
                    _ => 0,
                }
            }
        }
    }
}

/// `sum = beta * b` (first source row of an output row) or
/// `sum += beta * b` (the next ones), over `sum`'s length.
pub(super) fn scale_add(isa: Isa, sum: &mut [f32], b: &[f32], beta: f32, add: bool) {
    match isa {
        Isa::Scalar => {
            for (sum, b) in sum.iter_mut().zip(b) {
                *sum = if add { *sum + beta * b } else { beta * b };
            }
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
        Isa::Avx2 => unsafe { super::simd::scale_add_avx2(sum, b, beta, add) },
    }
}

/// [`scale_add`] then [`sat_u8_row`] of the sums into `out`, for the last
/// source row of an output row: with AVX2 in one pass over the leading
/// multiple of 32 elements (the same `f32` values, never stored), the rest
/// as the two separate passes.
pub(super) fn scale_add_sat(
    isa: Isa,
    sum: &mut [f32],
    b: &[f32],
    beta: f32,
    add: bool,
    out: &mut [u8],
) {
    let done = match isa {
        Isa::Scalar => 0,
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
        Isa::Avx2 => unsafe { super::simd_resize::scale_add_sat_avx2(sum, b, beta, add, out) },
    };
    // `done` is within all three lengths.
    let n = sum.len().min(b.len());
    scale_add(isa, &mut sum[done..n], &b[done..n], beta, add);
    sat_u8_row(isa, &sum[done..n], &mut out[done..]);
}

/// The AVX2 horizontal pass's weight vectors: for each pair of output
/// pixels (`ntap` taps each in `taps`) and each tap, the first pixel's
/// weight in lanes 0-3 and the second's in lanes 4-7. Built once per table.
pub(super) fn pair_weights(taps: &[(u32, f32)], ntap: usize, out: &mut Vec<[f32; 8]>) {
    out.clear();
    if ntap == 0 {
        return;
    }
    for pair in taps.chunks_exact(2 * ntap) {
        let (a, b) = pair.split_at(ntap);
        out.extend(
            a.iter()
                .zip(b)
                .map(|(&(_, wa), &(_, wb))| [wa, wa, wa, wa, wb, wb, wb, wb]),
        );
    }
}

/// The portable horizontal pass: one pixel at a time.
fn hsum_area_scalar(s: &[u8], taps: &[(u32, f32)], ntap: usize, buf: &mut [f32]) {
    match ntap {
        2 => hsum_taps::<2>(s, taps, buf),
        3 => hsum_taps::<3>(s, taps, buf),
        4 => hsum_taps::<4>(s, taps, buf),
        5 => hsum_taps::<5>(s, taps, buf),
        _ => {
            for (t, b) in taps.chunks_exact(ntap).zip(buf.chunks_exact_mut(CN)) {
                b.copy_from_slice(&weigh(s, t));
            }
        }
    }
}

fn hsum_taps<const N: usize>(s: &[u8], taps: &[(u32, f32)], buf: &mut [f32]) {
    for (t, b) in taps.as_chunks::<N>().0.iter().zip(buf.chunks_exact_mut(CN)) {
        b.copy_from_slice(&weigh(s, t));
    }
}

/// One output pixel's horizontal sum, tap by tap in order.
#[inline(always)]
fn weigh(s: &[u8], taps: &[(u32, f32)]) -> [f32; CN] {
    let mut acc = [0.0f32; CN];
    for &(off, a) in taps {
        let p = &s[off as usize..off as usize + CN];
        acc[0] += f32::from(p[0]) * a;
        acc[1] += f32::from(p[1]) * a;
        acc[2] += f32::from(p[2]) * a;
    }
    acc
}

/// `HResizeLinear<uchar, int, short, 2048>`: exact integer products. With
/// AVX2 the leading outputs covered by `groups` go through the vector kernel.
// `groups` is only read by the AVX2 arm.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
pub(super) fn hresize(
    isa: Isa,
    s: &[u8],
    xofs: &[u32],
    xalpha: &[[i16; 2]],
    groups: &[HLinearGroup],
    xmax: usize,
    out: &mut [i32],
) {
    let done = match isa {
        Isa::Scalar => 0,
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
        Isa::Avx2 => unsafe { super::simd_resize::hresize_linear_avx2(s, groups, out) },
    };
    for (dx, o) in out.iter_mut().enumerate().skip(done) {
        let sx = xofs[dx] as usize;
        *o = if dx < xmax {
            let [a0, a1] = xalpha[dx];
            i32::from(s[sx]) * i32::from(a0) + i32::from(s[sx + CN]) * i32::from(a1)
        } else {
            i32::from(s[sx]) * (1 << COEF_BITS)
        };
    }
}

/// `VResizeLinear` for `uchar` in OpenCV's 16-bit form: each row value is
/// shifted down by 4, multiplied by its 11-bit weight keeping the high 16
/// bits, the two products added with saturation, then rounded `(x + 2) >> 2`.
/// OpenCV 4.10 gives this result for every element, including the short
/// tails where the exact `(s0 * b0 + s1 * b1 + 2^21) >> 22` would differ by
/// one (checked against `cv2.resize` on random sizes). With AVX2 the
/// leading multiple of 32 elements goes through the vector kernel.
pub(super) fn vresize(isa: Isa, r0: &[i32], r1: &[i32], b0: i16, b1: i16, out: &mut [u8]) {
    let done = match isa {
        Isa::Scalar => 0,
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
        Isa::Avx2 => unsafe { super::simd_resize::vresize_linear_avx2(r0, r1, b0, b1, out) },
    };
    let lane = |s: i32, b: i16| -> i16 {
        let s16 = (s >> 4).clamp(i32::from(i16::MIN), i32::from(i16::MAX));
        ((s16 * i32::from(b)) >> 16) as i16
    };
    for ((o, &s0), &s1) in out.iter_mut().zip(r0).zip(r1).skip(done) {
        let v = lane(s0, b0).saturating_add(lane(s1, b1));
        *o = ((i32::from(v) + 2) >> 2).clamp(0, 255) as u8;
    }
}
