//! Element types of staged outputs, and the exact f64 → f32/f16/bf16 rounding the normalize
//! table uses (round to nearest, ties to even, from the f64 value in one step, as numpy's
//! `astype` does, so no double rounding through f32).

use std::fmt;

/// Element type of a staged output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceDtype {
    /// Unsigned bytes (images as decoded).
    U8,
    /// 32-bit signed integers.
    I32,
    /// 64-bit signed integers (labels, as FFCV's IntDecoder).
    I64,
    /// IEEE binary16, stored as its `u16` bit pattern.
    F16,
    /// bfloat16, stored as its `u16` bit pattern.
    Bf16,
    /// IEEE binary32.
    F32,
    /// IEEE binary64 (FFCV's FloatDecoder).
    F64,
}

impl DeviceDtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DeviceDtype::U8 => 1,
            DeviceDtype::F16 | DeviceDtype::Bf16 => 2,
            DeviceDtype::I32 | DeviceDtype::F32 => 4,
            DeviceDtype::I64 | DeviceDtype::F64 => 8,
        }
    }

    /// The name numpy/torch users know (`float16`, `bfloat16`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DeviceDtype::U8 => "uint8",
            DeviceDtype::I32 => "int32",
            DeviceDtype::I64 => "int64",
            DeviceDtype::F16 => "float16",
            DeviceDtype::Bf16 => "bfloat16",
            DeviceDtype::F32 => "float32",
            DeviceDtype::F64 => "float64",
        }
    }

    /// Whether the normalize kernel can produce this type.
    pub fn is_normalize_output(self) -> bool {
        matches!(
            self,
            DeviceDtype::F64 | DeviceDtype::F32 | DeviceDtype::F16 | DeviceDtype::Bf16
        )
    }
}

impl fmt::Display for DeviceDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rounds `x` to a binary format with `exp_bits` exponent and `man_bits` mantissa bits
/// (sign in bit `exp_bits + man_bits`), nearest-even, overflow to infinity.
fn round_f64(x: f64, exp_bits: u32, man_bits: u32) -> u32 {
    let bits = x.to_bits();
    let sign = ((bits >> 63) as u32) << (exp_bits + man_bits);
    let exp_all_ones = (1u32 << exp_bits) - 1;
    let inf = exp_all_ones << man_bits;
    if x.is_nan() {
        // A quiet NaN; the payload is not preserved (numpy keeps part of it, nobody relies on it).
        return sign | inf | (1 << (man_bits - 1));
    }
    if x.is_infinite() {
        return sign | inf;
    }
    let exp_field = ((bits >> 52) & 0x7ff) as i32;
    if exp_field == 0 {
        // Zero or an f64 subnormal (< 2^-1022): far below half the smallest f16/bf16 subnormal.
        return sign;
    }
    let bias = (1i32 << (exp_bits - 1)) - 1;
    let e = exp_field - 1023;
    let significand = (1u64 << 52) | (bits & ((1u64 << 52) - 1));
    let min_normal_exp = 1 - bias;
    // Bits of the 53-bit significand dropped by the target; more for target subnormals.
    let shift = 52 - man_bits as i32 + (min_normal_exp - e).max(0);
    if shift > 62 {
        // Less than a quarter of the smallest subnormal: rounds to zero.
        return sign;
    }
    let shift = shift as u32;
    let mut rounded = significand >> shift;
    let rem = significand & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    if rem > half || (rem == half && rounded & 1 == 1) {
        rounded += 1;
    }
    if e < min_normal_exp {
        // Subnormal target: the exponent field is 0, and a carry into bit `man_bits`
        // yields exactly the smallest normal number's encoding.
        return sign | rounded as u32;
    }
    let mut biased = e + bias;
    if rounded >> (man_bits + 1) != 0 {
        rounded >>= 1;
        biased += 1;
    }
    if biased >= exp_all_ones as i32 {
        return sign | inf;
    }
    sign | ((biased as u32) << man_bits) | (rounded as u32 & ((1 << man_bits) - 1))
}

/// `x` rounded to IEEE binary16 (nearest, ties to even), as bits.
pub fn f64_to_f16_bits(x: f64) -> u16 {
    round_f64(x, 5, 10) as u16
}

/// `x` rounded to bfloat16 (nearest, ties to even), as bits.
pub fn f64_to_bf16_bits(x: f64) -> u16 {
    round_f64(x, 8, 7) as u16
}

/// The value of binary16 bits, exactly.
pub fn f16_bits_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let man = f64::from(bits & 0x3ff);
    match exp {
        0 => sign * man * 2f64.powi(-24),
        0x1f if man == 0.0 => sign * f64::INFINITY,
        0x1f => f64::NAN,
        _ => sign * (1.0 + man / 1024.0) * 2f64.powi(exp - 15),
    }
}

/// The value of bfloat16 bits, exactly (bfloat16 is the top half of an f32).
pub fn bf16_bits_to_f64(bits: u16) -> f64 {
    f64::from(f32::from_bits(u32::from(bits) << 16))
}
