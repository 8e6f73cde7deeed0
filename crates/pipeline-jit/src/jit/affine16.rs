//! Replacing a `u8`-indexed binary16 table (FFCV's float16 normalize lookup table) by
//! vector arithmetic that provably gives the same bits: an `f32` line, then its bits
//! turned into binary16 bits with a few integer operations.
//!
//! A row `t[v]`, `v` in `0..256`, that is the binary16 rounding of a line `A v + B` is
//! recomputed as `y = w * a + e` in `f32` with `w = v - m0` made exact as in
//! [`super::affine::Shifted`] (one fused multiply-add where the host has FMA, a multiply
//! and an add otherwise), then [`bits16`]: the bits plus half a binary16 unit in the last
//! place, rebiased and shifted right by 13 (so that ties round away from zero, not to
//! even), which leaves the magnitude in bits 0..15 and the sign in bit 18 of each 32-bit
//! lane; one `pmaddwd` (Cranelift's pattern `iadd_pairwise` of `imul`s of `swiden`ed
//! halves) computes `low + 8192 * high`, moving the sign to bit 15, and a saturating
//! narrow (`unarrow`) packs two registers into 16-bit lanes. Where some entry is `+0` (a
//! mean on an integer) an unsigned `max` first lifts positive values below binary16's
//! normal range to the threshold that becomes exactly `+0`. Cranelift has no `f32 -> f16`
//! vector conversion.
//!
//! Binary16 keeps 11 significant bits, so each entry's rounding interval is about 2^13
//! times wider than an `f32` one and a single `f32` line fits inside all of them. The line
//! is the one that leaves the most room inside every interval ([`super::affine::best_line`]);
//! its coefficients are rounded to `f32` and a few neighbours tried; each candidate is
//! evaluated for all 256 inputs with the same `f32` and integer operations the generated
//! code uses, and kept only if every result has the table's bits. Otherwise the table is
//! read as before: exactness never rests on the fit. Tables with a binary16 subnormal, a
//! `-0`, an infinity or a NaN are refused (the bit sequence does not produce them).

/// `-(112 << 23)` rebiases an `f32` exponent to binary16's, `0x1000` is half a binary16
/// unit in the last place in `f32` mantissa bits.
pub(super) const BIAS16: u32 = 0x1000u32.wrapping_sub(112 << 23);

/// The smallest bits that [`bits16`]'s add does not take below zero (the value that
/// becomes `+0`); the unsigned `max` lifts smaller positive values to it.
pub(super) const FLOOR16: u32 = (112 << 23) - 0x1000;

/// The `pmaddwd` multipliers of the low and high 16 bits of a lane.
pub(super) const MADD16: [u16; 2] = [1, 8192];

/// The `f32` coefficients of one table row: `y = w * a + e` with `w = (32768 + v) - c`
/// (exact, see [`super::affine::Shifted`]; the vector code makes `32768 + v` with one
/// byte shuffle per four lanes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Line16 {
    pub c: f32,
    pub a: f32,
    pub e: f32,
    /// Whether [`bits16`] lifts small positive values (the table has a `+0` entry).
    pub clamp: bool,
}

impl Line16 {
    /// The formula's binary16 bits for input `v`, with the roundings of the generated code.
    pub fn eval(&self, v: u8, fused: bool) -> u16 {
        let f = f32::from_bits(super::affine::MAGIC | (u32::from(v) << 8));
        let w = f - self.c;
        let y = if fused {
            w.mul_add(self.a, self.e)
        } else {
            w * self.a + self.e
        };
        bits16(y, self.clamp)
    }
}

/// The binary16 bits the generated code makes of `y`, step for step, per 32-bit lane:
/// `t = (max(bits, FLOOR16) if clamp else bits) + BIAS16`, logically shifted right by 13;
/// `h = lo16(t) * 1 + hi16(t) * 8192` with both halves read as signed 16-bit numbers (as
/// `pmaddwd` does); then `h` saturated to `0..=0xffff`. For a normal binary16 result the
/// magnitude is `lo16` and the sign is bit 2 of `hi16`.
pub(super) fn bits16(y: f32, clamp: bool) -> u16 {
    let mut u = y.to_bits();
    if clamp {
        u = u.max(FLOOR16);
    }
    let t = u.wrapping_add(BIAS16) >> 13;
    let lo = i32::from(t as u16 as i16);
    let hi = i32::from((t >> 16) as u16 as i16);
    let h = lo * i32::from(MADD16[0]) + hi * i32::from(MADD16[1]);
    h.clamp(0, 0xffff) as u16
}

