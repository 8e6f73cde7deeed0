//! NumPy's `SeedSequence`: how `numpy.random.default_rng(seed)` turns an integer seed
//! into the 128-bit state and increment of its PCG64 generator.
//!
//! The algorithm (from Melissa O'Neill's `seed_seq` alternative, as adopted by NumPy)
//! hashes the seed's 32-bit words into a pool of four words, mixes every pool word into
//! every other, then hashes the pool again to produce as many output words as asked for.
//! Every constant and the order of every operation matter: a single difference changes
//! every order FFCV users have recorded.

/// Words in the entropy pool (NumPy's `DEFAULT_POOL_SIZE`).
const POOL_SIZE: usize = 4;
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
/// Half the bits of a word.
const XSHIFT: u32 = 16;

/// A NumPy-compatible seed sequence with the default pool of four 32-bit words and no
/// spawn key (what `default_rng(int)` builds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedSequence {
    pool: [u32; POOL_SIZE],
}

/// The hash applied to each word on its way into the pool; `hash_const` evolves with
/// every call, which is why the calls must happen in NumPy's exact order.
fn hashmix(value: u32, hash_const: &mut u32) -> u32 {
    let mut value = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(MULT_A);
    value = value.wrapping_mul(*hash_const);
    value ^ (value >> XSHIFT)
}

fn mix(x: u32, y: u32) -> u32 {
    let result = MIX_MULT_L
        .wrapping_mul(x)
        .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    result ^ (result >> XSHIFT)
}

/// The 32-bit words of a non-negative integer, lowest first; zero is one zero word
/// (NumPy's `_int_to_uint32_array`).
pub fn int_to_words(mut n: u128) -> Vec<u32> {
    if n == 0 {
        return vec![0];
    }
    let mut words = Vec::with_capacity(4);
    while n > 0 {
        // Truncation is the point: take the lowest 32 bits.
        words.push(n as u32);
        n >>= 32;
    }
    words
}

impl SeedSequence {
    /// A seed sequence over explicit entropy words (NumPy: `SeedSequence(array of uint32)`).
    pub fn from_words(entropy: &[u32]) -> SeedSequence {
        let mut pool = [0u32; POOL_SIZE];
        let mut hash_const = INIT_A;
        for (i, slot) in pool.iter_mut().enumerate() {
            // A pool larger than the entropy keeps running the hash over zeros.
            let word = entropy.get(i).copied().unwrap_or(0);
            *slot = hashmix(word, &mut hash_const);
        }
        // Mix every word into every other so that late words affect early ones.
        for src in 0..POOL_SIZE {
            for dst in 0..POOL_SIZE {
                if src != dst {
                    let hashed = hashmix(pool[src], &mut hash_const);
                    pool[dst] = mix(pool[dst], hashed);
                }
            }
        }
        // Entropy beyond the pool size is folded into every pool word.
        for &word in entropy.iter().skip(POOL_SIZE) {
            for slot in pool.iter_mut() {
                let hashed = hashmix(word, &mut hash_const);
                *slot = mix(*slot, hashed);
            }
        }
        SeedSequence { pool }
    }

    /// The seed sequence of an integer seed, as `SeedSequence(n)` / `default_rng(n)`.
    pub fn from_int(n: u128) -> SeedSequence {
        SeedSequence::from_words(&int_to_words(n))
    }

    /// The mixed entropy pool (NumPy's `SeedSequence.pool`).
    pub fn pool(&self) -> [u32; POOL_SIZE] {
        self.pool
    }

    /// `generate_state(n_words, np.uint32)`.
    pub fn generate_state_u32(&self, n_words: usize) -> Vec<u32> {
        let mut hash_const = INIT_B;
        (0..n_words)
            .map(|i| {
                let mut value = self.pool[i % POOL_SIZE] ^ hash_const;
                hash_const = hash_const.wrapping_mul(MULT_B);
                value = value.wrapping_mul(hash_const);
                value ^ (value >> XSHIFT)
            })
            .collect()
    }

    /// `generate_state(n_words, np.uint64)`: twice as many 32-bit words, paired
    /// little-endian (the first word of each pair is the low half).
    pub fn generate_state_u64(&self, n_words: usize) -> Vec<u64> {
        self.generate_state_u32(2 * n_words)
            .chunks_exact(2)
            .map(|pair| u64::from(pair[0]) | (u64::from(pair[1]) << 32))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_seeds_split_into_words_lowest_first() {
        assert_eq!(int_to_words(0), vec![0]);
        assert_eq!(int_to_words(12345), vec![12345]);
        assert_eq!(int_to_words(0x10_dead_beef), vec![0xdead_beef, 0x10]);
        assert_eq!(int_to_words(u128::MAX), vec![u32::MAX; 4]);
    }

    #[test]
    fn seed_words_beyond_the_pool_still_change_the_state() {
        let short = SeedSequence::from_words(&[1, 2, 3, 4]);
        let long = SeedSequence::from_words(&[1, 2, 3, 4, 5]);
        assert_ne!(short.pool(), long.pool());
    }
}
