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