/// Coefficients for every row `j` of a table laid out as `bits[v * rows + j]` (binary16
/// bit patterns), or `None` if some row is not reproduced exactly.
pub(super) fn fit_table16(bits: &[u64], rows: usize, fused: bool) -> Option<Vec<Line16>> {
    if rows == 0 || bits.len() != 256 * rows {
        return None;
    }
    // One decision for the whole table: the generated code may pick the row at run time.
    let clamp = bits.contains(&0);
    (0..rows)
        .map(|j| {
            let row: Vec<u16> = (0..256).map(|v| bits[v * rows + j] as u16).collect();
            fit_row16(&row, fused, clamp)
        })
        .collect()
}

/// The interval of `f32` values (as `f64`) that [`bits16`] maps to the normal, finite,
/// nonzero binary16 `h`: from the midpoint to its neighbour towards zero up to the one
/// away from zero (the verification settles the endpoints).
fn interval16(h: u16) -> Option<(f64, f64)> {
    let m = h & 0x7fff;
    if !(0x0400..0x7c00).contains(&m) {
        return None;
    }
    let x = crate::half::f16_to_f64(m);
    let below = crate::half::f16_to_f64(m - 1);
    let above = if m == 0x7bff {
        65536.0
    } else {
        crate::half::f16_to_f64(m + 1)
    };
    let (lo, hi) = ((x + below) / 2.0, (x + above) / 2.0);
    Some(if h & 0x8000 != 0 {
        (-hi, -lo)
    } else {
        (lo, hi)
    })
}

fn fit_row16(row: &[u16], fused: bool, clamp: bool) -> Option<Line16> {
    // A `+0` entry (the mean on an integer) is any small non-negative value.
    let tiny = 2f64.powi(-16);
    let iv: Vec<(f64, f64)> = row
        .iter()
        .map(|&h| {
            if h == 0 {
                Some((0.0, tiny))
            } else {
                interval16(h)
            }
        })
        .collect::<Option<_>>()?;
    let (a, b) = super::affine::best_line(&iv)?;
    // The line's zero on the 2^-8 grid (then `c` and `w` are exact) and its value there.
    let (m0, c) = super::affine::shifted_origin(a, b)?;
    let (a32, e32) = (a as f32, (a * m0 + b) as f32);
    // A `+0` entry sits at `w = 0` (an integer mean), where `y` is `e`: try `e = 0` too.
    let zero = row.contains(&0);
    let mut candidates = Vec::new();
    for da in [0i32, 1, -1, 2, -2] {
        for de in [0i32, 1, -1, 2, -2] {
            candidates.push(Line16 {
                c: c as f32,
                a: step(a32, da),
                e: if zero { 0.0 } else { step(e32, de) },
                clamp,
            });
        }
    }
    candidates.into_iter().find(|f| {
        row.iter()
            .enumerate()
            .all(|(v, &h)| f.eval(v as u8, fused) == h)
    })
}

