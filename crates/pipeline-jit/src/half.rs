//! IEEE binary16 (`ElemType::F16`): the conversions both engines use, as integer bit
//! manipulation, and their Cranelift emission.
//!
//! Every F16 value is computed in `f64` and rounded once to binary16 (round to nearest,
//! ties to even), as NumPy's `float64 -> float16` assignment does (FFCV's `NormalizeImage`
//! builds its float16 table that way). `f64` holds every binary16 value exactly, and its
//! 53-bit significand is wide enough (≥ 2·11 + 2) that `+ - * /` computed in `f64` and
//! rounded once equal the correctly rounded binary16 operations.
//!
//! The conversions are written by hand rather than taken from a crate (or from the host's
//! F16C instructions) because the code generator must emit the very same algorithm with
//! integer instructions, and the interpreter's Rust must mirror it step for step; the
//! exhaustive tests below pin it to IEEE rounding.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::immediates::Ieee64;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};
use cranelift_frontend::FunctionBuilder;

const F64_MAN_BITS: u64 = 52;
const MAN_MASK: u64 = (1 << F64_MAN_BITS) - 1;
/// The bits of the f64 significand below binary16's 10.
const DROP: u64 = F64_MAN_BITS - 10;
/// f64 exponent bias minus binary16's (1023 - 15).
const REBIAS: i64 = 1008;
/// Smallest right shift of the 53-bit significand that gives a binary16 subnormal (e = 0),
/// and the largest one worth doing (beyond it every value rounds to zero).
const SUB_SHIFT_MIN: i64 = 43;
const SUB_SHIFT_MAX: i64 = 54;
const INF: u64 = 0x7c00;
/// The canonical quiet NaN.
const QNAN: u64 = 0x7e00;

/// Round `x` to the nearest binary16 (ties to even) and return its bits. Every NaN becomes
/// the one quiet NaN `0x7e00` (so results never depend on how a platform signs or fills
/// the NaN of an invalid operation); overflow gives ±infinity.
pub fn f16_from_f64(x: f64) -> u16 {
    let bits = x.to_bits();
    let sign = (bits >> 48) & 0x8000;
    let exp = ((bits >> F64_MAN_BITS) & 0x7ff) as i64;
    let man = bits & MAN_MASK;
    let e = exp - REBIAS;
    // The normal form: 10 mantissa bits, the dropped 42 decide the rounding; a carry out of
    // the mantissa correctly bumps the exponent (up to infinity).
    let hm = man >> DROP;
    let normal = (((e as u64) << 10) | hm).wrapping_add(round_up(man, DROP, hm));
    // The subnormal form (e <= 0): the significand with its implicit bit, shifted further.
    let shift = (SUB_SHIFT_MIN - e).clamp(SUB_SHIFT_MIN, SUB_SHIFT_MAX) as u64;
    let m = man | (1 << F64_MAN_BITS);
    let sm = m >> shift;
    let sub = sm + round_up(m, shift, sm);
    let magnitude = if exp == 0x7ff {
        if man != 0 {
            return QNAN as u16;
        }
        INF
    } else if e >= 31 {
        INF
    } else if e <= 0 {
        sub
    } else {
        normal
    };
    (sign | magnitude) as u16
}

/// 1 if dropping the low `shift` bits of `v` (which leave `kept`) rounds up, ties to even.
fn round_up(v: u64, shift: u64, kept: u64) -> u64 {
    let rem = v & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    u64::from(rem > half || (rem == half && kept & 1 == 1))
}

/// The value of the binary16 with bits `h` (exact).
pub fn f16_to_f64(h: u16) -> f64 {
    let h = u64::from(h);
    let sign = (h & 0x8000) << 48;
    let exp = (h >> 10) & 0x1f;
    let man = h & 0x3ff;
    f64::from_bits(match exp {
        0 => (man as f64 * SUBNORMAL_UNIT).to_bits() | sign,
        31 => sign | (0x7ff << F64_MAN_BITS) | (man << DROP),
        _ => sign | ((exp + REBIAS as u64) << F64_MAN_BITS) | (man << DROP),
    })
}

/// The binary16 subnormal unit, 2^-24.
const SUBNORMAL_UNIT: f64 = 1.0 / 16_777_216.0;

