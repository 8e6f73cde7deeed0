//! `Random`: a fresh uniform permutation each epoch, bit-identical to FFCV's
//! `OrderOption.RANDOM` (NumPy for one process, PyTorch's sampler for distributed).

use crate::TraversalOrder;
use crate::distributed::Distributed;
use crate::mt19937::randperm;
use crate::pcg64::NumpyPcg64;

/// A uniform random permutation of the indices, different every epoch.
///
/// - One process: `numpy.random.default_rng(seed + epoch).permutation(indices)`, exactly.
/// - Distributed: FFCV's `indices[DistributedSampler(shuffle=True, seed)]`, i.e. the
///   positions of `torch.randperm(len(indices))` from a generator seeded with
///   `seed + epoch`, padded and strided as [`Distributed::select`] describes. Torch's
///   generator keeps only the low 32 bits of `seed + epoch`, so seeds that differ by a
///   multiple of 2^32 give the same distributed orders (as in PyTorch).
///
/// NumPy takes `seed + epoch` as an unbounded integer; so does this (no wrap-around,
/// even for `u64::MAX + u64::MAX`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Random {
    indices: Vec<u64>,
    seed: u64,
    distributed: Option<Distributed>,
}

impl Random {
    /// Over the given sample indices, with the order's seed (epoch `e` uses `seed + e`).
    pub fn new(indices: Vec<u64>, seed: u64) -> Random {
        Random {
            indices,
            seed,
            distributed: None,
        }
    }

    /// Over all samples `0..num_samples`.
    pub fn all(num_samples: u64, seed: u64) -> Random {
        Random::new((0..num_samples).collect(), seed)
    }

    /// This rank's share only, as FFCV's distributed mode.
    pub fn with_distributed(mut self, distributed: Distributed) -> Random {
        self.distributed = Some(distributed);
        self
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The indices traversed.
    pub fn indices(&self) -> &[u64] {
        &self.indices
    }
}

impl TraversalOrder for Random {
    fn order(&self, epoch: u64) -> Vec<u64> {
        match &self.distributed {
            None => {
                // Python adds without overflow; so does u128 for any u64 seed and epoch.
                let mut rng = NumpyPcg64::default_rng(u128::from(self.seed) + u128::from(epoch));
                let mut order = self.indices.clone();
                rng.shuffle(&mut order);
                order
            }
            Some(distributed) => {
                // torch keeps only the low 32 bits of the seed, which wrapping keeps too.
                let perm = randperm(self.indices.len(), self.seed.wrapping_add(epoch));
                distributed
                    .select(&perm)
                    .into_iter()
                    // Positions come from a permutation of 0..len, so they index `indices`.
                    .map(|position| self.indices[position as usize])
                    .collect()
            }
        }
    }

    fn samples_per_epoch(&self) -> usize {
        match &self.distributed {
            None => self.indices.len(),
            Some(distributed) => distributed.samples_per_rank(self.indices.len()),
        }
    }
}
