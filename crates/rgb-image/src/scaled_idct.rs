//! Reduced-size inverse DCTs for the opt-in DCT-domain downscaling: an 8x8 block of
//! coefficients becomes 4x4, 2x2 or 1x1 samples (1/2, 1/4, 1/8 scale) straight from its
//! coefficients, without the 8x8 pixels, as libjpeg's scaled decode does.
//!
//! These are not libjpeg's integer kernels (its `jidctred` constants): each output is the
//! mean, over the `8/N x 8/N` pixels it stands for, of the block's exact (real-valued)
//! 8x8 IDCT, computed straight from the coefficients with an `N x 8` matrix per pass (the
//! basis functions averaged over each pixel group). So a 1/2 or 1/4 output is the box
//! average the exact path's `INTER_AREA` would take of the same pixels, up to the fast
//! IDCT's own rounding; the low frequencies dominate it, and for `N = 1` only the DC is
//! left: the 1x1 case is libjpeg's `jpeg_idct_1x1` exactly, `(dc * q + 4) >> 3`,
//! level-shifted and clamped. Quantisation tables here are the plain ones (not the fast
//! IDCT's AAN-scaled tables). Arithmetic is 32-bit and wrapping, as the fast IDCT's: a
//! pass-2 sum is an output sample times `2^15`, so it stays far below `2^31` for the
//! blocks an 8-bit encoder produces (samples within a few thousand of the level); only
//! forged coefficients far outside that range could wrap, giving wrong pixels, never a
//! panic.

use super::CropBox;
use super::simd::Isa;

/// The DCT-domain reduction a crop decoder with the option on uses: for an
/// `height x width` image whose `crop` is resized to `out_h x out_w`, the largest
/// `shift` (3, 2 or 1: scale 1/8, 1/4, 1/2) whose reduced crop is still at least the
/// output on both axes, and that reduced crop; `None` when even 1/2 would be smaller
/// than the output (the exact decode is used).
///
/// The reduced image is `ceil(height / 2^shift) x ceil(width / 2^shift)` (libjpeg's
/// scaled size). The crop's edges are divided by `2^shift` and rounded to the nearest
/// reduced pixel, halves up: rows `round(i / f)..round((i + h) / f)`, columns likewise,
/// so the reduced box is off the true one by at most half a reduced pixel per edge.
pub fn dct_scaled_crop(
    height: u32,
    width: u32,
    crop: CropBox,
    out_h: u32,
    out_w: u32,
) -> Option<(u32, CropBox)> {
    if !crop.fits(height, width) || out_h == 0 || out_w == 0 {
        return None;
    }
    (1..=3u32).rev().find_map(|shift| {
        let f = 1u64 << shift;
        // Nearest reduced pixel edge, halves up; u64 so no sum can overflow.
        let edge = |x: u32| (u64::from(x) + f / 2) >> shift;
        let (rh, rw) = (u64::from(height).div_ceil(f), u64::from(width).div_ceil(f));
        let (i0, i1) = (edge(crop.i), edge(crop.i + crop.h).min(rh));
        let (j0, j1) = (edge(crop.j), edge(crop.j + crop.w).min(rw));
        let reduced = CropBox {
            i: i0 as u32,
            j: j0 as u32,
            h: i1.saturating_sub(i0) as u32,
            w: j1.saturating_sub(j0) as u32,
        };
        (reduced.h >= out_h && reduced.w >= out_w).then_some((shift, reduced))
    })
}

/// Fixed-point bits of the kernel matrices.
const CONST_BITS: u32 = 13;
/// Extra bits kept between the two passes.
const PASS1_BITS: u32 = 2;

/// The `N x 8` kernel for `N = 8 >> shift` outputs per axis, scaled by `2^CONST_BITS`:
/// `m[n][u]` is frequency `u`'s 8-point IDCT basis function (JPEG's normalisation)
/// averaged over the `8 / N` pixels of output `n`.
fn kernel<const N: usize>() -> [[i32; 8]; N] {
    let f = 8 / N;
    std::array::from_fn(|n| {
        std::array::from_fn(|u| {
            let norm = if u == 0 {
                1.0 / (2.0 * std::f64::consts::SQRT_2)
            } else {
                0.5
            };
            let mean = (0..f)
                .map(|j| {
                    let x = (f * n + j) as f64;
                    ((2.0 * x + 1.0) * u as f64 * std::f64::consts::PI / 16.0).cos()
                })
                .sum::<f64>()
                / f as f64;
            (norm * mean * f64::from(1u32 << CONST_BITS)).round() as i32
        })
    })
}