/// Emit [`f16_from_f64`]: `x` is an `f64` value, the result an `i16`.
pub(crate) fn emit_from_f64(b: &mut FunctionBuilder<'_>, x: Value) -> Value {
    let i64t = types::I64;
    let bits = b.ins().bitcast(i64t, MemFlagsData::new(), x);
    let hi = b.ins().ushr_imm_s(bits, 48);
    let sign = b.ins().band_imm_s(hi, 0x8000);
    let ex = b.ins().ushr_imm_s(bits, F64_MAN_BITS as i64);
    let exp = b.ins().band_imm_s(ex, 0x7ff);
    let man = b.ins().band_imm_s(bits, MAN_MASK as i64);
    let e = b.ins().iadd_imm_s(exp, -REBIAS);

    let hm = b.ins().ushr_imm_s(man, DROP as i64);
    let e10 = b.ins().ishl_imm_s(e, 10);
    let nf = b.ins().bor(e10, hm);
    let drop = b.ins().iconst(i64t, DROP as i64);
    let up = emit_round_up(b, man, drop, hm);
    let normal = b.ins().iadd(nf, up);

    let k = b.ins().iconst(i64t, SUB_SHIFT_MIN);
    let s = b.ins().isub(k, e);
    let lo = b.ins().iconst(i64t, SUB_SHIFT_MIN);
    let hi = b.ins().iconst(i64t, SUB_SHIFT_MAX);
    let s = b.ins().smax(s, lo);
    let shift = b.ins().smin(s, hi);
    let m = b.ins().bor_imm_s(man, 1 << F64_MAN_BITS);
    let sm = b.ins().ushr(m, shift);
    let sup = emit_round_up(b, m, shift, sm);
    let sub = b.ins().iadd(sm, sup);

    let inf = b.ins().iconst(i64t, INF as i64);
    let signed_inf = b.ins().bor(inf, sign);
    let nan = b.ins().iconst(i64t, QNAN as i64);
    let is_nan = b.ins().icmp_imm_s(IntCC::NotEqual, man, 0);
    let special_r = b.ins().select(is_nan, nan, signed_inf);
    let is_sub = b.ins().icmp_imm_s(IntCC::SignedLessThanOrEqual, e, 0);
    let r = b.ins().select(is_sub, sub, normal);
    let over = b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, e, 31);
    let r = b.ins().select(over, inf, r);
    let special = b.ins().icmp_imm_s(IntCC::Equal, exp, 0x7ff);
    let r = b.ins().bor(r, sign);
    let r = b.ins().select(special, special_r, r);
    b.ins().ireduce(types::I16, r)
}

fn emit_round_up(b: &mut FunctionBuilder<'_>, v: Value, shift: Value, kept: Value) -> Value {
    let one = b.ins().iconst(types::I64, 1);
    let unit = b.ins().ishl(one, shift);
    let mask = b.ins().iadd_imm_s(unit, -1);
    let rem = b.ins().band(v, mask);
    let half = b.ins().ushr_imm_s(unit, 1);
    let above = b.ins().icmp(IntCC::UnsignedGreaterThan, rem, half);
    let tie = b.ins().icmp(IntCC::Equal, rem, half);
    let odd = b.ins().band_imm_s(kept, 1);
    let odd = b.ins().icmp_imm_s(IntCC::NotEqual, odd, 0);
    let tie_odd = b.ins().band(tie, odd);
    let up = b.ins().bor(above, tie_odd);
    b.ins().uextend(types::I64, up)
}

