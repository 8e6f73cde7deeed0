//! Replacing a `u8`-indexed `f32` table (FFCV's normalize lookup table) by arithmetic that
//! provably gives the same bits, so that the vector code computes it instead of gathering
//! one table entry per lane.
//!
//! A table row `t[v]`, `v` in `0..256`, that is the `f32` rounding of a line `A v + B` (as
//! `NormalizeImage`'s `(v - mean) / std` is) is recomputed as
//! `(v * a_hi + b_hi) + (v * a_lo + b_lo)` in `f32` (each half one fused multiply-add where
//! the host has FMA, a multiply and an add otherwise):
//! `a_hi`/`b_hi` keep 15 significant bits of `A`/`B` on a common grid, so the first sum is
//! exact, and `a_lo`/`b_lo` carry the rest, so the one rounding that matters is the last.
//! The line is found from the table alone: the slope that leaves the most room inside
//! every entry's rounding interval (a concave function of the slope, maximised by ternary
//! search), and the intercept in the middle of that room. Whatever the fit gives, the
//! formula is then evaluated for all 256 inputs with the same `f32` operations the
//! generated code uses and kept only if every result has the table's bits; otherwise the
//! table is read as before. Exactness therefore never rests on the fit. (The fused
//! multiply-add computes a table entry here, not an expression of the pipeline: the
//! pipeline's own `mul`/`add` are never fused.) A table with a `+0` entry (a mean on an
//! integer) gets a line through that point whose halves are both exactly zero there.

/// The `f32` coefficients of one table row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Affine {
    pub a_hi: f32,
    pub b_hi: f32,
    pub a_lo: f32,
    pub b_lo: f32,
}

impl Affine {
    /// The formula, in the order and with the roundings of the generated code: with
    /// `fused`, each half is one fused multiply-add (one rounding, and none for the exact
    /// first half); otherwise a multiply and an add each.
    pub fn eval(&self, v: f32, fused: bool) -> f32 {
        if fused {
            v.mul_add(self.a_hi, self.b_hi) + v.mul_add(self.a_lo, self.b_lo)
        } else {
            (v * self.a_hi + self.b_hi) + (v * self.a_lo + self.b_lo)
        }
    }
}

/// Coefficients for every row `j` of a table laid out as `bits[v * rows + j]` (bit
/// patterns of `f32`), or `None` if some row is not reproduced exactly.
pub(super) fn fit_table(bits: &[u64], rows: usize, fused: bool) -> Option<Vec<Affine>> {
    if rows == 0 || bits.len() != 256 * rows {
        return None;
    }
    (0..rows)
        .map(|j| {
            let row: Vec<f32> = (0..256)
                .map(|v| f32::from_bits(bits[v * rows + j] as u32))
                .collect();
            fit_row(&row, fused)
        })
        .collect()
}

/// The rounding interval of a finite nonzero `f32` (midpoints to its neighbours).
fn interval(t: f32) -> (f64, f64) {
    let b = t.to_bits();
    // Neighbours away from and towards zero (same sign: `t` is not zero).
    let away = f64::from(f32::from_bits(b + 1));
    let toward = f64::from(f32::from_bits(b - 1));
    let t = f64::from(t);
    let (lo, hi) = if t > 0.0 {
        (toward, away)
    } else {
        (away, toward)
    };
    ((t + lo) / 2.0, (t + hi) / 2.0)
}

/// Each entry's interval of the values that round to it, `[lo, hi]`.
type Intervals = Vec<(f64, f64)>;

/// The inputs whose entry is `+0`, and each entry's rounding interval (`[0, 0]` for a
/// `+0`); `None` for a row no line reproduces (non-finite, `-0` or `f32::MAX` entries).
fn row_intervals(row: &[f32]) -> Option<(Vec<usize>, Intervals)> {
    if row
        .iter()
        .any(|t| !t.is_finite() || t.to_bits() == 0x8000_0000 || t.abs() == f32::MAX)
    {
        return None;
    }
    let zeros: Vec<usize> = (0..row.len()).filter(|&v| row[v] == 0.0).collect();
    let iv: Vec<(f64, f64)> = row
        .iter()
        .map(|&t| if t == 0.0 { (0.0, 0.0) } else { interval(t) })
        .collect();
    Some((zeros, iv))
}

fn fit_row(row: &[f32], fused: bool) -> Option<Affine> {
    let (zeros, iv) = row_intervals(row)?;
    match zeros[..] {
        [] => fit_free(row, &iv, fused),
        [v0] => fit_through_zero(row, &iv, v0, fused),
        _ => None,
    }
}

