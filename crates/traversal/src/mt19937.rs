//! PyTorch's CPU generator (MT19937 as ATen implements it) and `torch.randperm`.
//!
//! `torch.Generator().manual_seed(s)` seeds a 32-bit Mersenne Twister with the low
//! 32 bits of `s` (standard MT19937 initialisation); `random()` is one tempered 32-bit
//! output and `random64()` joins two outputs, the first as the high half. ATen's CPU
//! `randperm(n)` swaps element `i` with `i + random() % (n - i)` for `n` below
//! `u32::MAX / 20`, and for larger `n` runs the "inside-out" Fisher-Yates with
//! `random64() % (i + 1)`.

const STATE_WORDS: usize = 624;
const SHIFT_WORDS: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// Below this length ATen's `randperm` uses 32-bit draws and modulo swaps.
pub const RANDPERM_SMALL_LIMIT: u64 = u32::MAX as u64 / 20;

/// The Mersenne Twister of `torch.Generator` (CPU).
#[derive(Clone)]
pub struct TorchMt19937 {
    state: Box<[u32; STATE_WORDS]>,
    next: usize,
}

impl std::fmt::Debug for TorchMt19937 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TorchMt19937").finish_non_exhaustive()
    }
}

impl TorchMt19937 {
    /// The generator after `manual_seed(seed)`: only the low 32 bits of the seed count.
    pub fn new(seed: u64) -> TorchMt19937 {
        let mut state = Box::new([0u32; STATE_WORDS]);
        // Truncation is ATen's: `seed & 0xffffffff`.
        state[0] = seed as u32;
        for j in 1..STATE_WORDS {
            let prev = state[j - 1];
            state[j] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(j as u32);
        }
        // The first draw regenerates the whole state, as ATen's `left_ = 1` does.
        TorchMt19937 {
            state,
            next: STATE_WORDS,
        }
    }

    fn regenerate(&mut self) {
        let s = &mut self.state;
        for i in 0..STATE_WORDS {
            let mixed = (s[i] & UPPER_MASK) | (s[(i + 1) % STATE_WORDS] & LOWER_MASK);
            let twisted = (mixed >> 1) ^ if mixed & 1 == 1 { MATRIX_A } else { 0 };
            s[i] = s[(i + SHIFT_WORDS) % STATE_WORDS] ^ twisted;
        }
        self.next = 0;
    }

    /// One 32-bit output (`CPUGeneratorImpl::random`).
    pub fn random(&mut self) -> u32 {
        if self.next >= STATE_WORDS {
            self.regenerate();
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// One 64-bit output (`CPUGeneratorImpl::random64`): the first 32-bit draw is the
    /// high half.
    pub fn random64(&mut self) -> u64 {
        let high = self.random();
        let low = self.random();
        (u64::from(high) << 32) | u64::from(low)
    }
}

/// `torch.randperm(n, generator=g)` with `g.manual_seed(seed)`, on the CPU.
pub fn randperm(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = TorchMt19937::new(seed);
    if (n as u64) < RANDPERM_SMALL_LIMIT {
        randperm_small(n, &mut rng)
    } else {
        randperm_large(n, &mut rng)
    }
}

/// The branch for `n < u32::MAX / 20`: forward swaps with `random() % (n - i)`.
fn randperm_small(n: usize, rng: &mut TorchMt19937) -> Vec<u64> {
    let mut perm: Vec<u64> = (0..n as u64).collect();
    for i in 0..n.saturating_sub(1) {
        // The draw is below n - i, so the target index stays below n.
        let z = (u64::from(rng.random()) % (n - i) as u64) as usize;
        perm.swap(i, z + i);
    }
    perm
}

/// The branch for large `n`: the inside-out Fisher-Yates with `random64() % (i + 1)`.
fn randperm_large(n: usize, rng: &mut TorchMt19937) -> Vec<u64> {
    let mut perm = vec![0u64; n];
    for i in 0..n {
        let z = (rng.random64() % (i as u64 + 1)) as usize;
        perm[i] = perm[z];
        perm[z] = i as u64;
    }
    perm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_mersenne_twister_outputs() {
        // The 10000th output of std::mt19937 seeded with 5489 is 4123659995 (C++11
        // [rand.predef]); ATen's engine is the same generator.
        let mut rng = TorchMt19937::new(5489);
        let mut last = 0;
        for _ in 0..10_000 {
            last = rng.random();
        }
        assert_eq!(last, 4_123_659_995);
    }

    #[test]
    fn only_the_low_32_bits_of_the_seed_count() {
        let mut a = TorchMt19937::new(42);
        let mut b = TorchMt19937::new(42 + (1u64 << 32));
        assert_eq!(a.random64(), b.random64());
    }

    #[test]
    fn random64_puts_the_first_draw_in_the_high_half() {
        let mut a = TorchMt19937::new(1);
        let mut b = TorchMt19937::new(1);
        let high = a.random();
        let low = a.random();
        assert_eq!(b.random64(), (u64::from(high) << 32) | u64::from(low));
    }

    #[test]
    fn the_large_branch_builds_a_permutation() {
        for n in [0usize, 1, 2, 7, 100] {
            let mut rng = TorchMt19937::new(n as u64);
            let mut perm = randperm_large(n, &mut rng);
            perm.sort_unstable();
            assert_eq!(perm, (0..n as u64).collect::<Vec<_>>());
        }
    }
}