/// Emit [`f16_to_f64`]: `h` is an `i16` value, the result an `f64`.
pub(crate) fn emit_to_f64(b: &mut FunctionBuilder<'_>, h: Value) -> Value {
    let h = b.ins().uextend(types::I64, h);
    let s = b.ins().band_imm_s(h, 0x8000);
    let sign = b.ins().ishl_imm_s(s, 48);
    let ex = b.ins().ushr_imm_s(h, 10);
    let exp = b.ins().band_imm_s(ex, 0x1f);
    let man = b.ins().band_imm_s(h, 0x3ff);
    let man_hi = b.ins().ishl_imm_s(man, DROP as i64);
    let with_sign = b.ins().bor(sign, man_hi);

    let rebias = b.ins().iadd_imm_s(exp, REBIAS);
    let ne = b.ins().ishl_imm_s(rebias, F64_MAN_BITS as i64);
    let normal = b.ins().bor(with_sign, ne);
    let special = b
        .ins()
        .bor_imm_s(with_sign, (0x7ffu64 << F64_MAN_BITS) as i64);

    let mf = b.ins().fcvt_from_uint(types::F64, man);
    let unit = b.ins().f64const(Ieee64::with_float(SUBNORMAL_UNIT));
    let sf = b.ins().fmul(mf, unit);
    let sb = b.ins().bitcast(types::I64, MemFlagsData::new(), sf);
    let sub = b.ins().bor(sb, sign);

    let is_special = b.ins().icmp_imm_s(IntCC::Equal, exp, 31);
    let r = b.ins().select(is_special, special, normal);
    let is_sub = b.ins().icmp_imm_s(IntCC::Equal, exp, 0);
    let r = b.ins().select(is_sub, sub, r);
    b.ins().bitcast(types::F64, MemFlagsData::new(), r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_nan(h: u16) -> bool {
        h & 0x7c00 == 0x7c00 && h & 0x3ff != 0
    }

    #[test]
    fn every_f16_round_trips_through_f64() {
        for h in 0..=u16::MAX {
            let x = f16_to_f64(h);
            if is_nan(h) {
                assert!(x.is_nan(), "{h:#06x}");
                assert_eq!(f16_from_f64(x), 0x7e00, "{h:#06x}: the canonical NaN");
            } else {
                assert_eq!(f16_from_f64(x), h, "{h:#06x} -> {x}");
            }
        }
    }

    #[test]
    fn known_values() {
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
        assert_eq!(f16_to_f64(0x7bff), 65504.0);
        assert_eq!(f16_to_f64(0x0001), SUBNORMAL_UNIT);
        assert_eq!(f16_to_f64(0x0400), 1.0 / 16384.0);
        assert_eq!(f16_from_f64(0.1), 0x2e66);
        assert_eq!(f16_from_f64(-0.0), 0x8000);
        assert_eq!(f16_from_f64(65519.99), 0x7bff);
        assert_eq!(
            f16_from_f64(65520.0),
            0x7c00,
            "the tie above 65504 rounds to inf"
        );
        assert_eq!(f16_from_f64(1e300), 0x7c00);
        assert_eq!(f16_from_f64(f64::NEG_INFINITY), 0xfc00);
        assert_eq!(f16_from_f64(-f64::NAN), 0x7e00);
        assert_eq!(f16_from_f64(f64::from_bits(0x7ff0_0000_0000_0001)), 0x7e00);
        assert_eq!(f16_from_f64(SUBNORMAL_UNIT / 2.0), 0, "tie to even zero");
        assert_eq!(f16_from_f64(SUBNORMAL_UNIT * 0.50001), 1);
        assert_eq!(f16_from_f64(SUBNORMAL_UNIT * 1.5), 2, "tie to even 2");
        assert_eq!(f16_from_f64(f64::MIN_POSITIVE), 0);
        assert_eq!(f16_from_f64(5e-324), 0);
    }

    /// Between two neighbouring binary16 values (any sign, subnormals, the top binade),
    /// the midpoint goes to the even one, and anything off the midpoint to the nearer one.
    #[test]
    fn midpoints_round_to_even_and_others_to_nearest() {
        for h in 0..0x7bffu16 {
            for sign in [0u16, 0x8000] {
                let (a, b) = (h | sign, (h + 1) | sign);
                let (x, y) = (f16_to_f64(a), f16_to_f64(b));
                let mid = (x + y) / 2.0;
                let even = if h & 1 == 0 { a } else { b };
                assert_eq!(f16_from_f64(mid), even, "{a:#06x}..{b:#06x}");
                let below = mid - (y - x) / 1024.0;
                let above = mid + (y - x) / 1024.0;
                assert_eq!(f16_from_f64(below), a, "below the midpoint of {a:#06x}");
                assert_eq!(f16_from_f64(above), b, "above the midpoint of {a:#06x}");
            }
        }
    }
}