/// Any line: the slope with the most room for the intercept, the intercept in its middle.
fn fit_free(row: &[f32], iv: &[(f64, f64)], fused: bool) -> Option<Affine> {
    let (a, b) = best_line(iv)?;
    // A grid of 15 significant bits of the slope; the intercept on the same grid.
    let grid = 2f64.powi(a.abs().log2().floor() as i32 - 14);
    let a_hi = (a / grid).round() * grid;
    let b_hi = (b / grid).round() * grid;
    verified(
        row,
        fused,
        Affine {
            a_hi: a_hi as f32,
            b_hi: b_hi as f32,
            a_lo: (a - a_hi) as f32,
            b_lo: (b - b_hi) as f32,
        },
    )
}

/// The line `(a, b)` through the intervals `iv[v]` (`v` in `0..256`) that leaves the most
/// room: the slope maximising the room left for the intercept, the intercept in its
/// middle; `None` if no line passes through all of them.
pub(super) fn best_line(iv: &[(f64, f64)]) -> Option<(f64, f64)> {
    if iv.len() != 256 {
        return None;
    }
    // Room left for the intercept at slope `a`, and its middle.
    let room = |a: f64| -> (f64, f64) {
        let mut lo = f64::NEG_INFINITY;
        let mut hi = f64::INFINITY;
        for (v, &(l, u)) in iv.iter().enumerate() {
            lo = lo.max(l - a * v as f64);
            hi = hi.min(u - a * v as f64);
        }
        (hi - lo, (hi + lo) / 2.0)
    };
    let mid = |(l, u): (f64, f64)| (l + u) / 2.0;
    let slope = (mid(iv[255]) - mid(iv[0])) / 255.0;
    let width = ((iv[0].1 - iv[0].0) + (iv[255].1 - iv[255].0)) / 255.0 * 2.0;
    let (mut lo, mut hi) = (slope - width, slope + width);
    for _ in 0..200 {
        let m1 = lo + (hi - lo) / 3.0;
        let m2 = hi - (hi - lo) / 3.0;
        if room(m1).0 < room(m2).0 {
            lo = m1;
        } else {
            hi = m2;
        }
    }
    let a = (lo + hi) / 2.0;
    let (r, b) = room(a);
    if r <= 0.0 || a == 0.0 || !a.is_finite() || !b.is_finite() {
        return None;
    }
    Some((a, b))
}

/// A line through `(v0, +0)` (the mean on an integer): both halves of the formula are
/// made exactly zero there, so the sum is `+0` as in the table.
fn fit_through_zero(row: &[f32], iv: &[(f64, f64)], v0: usize, fused: bool) -> Option<Affine> {
    let a = slope_through(iv, v0)?;
    let grid = 2f64.powi(a.abs().log2().floor() as i32 - 14);
    let a_hi = (a / grid).round() * grid;
    // 16 significant bits for the rest too, so that `v0 * a_lo` is exact and the second
    // half is exactly zero at `v0` with or without fusing; the line still passes through
    // `v0`, so the error this adds is relative (2^-31), not absolute.
    let rest = a - a_hi;
    let a_lo = if rest == 0.0 {
        0.0
    } else {
        let g = 2f64.powi(rest.abs().log2().floor() as i32 - 15);
        ((rest / g).round() * g) as f32
    };
    let v0 = v0 as f32;
    verified(
        row,
        fused,
        Affine {
            a_hi: a_hi as f32,
            b_hi: -(v0 * a_hi as f32),
            a_lo,
            b_lo: -(v0 * a_lo),
        },
    )
}

/// The slope of a line through `(v0, 0)` and every interval `iv[v]`: the middle of the
/// slopes that pass, or `None` if none does.
fn slope_through(iv: &[(f64, f64)], v0: usize) -> Option<f64> {
    let (mut lo, mut hi) = (f64::NEG_INFINITY, f64::INFINITY);
    for (v, &(l, u)) in iv.iter().enumerate() {
        let d = v as f64 - v0 as f64;
        if d == 0.0 {
            continue;
        }
        let (x, y) = if d > 0.0 {
            (l / d, u / d)
        } else {
            (u / d, l / d)
        };
        lo = lo.max(x);
        hi = hi.min(y);
    }
    let a = (lo + hi) / 2.0;
    (lo < hi && a != 0.0 && a.is_finite()).then_some(a)
}

