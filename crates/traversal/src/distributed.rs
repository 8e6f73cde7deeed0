//! Distributed mode: PyTorch's `DistributedSampler` (with `drop_last=False`), which FFCV
//! uses for its distributed Sequential and Random orders.
//!
//! The sampler lists positions `0..n` (shuffled by `torch.randperm` seeded with
//! `seed + epoch` when shuffling), pads the list to a multiple of the world size by
//! repeating it from its start, and gives rank `r` the positions `r, r + W, r + 2W, …`.
//! FFCV then maps those positions through its index list. Each rank therefore yields
//! `ceil(n / W)` samples, and `ceil(n / W) * W - n` samples appear twice in an epoch.

use crate::error::{Error, Result};
use crate::mt19937::randperm;

/// One rank of a distributed job: the world size and this process's rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Distributed {
    world_size: usize,
    rank: usize,
}

impl Distributed {
    /// Rank `rank` of `world_size` ranks; fails unless `rank < world_size`.
    pub fn new(world_size: usize, rank: usize) -> Result<Distributed> {
        if world_size == 0 {
            return Err(Error::ZeroWorldSize);
        }
        if rank >= world_size {
            return Err(Error::RankOutOfRange { rank, world_size });
        }
        Ok(Distributed { world_size, rank })
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Samples each rank yields per epoch for `n` samples: `ceil(n / world_size)`
    /// (`DistributedSampler.num_samples`).
    pub fn samples_per_rank(&self, n: usize) -> usize {
        n.div_ceil(self.world_size)
    }

    /// This rank's share of `order`: the order padded to a multiple of the world size
    /// by repeating it from its start, then every `world_size`-th element from `rank`.
    pub fn select<T: Copy>(&self, order: &[T]) -> Vec<T> {
        let n = order.len();
        if n == 0 {
            return Vec::new();
        }
        (0..self.samples_per_rank(n))
            // Position `p` of the padded list is `order[p % n]`: padding repeats the
            // list from its start, as many times as needed.
            .map(|k| order[(self.rank + k * self.world_size) % n])
            .collect()
    }

    /// The positions `DistributedSampler` yields on this rank for a dataset of `n`
    /// items: shuffled by `torch.randperm(n)` seeded with `shuffle_seed` (which FFCV
    /// sets to `seed + epoch`) when given, in order otherwise.
    pub fn sampler_positions(&self, n: usize, shuffle_seed: Option<u64>) -> Vec<u64> {
        match shuffle_seed {
            Some(seed) => self.select(&randperm(n, seed)),
            None => {
                let positions: Vec<u64> = (0..n as u64).collect();
                self.select(&positions)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_must_be_below_world_size() {
        assert_eq!(
            Distributed::new(4, 4),
            Err(Error::RankOutOfRange {
                rank: 4,
                world_size: 4
            })
        );
        assert_eq!(Distributed::new(0, 0), Err(Error::ZeroWorldSize));
        assert!(Distributed::new(4, 3).is_ok());
    }

    #[test]
    fn padding_repeats_from_the_start_even_past_the_list_length() {
        // 2 items, 5 ranks: padded list is [a, b, a, b, a].
        let items = ['a', 'b'];
        let shares: Vec<Vec<char>> = (0..5)
            .map(|rank| Distributed::new(5, rank).unwrap().select(&items))
            .collect();
        assert_eq!(
            shares,
            vec![vec!['a'], vec!['b'], vec!['a'], vec!['b'], vec!['a']]
        );
    }
}
