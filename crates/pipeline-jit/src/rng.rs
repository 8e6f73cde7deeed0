//! Per-sample random numbers that depend only on (seed, epoch, sample id, operation index).
//!
//! Every operation that draws random numbers gets them from a generator seeded by hashing
//! these four numbers, so results do not depend on thread count, chunking or scheduling.
//! Random parameters of expressible operations are drawn before a chunk runs (in Rust, in
//! the order of the operation's [`RandSpec`] list) into a small per-chunk table that both the
//! interpreter and the generated code read; native kernels receive the per-sample seed.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64;

use crate::ir::RandSpec;

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The inverse of a 64-bit odd multiplier modulo 2^64 (Newton's iteration: each step
/// doubles the correct low bits, from 3 for `x = m`).
const fn inverse_odd(m: u64) -> u64 {
    let mut x = m;
    let mut i = 0;
    while i < 5 {
        x = x.wrapping_mul(2u64.wrapping_sub(m.wrapping_mul(x)));
        i += 1;
    }
    x
}

/// `splitmix64`'s inverse: each of its steps (add, xor-shift, odd multiply) is a
/// bijection of `u64`, undone in reverse order.
fn unsplitmix64(mut z: u64) -> u64 {
    const M1_INV: u64 = inverse_odd(0xBF58_476D_1CE4_E5B9);
    const M2_INV: u64 = inverse_odd(0x94D0_49BB_1331_11EB);
    z ^= (z >> 31) ^ (z >> 62);
    z = z.wrapping_mul(M2_INV);
    z ^= (z >> 27) ^ (z >> 54);
    z = z.wrapping_mul(M1_INV);
    z ^= (z >> 30) ^ (z >> 60);
    z.wrapping_sub(0x9E37_79B9_7F4A_7C15)
}

/// The [`sample_seed`] of operation `op_index` for the same (seed, epoch, sample) as
/// `op0_seed`, the seed operation 0 received: a native kernel at position 0 that does
/// the work of the operations after it (a decoder with a flip folded in) draws for them
/// exactly what they would have drawn themselves.
pub fn later_op_seed(op0_seed: u64, op_index: usize) -> u64 {
    splitmix64(unsplitmix64(op0_seed) ^ op_index as u64)
}

/// The seed of the generator of one (seed, epoch, sample, operation index).
pub fn sample_seed(seed: u64, epoch: u64, sample: u64, op_index: usize) -> u64 {
    let mut h = splitmix64(seed);
    h = splitmix64(h ^ epoch);
    h = splitmix64(h ^ sample);
    splitmix64(h ^ op_index as u64)
}

/// A per-sample generator (PCG-64) built from a [`sample_seed`].
pub fn sample_rng(sample_seed: u64) -> Pcg64 {
    Pcg64::seed_from_u64(sample_seed)
}

/// Draw one parameter.
pub fn draw(spec: &RandSpec, rng: &mut Pcg64) -> i64 {
    match *spec {
        RandSpec::Bernoulli(p) => {
            // 53 random bits as a float in [0, 1).
            let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            i64::from(u < p)
        }
        RandSpec::Int { lo, hi } => {
            let span = (hi as i128 - lo as i128 + 1) as u128;
            // Multiply-shift maps 64 random bits onto the span with negligible bias.
            let off = (u128::from(rng.next_u64()) * span) >> 64;
            (lo as i128 + off as i128) as i64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_op_seeds_are_the_operations_own() {
        assert_eq!(unsplitmix64(splitmix64(0)), 0);
        assert_eq!(unsplitmix64(splitmix64(u64::MAX)), u64::MAX);
        for (seed, epoch, sample) in [
            (0, 0, 0),
            (7, 3, 12345),
            (u64::MAX, 1, 99),
            (42, 0, 1 << 40),
        ] {
            let first = sample_seed(seed, epoch, sample, 0);
            for op in [0, 1, 2, 5, 63] {
                assert_eq!(
                    later_op_seed(first, op),
                    sample_seed(seed, epoch, sample, op)
                );
            }
        }
    }
}