/// The `f32` bits `0x4700_xx00` of `32768 + x` for a byte `x`: the vector code builds them
/// with one byte shuffle (the byte into the mantissa, the exponent byte from a constant),
/// which replaces the widening of bytes to 32-bit lanes and the integer conversion.
pub(super) const MAGIC: u32 = 0x4700_0000;

/// The shifted form of a row, used where the host has fused multiply-add: with
/// `f = 32768 + v` and `w = f - c` (exact: both lie in `[2^15, 2^16)`, whose spacing is
/// `2^-8`, and their difference is exact by Sterbenz's lemma),
/// `w * a_hi + (f * a_lo + e)` as two fused multiply-adds. `c - 32768` is the line's zero
/// on the `2^-8` grid, `a_hi + a_lo` the slope to 48 bits and `e` the line's (small) value
/// at that grid point minus `c * a_lo`, so the inner sum is tiny and its rounding
/// negligible, and the outer one rounds once. Three floating-point operations per four
/// lanes instead of four (convert, two multiply-adds, add), no widening shuffles, and each
/// of `f` and `w` is used by one multiply-add (which may overwrite it: no register copy).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Shifted {
    pub c: f32,
    pub a_hi: f32,
    pub a_lo: f32,
    pub e: f32,
}

impl Shifted {
    /// The formula for the byte `v`, with the generated code's operations and roundings.
    pub fn eval(&self, v: u8) -> f32 {
        let f = f32::from_bits(MAGIC | (u32::from(v) << 8));
        let w = f - self.c;
        w.mul_add(self.a_hi, f.mul_add(self.a_lo, self.e))
    }
}

/// Shifted forms for every row `j` of a table laid out as `bits[v * rows + j]` (bit
/// patterns of `f32`), or `None` if some row is not reproduced exactly.
pub(super) fn fit_shifted(bits: &[u64], rows: usize) -> Option<Vec<Shifted>> {
    if rows == 0 || bits.len() != 256 * rows {
        return None;
    }
    (0..rows)
        .map(|j| {
            let row: Vec<f32> = (0..256)
                .map(|v| f32::from_bits(bits[v * rows + j] as u32))
                .collect();
            shifted_row(&row)
        })
        .collect()
}

/// The zero `m0` of the line `a * v + b` on the 2^-8 grid and the shift `c = 32768 + m0`
/// the shifted forms subtract, when `c` is exact in `f32` (then `w = (32768 + v) - c` is
/// exact too); `None` when the zero lies outside the shifted range.
pub(super) fn shifted_origin(a: f64, b: f64) -> Option<(f64, f64)> {
    let m0 = (-b / a * 256.0).round() / 256.0;
    if !(0.0..32768.0).contains(&(m0 + 16384.0)) {
        return None;
    }
    let c = 32768.0 + m0;
    (f64::from(c as f32) == c).then_some((m0, c))
}

fn shifted_row(row: &[f32]) -> Option<Shifted> {
    let (zeros, iv) = row_intervals(row)?;
    let (a, b) = match zeros[..] {
        [] => best_line(&iv)?,
        [v0] => {
            let a = slope_through(&iv, v0)?;
            (a, -a * v0 as f64)
        }
        _ => return None,
    };
    let (m0, c) = shifted_origin(a, b)?;
    let eps = a * m0 + b;
    let mut candidates = Vec::new();
    for da in [0i32, 1, -1] {
        let a_hi = f32::from_bits((a as f32).to_bits().wrapping_add_signed(da));
        let rest = a - f64::from(a_hi);
        // The rest to 8 significant bits as well: then `c * a_lo` is exact (`c` has at
        // most 16 when `m0` is an integer), so that with `eps = 0` the inner sum is
        // exactly zero at `v = m0`: a `+0` entry.
        let short = if rest == 0.0 {
            0.0
        } else {
            let g = 2f64.powi(rest.abs().log2().floor() as i32 - 7);
            (rest / g).round() * g
        };
        for a_lo in [rest as f32, short as f32] {
            for eps in [eps, 0.0] {
                candidates.push(Shifted {
                    c: c as f32,
                    a_hi,
                    a_lo,
                    e: (eps - c * f64::from(a_lo)) as f32,
                });
            }
        }
    }
    candidates.into_iter().find(|f| {
        row.iter()
            .enumerate()
            .all(|(v, t)| f.eval(v as u8).to_bits() == t.to_bits())
    })
}

