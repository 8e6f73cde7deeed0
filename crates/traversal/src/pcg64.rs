//! NumPy's `PCG64` bit generator and the integer draws `Generator.shuffle` makes with it.
//!
//! The generator itself is `rand_pcg::Lcg128Xsl64` (PCG XSL-RR 128/64, the same
//! multiplier, step and output function as NumPy's). What NumPy adds, and what this
//! module reproduces, is (1) the seeding: `SeedSequence.generate_state(4, uint64)` gives
//! words `[s0, s1, i0, i1]`, the initial state is `s0 << 64 | s1` and the stream is
//! `i0 << 64 | i1` (high word first), then the standard PCG initialisation, which
//! `Lcg128Xsl64::new` performs identically; (2) 32-bit draws served from buffered halves
//! of 64-bit outputs (low half first, high half kept for the next call); (3) bounded
//! integers by masked rejection (`random_interval`).

use rand_core::RngCore;
use rand_pcg::Lcg128Xsl64;

use crate::seed_sequence::SeedSequence;

/// A PCG64 generator that draws exactly the numbers NumPy's `PCG64` draws.
#[derive(Clone, Debug)]
pub struct NumpyPcg64 {
    rng: Lcg128Xsl64,
    /// The high half of the last 64-bit output, when a 32-bit draw left it unused.
    buffered_u32: Option<u32>,
}

impl NumpyPcg64 {
    /// The generator of `numpy.random.default_rng(seed)` for a non-negative integer seed.
    pub fn default_rng(seed: u128) -> NumpyPcg64 {
        NumpyPcg64::from_seed_sequence(&SeedSequence::from_int(seed))
    }

    /// The generator `PCG64(seed_sequence)` builds.
    pub fn from_seed_sequence(seed_sequence: &SeedSequence) -> NumpyPcg64 {
        let words = seed_sequence.generate_state_u64(4);
        let state = (u128::from(words[0]) << 64) | u128::from(words[1]);
        let stream = (u128::from(words[2]) << 64) | u128::from(words[3]);
        // NumPy: state = 0; inc = stream << 1 | 1; step; state += initial; step.
        // rand_pcg: inc = stream << 1 | 1; state = initial + inc; step. Both reach the
        // same state, because the first NumPy step from 0 lands exactly on `inc`.
        NumpyPcg64 {
            rng: Lcg128Xsl64::new(state, stream),
            buffered_u32: None,
        }
    }

    /// The next 64-bit output (`next_uint64`); it leaves a buffered 32-bit half alone,
    /// as NumPy does.
    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// The next 32-bit output (`next_uint32`): the low half of a fresh 64-bit output,
    /// then its high half on the following call.
    pub fn next_u32(&mut self) -> u32 {
        if let Some(high) = self.buffered_u32.take() {
            return high;
        }
        let next = self.rng.next_u64();
        self.buffered_u32 = Some((next >> 32) as u32);
        // Truncation is the point: the low half.
        next as u32
    }

    /// A uniform integer in `0..=max` (NumPy's `random_interval`): draw under the
    /// smallest all-ones mask covering `max` and reject values above it; 32-bit draws
    /// when `max` fits in 32 bits, 64-bit draws otherwise.
    pub fn random_interval(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let mask = u64::MAX >> max.leading_zeros();
        if max <= u64::from(u32::MAX) {
            loop {
                let value = u64::from(self.next_u32()) & mask;
                if value <= max {
                    return value;
                }
            }
        } else {
            loop {
                let value = self.next_u64() & mask;
                if value <= max {
                    return value;
                }
            }
        }
    }

    /// Shuffle in place exactly as `Generator.shuffle` does for a 1-D array:
    /// Fisher-Yates from the last element down to the second, swapping element `i`
    /// with `random_interval(i)`.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            // `i` is a slice index, so it fits in u64; the draw is at most `i`.
            let j = self.random_interval(i as u64) as usize;
            items.swap(i, j);
        }
    }

    /// `Generator.permutation(n)`: `0..n` shuffled.
    pub fn permutation(&mut self, n: usize) -> Vec<u64> {
        let mut items: Vec<u64> = (0..n as u64).collect();
        self.shuffle(&mut items);
        items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u32_draws_use_the_low_then_the_high_half_of_one_u64() {
        let mut a = NumpyPcg64::default_rng(7);
        let mut b = NumpyPcg64::default_rng(7);
        let whole = a.next_u64();
        assert_eq!(b.next_u32(), whole as u32);
        assert_eq!(b.next_u32(), (whole >> 32) as u32);
        assert_eq!(b.next_u64(), a.next_u64());
    }

    #[test]
    fn a_u64_draw_keeps_the_buffered_half_for_the_next_u32_draw() {
        let mut a = NumpyPcg64::default_rng(3);
        let mut b = NumpyPcg64::default_rng(3);
        let first = a.next_u64();
        let second = a.next_u64();
        assert_eq!(b.next_u32(), first as u32);
        assert_eq!(b.next_u64(), second);
        assert_eq!(b.next_u32(), (first >> 32) as u32);
    }

    #[test]
    fn random_interval_stays_within_its_bound() {
        let mut rng = NumpyPcg64::default_rng(11);
        for max in [
            0u64,
            1,
            2,
            3,
            5,
            1000,
            u64::from(u32::MAX),
            1 << 40,
            u64::MAX,
        ] {
            for _ in 0..50 {
                assert!(rng.random_interval(max) <= max);
            }
        }
        assert_eq!(rng.random_interval(0), 0);
    }
}
