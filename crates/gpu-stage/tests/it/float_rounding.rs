//! f64 → f16/bf16 rounding: nearest, ties to even, in one step from the f64 value.

use gpu_stage::{bf16_bits_to_f64, f16_bits_to_f64, f64_to_bf16_bits, f64_to_f16_bits};

#[test]
fn f16_known_values() {
    let cases: [(f64, u16); 14] = [
        (0.0, 0x0000),
        (-0.0, 0x8000),
        (1.0, 0x3c00),
        (-2.0, 0xc000),
        (0.1, 0x2e66),
        (1.0 / 3.0, 0x3555),
        (65504.0, 0x7bff),
        (65519.999, 0x7bff),
        (65520.0, 0x7c00), // the tie above the largest finite rounds to even: infinity
        (1e10, 0x7c00),
        (f64::NEG_INFINITY, 0xfc00),
        (2f64.powi(-24), 0x0001),                  // smallest subnormal
        (2f64.powi(-14), 0x0400),                  // smallest normal
        (2f64.powi(-14) - 2f64.powi(-25), 0x0400), // rounds up into the normal range
    ];
    for (x, bits) in cases {
        assert_eq!(f64_to_f16_bits(x), bits, "f16({x})");
    }
}

#[test]
fn f16_ties_go_to_even() {
    // Half the smallest subnormal is a tie between 0 and 1 ulp: even is 0.
    assert_eq!(f64_to_f16_bits(2f64.powi(-25)), 0x0000);
    assert_eq!(f64_to_f16_bits(2f64.powi(-25) * 1.000001), 0x0001);
    // 1.5 ulp above the smallest subnormal is a tie between 1 and 2: even is 2.
    assert_eq!(f64_to_f16_bits(3.0 * 2f64.powi(-25)), 0x0002);
    // Between 1.0 (even mantissa) and 1.0 + 2^-10: ties to 1.0; the next tie goes up.
    assert_eq!(f64_to_f16_bits(1.0 + 2f64.powi(-11)), 0x3c00);
    assert_eq!(f64_to_f16_bits(1.0 + 3.0 * 2f64.powi(-11)), 0x3c02);
    // Far below the subnormals: zero, keeping the sign.
    assert_eq!(f64_to_f16_bits(-1e-300), 0x8000);
    assert_eq!(f64_to_f16_bits(f64::MIN_POSITIVE / 4.0), 0x0000);
}

#[test]
fn every_finite_f16_round_trips_and_midpoints_round_to_even() {
    for bits in 0u16..0x7c00 {
        let x = f16_bits_to_f64(bits);
        assert_eq!(f64_to_f16_bits(x), bits, "value {x}");
        assert_eq!(f64_to_f16_bits(-x), bits | 0x8000, "value {}", -x);
        if bits == 0x7bff {
            continue; // the next value is infinity: no finite midpoint
        }
        let next = f16_bits_to_f64(bits + 1);
        let mid = (x + next) / 2.0; // exact in f64
        let even = if bits & 1 == 0 { bits } else { bits + 1 };
        assert_eq!(f64_to_f16_bits(mid), even, "midpoint above {x}");
        // Just off the midpoint rounds to the nearer value.
        assert_eq!(f64_to_f16_bits(mid - (next - x) / 8.0), bits);
        assert_eq!(f64_to_f16_bits(mid + (next - x) / 8.0), bits + 1);
    }
}

#[test]
fn nan_stays_nan() {
    let h = f64_to_f16_bits(f64::NAN);
    assert_eq!(h & 0x7c00, 0x7c00);
    assert_ne!(h & 0x03ff, 0);
    assert!(f16_bits_to_f64(h).is_nan());
    let b = f64_to_bf16_bits(f64::NAN);
    assert!(bf16_bits_to_f64(b).is_nan());
}

#[test]
fn bf16_known_values() {
    let cases: [(f64, u16); 8] = [
        (1.0, 0x3f80),
        (-0.0, 0x8000),
        (1.0 / 3.0, 0x3eab),
        (0.1, 0x3dcd),
        (-2.117904, 0xc008), // (0 - 0.485*255) / (0.229*255), ImageNet's red channel at 0
        (f64::from(f32::MAX), 0x7f80), // rounds up past the largest finite bfloat16
        (3.3895313892515355e38, 0x7f7f), // the largest finite bfloat16
        (2f64.powi(-133), 0x0001), // smallest subnormal
    ];
    for (x, bits) in cases {
        assert_eq!(f64_to_bf16_bits(x), bits, "bf16({x})");
    }
}

#[test]
fn bf16_matches_f32_rounding_where_f32_is_exact() {
    // For values exactly representable in f32, bf16 rounding equals rounding the f32 bits
    // (nearest, ties to even) by 16 bits, the textbook definition.
    let mut state = 0x9e3779b97f4a7c15u64;
    for _ in 0..200_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let f = f32::from_bits(state as u32);
        if !f.is_finite() {
            continue;
        }
        let u = f.to_bits();
        let rounded = u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16;
        let expected = rounded as u16;
        assert_eq!(f64_to_bf16_bits(f64::from(f)), expected, "bf16({f:e})");
    }
}