/// `x` moved by `n` units in the last place (towards larger bit patterns for `n > 0`).
fn step(x: f32, n: i32) -> f32 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    f32::from_bits(x.to_bits().wrapping_add_signed(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::half::f16_from_f64;

    fn table(mean: &[f64], std: &[f64]) -> Vec<u64> {
        let mut t = Vec::new();
        for v in 0..256 {
            for (m, s) in mean.iter().zip(std) {
                t.push(u64::from(f16_from_f64((f64::from(v) - m) / s)));
            }
        }
        t
    }

    #[test]
    fn bits16_rounds_normal_values_and_lifts_tiny_ones() {
        for clamp in [false, true] {
            assert_eq!(bits16(1.0, clamp), 0x3c00);
            assert_eq!(bits16(-2.0, clamp), 0xc000);
            assert_eq!(bits16(65504.0, clamp), 0x7bff);
            assert_eq!(bits16(-65504.0, clamp), 0xfbff);
            // Half a unit above 1.0 rounds away from zero; just below, to 1.0.
            assert_eq!(bits16(1.0 + 2f32.powi(-11), clamp), 0x3c01);
            assert_eq!(bits16(1.0 + 2f32.powi(-11) - 2f32.powi(-23), clamp), 0x3c00);
            assert_eq!(bits16(-(1.0 + 2f32.powi(-11)), clamp), 0xbc01);
            assert_eq!(bits16(2f32.powi(-14), clamp), 0x0400);
            assert_eq!(bits16(-(2f32.powi(-14)), clamp), 0x8400);
            // Every value away from a tie agrees with the exact rounding.
            for h in 0x0400u16..0x7bff {
                let x = crate::half::f16_to_f64(h) as f32;
                assert_eq!(bits16(x, clamp), h);
                assert_eq!(bits16(-x, clamp), h | 0x8000);
            }
        }
        // With the lift, +0 and small positive values become +0.
        assert_eq!(bits16(0.0, true), 0x0000);
        assert_eq!(bits16(2f32.powi(-16), true), 0x0000);
        assert_eq!(bits16(1e-30, true), 0x0000);
        // Without it they do not (such rows have no +0 entry, and are refused otherwise).
        assert_ne!(bits16(0.0, false), 0x0000);
    }

    #[test]
    fn float16_normalize_tables_are_reproduced_bit_for_bit() {
        for (mean, std) in [
            (
                vec![0.485 * 255.0, 0.456 * 255.0, 0.406 * 255.0],
                vec![0.229 * 255.0, 0.224 * 255.0, 0.225 * 255.0],
            ),
            (
                vec![125.307, 122.961, 113.8575],
                vec![51.5865, 50.847, 51.255],
            ),
            (vec![125.3, 123.0, 113.9], vec![63.0, 62.1, 66.7]),
            // Means on integers: a +0 entry.
            (vec![128.0, 0.0, 255.0], vec![64.0, 1.0, 127.5]),
        ] {
            let bits = table(&mean, &std);
            for fused in [false, true] {
                let fit = fit_table16(&bits, 3, fused).expect("a float16 table fits");
                for v in 0..256 {
                    for j in 0..3 {
                        assert_eq!(
                            u64::from(fit[j].eval(v as u8, fused)),
                            bits[v * 3 + j],
                            "v {v} row {j} fused {fused}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn most_float16_tables_fit_and_every_fit_is_exact() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut fitted = [0, 0];
        for _ in 0..400 {
            let (m, s) = (next() * 255.0, 0.5 + next() * 100.0);
            let bits = table(&[m], &[s]);
            for fused in [false, true] {
                if let Some(f) = fit_table16(&bits, 1, fused) {
                    fitted[fused as usize] += 1;
                    for (v, &b) in bits.iter().enumerate() {
                        assert_eq!(u64::from(f[0].eval(v as u8, fused)), b);
                    }
                }
            }
        }
        eprintln!("{fitted:?} of 400 float16 tables fitted (separate, fused)");
        assert!(
            fitted.iter().all(|&n| n >= 360),
            "{fitted:?} of 400 tables fitted"
        );
    }

    #[test]
    fn float16_tables_that_are_not_lines_or_have_subnormals_are_refused() {
        let mut bits = table(&[100.5], &[50.0]);
        assert!(fit_table16(&bits, 1, true).is_some());
        bits[77] = 0x3c00;
        assert_eq!(fit_table16(&bits, 1, true), None);
        // A mean a hair off an integer: a subnormal entry, which `bits16` cannot make.
        let bits = table(&[100.00001], &[50.0]);
        assert!(bits.iter().any(|&h| h != 0 && h & 0x7c00 == 0));
        assert_eq!(fit_table16(&bits, 1, false), None);
        assert_eq!(fit_table16(&bits[..255], 1, false), None);
    }
}