/// `f` if it gives every entry of `row` bit for bit, with the generated code's operations.
fn verified(row: &[f32], fused: bool, f: Affine) -> Option<Affine> {
    let exact = row
        .iter()
        .enumerate()
        .all(|(v, t)| f.eval(v as f32, fused).to_bits() == t.to_bits());
    exact.then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(mean: &[f64], std: &[f64]) -> Vec<u64> {
        let mut t = Vec::new();
        for v in 0..256 {
            for (m, s) in mean.iter().zip(std) {
                t.push(u64::from((((f64::from(v) - m) / s) as f32).to_bits()));
            }
        }
        t
    }

    #[test]
    fn normalize_tables_are_reproduced_bit_for_bit() {
        // ImageNet and CIFAR statistics (pixel units), and the benchmark's.
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
            // Means on integers: a zero entry, which must come out as +0.
            (vec![128.0, 0.0, 255.0], vec![64.0, 1.0, 127.5]),
        ] {
            let bits = table(&mean, &std);
            for fused in [false, true] {
                let fit = fit_table(&bits, 3, fused).expect("a normalize table fits");
                for v in 0..256 {
                    for j in 0..3 {
                        assert_eq!(
                            u64::from(fit[j].eval(v as f32, fused).to_bits()),
                            bits[v * 3 + j],
                            "v {v} row {j} fused {fused}"
                        );
                    }
                }
            }
        }
    }

    /// Over many means and deviations (deterministic), nearly every table has an exact
    /// form, and every form returned reproduces its table (checked again here).
    #[test]
    fn most_normalize_tables_fit_and_every_fit_is_exact() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
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
                if let Some(f) = fit_table(&bits, 1, fused) {
                    fitted[fused as usize] += 1;
                    for (v, &b) in bits.iter().enumerate() {
                        assert_eq!(u64::from(f[0].eval(v as f32, fused).to_bits()), b);
                    }
                }
            }
        }
        eprintln!("{fitted:?} of 400 tables fitted (separate, fused)");
        assert!(
            fitted.iter().all(|&n| n >= 380),
            "{fitted:?} of 400 tables fitted"
        );
    }

    /// The shifted form (three operations per four lanes) fits the usual statistics
    /// and nearly every random table, and every form returned is exact.
    #[test]
    fn shifted_forms_fit_and_are_exact() {
        for (mean, std) in [
            (
                vec![0.485 * 255.0, 0.456 * 255.0, 0.406 * 255.0],
                vec![0.229 * 255.0, 0.224 * 255.0, 0.225 * 255.0],
            ),
            (vec![125.3, 123.0, 113.9], vec![63.0, 62.1, 66.7]),
            (vec![128.0, 0.0, 255.0], vec![64.0, 1.0, 127.5]),
        ] {
            let bits = table(&mean, &std);
            let fit = fit_shifted(&bits, 3).expect("a normalize table has a shifted form");
            for v in 0..256 {
                for j in 0..3 {
                    assert_eq!(
                        u64::from(fit[j].eval(v as u8).to_bits()),
                        bits[v * 3 + j],
                        "v {v} row {j}"
                    );
                }
            }
        }
        let mut x = 0x51_7cc1_b727_220au64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut fitted = 0;
        for _ in 0..300 {
            let (m, s) = (next() * 255.0, 0.5 + next() * 100.0);
            let bits = table(&[m], &[s]);
            if let Some(f) = fit_shifted(&bits, 1) {
                fitted += 1;
                for (v, &b) in bits.iter().enumerate() {
                    assert_eq!(u64::from(f[0].eval(v as u8).to_bits()), b);
                }
            }
        }
        eprintln!("{fitted} of 300 tables have a shifted form");
        assert!(fitted >= 270, "{fitted} of 300 tables have a shifted form");
        let mut bits = table(&[100.5], &[50.0]);
        bits[3] = u64::from(7.0f32.to_bits());
        assert_eq!(fit_shifted(&bits, 1), None, "not a line");
    }

    #[test]
    fn tables_that_are_not_lines_are_refused() {
        let mut bits = table(&[100.5], &[50.0]);
        assert!(fit_table(&bits, 1, false).is_some());
        bits[77] = u64::from(1.0f32.to_bits());
        assert_eq!(fit_table(&bits, 1, false), None);
        assert_eq!(fit_table(&bits, 1, true), None);
        // A wrong length is refused too.
        assert_eq!(fit_table(&table(&[100.5], &[50.0])[..255], 1, false), None);
    }
}