/// The kernels, built once.
struct Kernels {
    k4: [[i32; 8]; 4],
    k2: [[i32; 8]; 2],
}

fn kernels() -> &'static Kernels {
    static K: std::sync::OnceLock<Kernels> = std::sync::OnceLock::new();
    K.get_or_init(|| Kernels {
        k4: kernel::<4>(),
        k2: kernel::<2>(),
    })
}

/// Level shift and clamp of a pass-2 sum, whose scale is `2^(CONST_BITS + PASS1_BITS)`
/// (pass 1 already dropped all but `PASS1_BITS` of its fraction bits).
#[inline(always)]
fn to_sample(sum: i32) -> u8 {
    let shift = CONST_BITS + PASS1_BITS;
    let v = sum.wrapping_add(1 << (shift - 1)) >> shift;
    (v + 128).clamp(0, 255) as u8
}

/// libjpeg's `jpeg_idct_1x1` rule for one block: the dequantised DC over 8, rounded,
/// level-shifted and clamped.
pub(crate) fn dc_sample(dc: i16, q0: i32) -> u8 {
    let v = (i64::from(dc) * i64::from(q0) + 4) >> 3;
    (v + 128).clamp(0, 255) as u8
}

/// The reduced IDCT of one block at `1 / 2^shift` (`shift` 1, 2 or 3; more is taken as
/// 3): `coef` in natural order, `q` the plain quantisation table (natural order),
/// `8 >> shift` rows of `8 >> shift` samples written at `out[r * stride..]`.
/// With `isa` AVX2 the same code is compiled for AVX2, where its lane loops become
/// 8-wide vector multiplies (SSE2 has no 32-bit vector multiply); the integer results are
/// the same either way.
pub(crate) fn idct_scaled(
    isa: Isa,
    shift: u32,
    coef: &[i16; 64],
    q: &[i32; 64],
    out: &mut [u8],
    stride: usize,
) {
    match isa {
        Isa::Scalar => idct_scaled_body(shift, coef, q, out, stride),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only chosen when the CPU has AVX2.
        Isa::Avx2 => unsafe { idct_scaled_avx2(shift, coef, q, out, stride) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn idct_scaled_avx2(shift: u32, coef: &[i16; 64], q: &[i32; 64], out: &mut [u8], stride: usize) {
    idct_scaled_body(shift, coef, q, out, stride);
}

#[inline(always)]
fn idct_scaled_body(shift: u32, coef: &[i16; 64], q: &[i32; 64], out: &mut [u8], stride: usize) {
    match shift {
        1 => reduced::<4>(&kernels().k4, coef, q, out, stride),
        2 => reduced::<2>(&kernels().k2, coef, q, out, stride),
        _ => out[0] = dc_sample(coef[0], q[0]),
    }
}

#[inline(always)]
fn reduced<const N: usize>(
    m: &[[i32; 8]; N],
    coef: &[i16; 64],
    q: &[i32; 64],
    out: &mut [u8],
    stride: usize,
) {
    // Pass 1 (vertical), one coefficient row at a time over all eight columns (one
    // vector): t[r][u] = sum_v m[r][v] x[v][u]. All-zero rows, most of a block's, add
    // nothing and are skipped.
    let mut t = [[0i32; 8]; N];
    for v in 0..8 {
        let row: [i16; 8] = std::array::from_fn(|u| coef[v * 8 + u]);
        if row == [0; 8] {
            continue;
        }
        let x: [i32; 8] = std::array::from_fn(|u| i32::from(row[u]).wrapping_mul(q[v * 8 + u]));
        for (tr, mr) in t.iter_mut().zip(m) {
            for (e, &xu) in tr.iter_mut().zip(&x) {
                *e = e.wrapping_add(mr[v].wrapping_mul(xu));
            }
        }
    }
    let half1 = 1i32 << (CONST_BITS - PASS1_BITS - 1);
    // Transposed, so pass 2 also runs over lanes: tt[u][r].
    let mut tt = [[0i32; N]; 8];
    for (r, tr) in t.iter().enumerate() {
        for (u, &e) in tr.iter().enumerate() {
            tt[u][r] = e.wrapping_add(half1) >> (CONST_BITS - PASS1_BITS);
        }
    }
    // Pass 2 (horizontal): out[r][c] = sum_u m[c][u] tt[u][r], lanes over r.
    for (c, mc) in m.iter().enumerate() {
        let mut acc = [0i32; N];
        for (tu, &w) in tt.iter().zip(mc) {
            for (a, &e) in acc.iter_mut().zip(tu) {
                *a = a.wrapping_add(w.wrapping_mul(e));
            }
        }
        for (r, &a) in acc.iter().enumerate() {
            out[r * stride + c] = to_sample(a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real-valued 8x8 IDCT of a block (JPEG's definition), level-shifted.
    fn exact_idct(coef: &[i16; 64], q: &[i32; 64]) -> [[f64; 8]; 8] {
        let c = |u: usize| if u == 0 { 1.0 / 2f64.sqrt() } else { 1.0 };
        std::array::from_fn(|y| {
            std::array::from_fn(|x| {
                let mut s = 0.0;
                for v in 0..8 {
                    for u in 0..8 {
                        let f = f64::from(coef[v * 8 + u]) * f64::from(q[v * 8 + u]);
                        s += c(u)
                            * c(v)
                            * f
                            * ((2 * x + 1) as f64 * u as f64 * std::f64::consts::PI / 16.0).cos()
                            * ((2 * y + 1) as f64 * v as f64 * std::f64::consts::PI / 16.0).cos();
                    }
                }
                s / 4.0 + 128.0
            })
        })
    }

    fn lcg(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *state >> 33
    }

    #[test]
    fn one_eighth_is_the_rounded_dc() {
        let mut q = [1i32; 64];
        for (dc, q0, want) in [(0i16, 16, 128u8), (10, 16, 148), (-3, 5, 126), (-4, 5, 126)] {
            q[0] = q0;
            let mut coef = [0i16; 64];
            coef[0] = dc;
            // AC terms do not reach the 1x1 output.
            coef[1] = 77;
            let mut out = [0u8; 1];
            idct_scaled(Isa::Scalar, 3, &coef, &q, &mut out, 1);
            // (dc * q + 4) >> 3 + 128: 0 -> 128; 160 -> 20 -> 148; -15 -> -2 (floor of
            // -11/8) -> 126; -20 -> -2 -> 126.
            assert_eq!(out[0], want, "dc {dc} q {q0}");
        }
        assert_eq!(dc_sample(i16::MAX, 255), 255);
        assert_eq!(dc_sample(i16::MIN, 255), 0);
    }

    #[test]
    fn flat_blocks_stay_flat_at_every_scale() {
        let q = [1i32; 64];
        for dc in [-1024i16, -80, 0, 8, 400, 1016] {
            let mut coef = [0i16; 64];
            coef[0] = dc;
            let want = dc_sample(dc, 1);
            for shift in 1..=2 {
                let n = 8 >> shift;
                let mut out = [0u8; 16];
                idct_scaled(Isa::Scalar, shift, &coef, &q, &mut out, n);
                assert!(
                    out[..n * n].iter().all(|&v| v == want),
                    "dc {dc} shift {shift}: {out:?}"
                );
            }
        }
    }

    #[test]
    fn reduced_blocks_are_close_to_the_box_means_of_the_exact_idct() {
        let mut state = 7u64;
        let q = [1i32; 64];
        for _ in 0..200 {
            // Every frequency: the reduced kernels compute the box mean of the exact
            // IDCT, up to fixed-point rounding.
            let mut coef = [0i16; 64];
            for c in coef.iter_mut() {
                *c = (lcg(&mut state) % 61) as i16 - 30;
            }
            coef[0] = (lcg(&mut state) % 1601) as i16 - 800;
            let full = exact_idct(&coef, &q);
            let mut out = [0u8; 16];
            idct_scaled(Isa::Scalar, 1, &coef, &q, &mut out, 4);
            for r in 0..4 {
                for c in 0..4 {
                    let mean = (full[2 * r][2 * c]
                        + full[2 * r][2 * c + 1]
                        + full[2 * r + 1][2 * c]
                        + full[2 * r + 1][2 * c + 1])
                        / 4.0;
                    let want = mean.round().clamp(0.0, 255.0);
                    assert!(
                        (f64::from(out[r * 4 + c]) - want).abs() <= 1.0,
                        "({r}, {c}): {} vs {want}",
                        out[r * 4 + c]
                    );
                }
            }
        }
    }
}
