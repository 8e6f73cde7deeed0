//! Resuming an epoch part-way, with the same or another number of ranks: which samples
//! of the epoch are left after the ranks consumed some, and how they are split among the
//! new ranks. Pure computation, as the rest of the crate.
//!
//! # The model
//!
//! An epoch runs in one or more *stints*. A stint is a span of the epoch run by a fixed
//! number of ranks in lockstep: every rank of it consumed the same number of samples of
//! its own order (`consumed`, which the loader derives from the batches each rank's
//! consumer received). The first stint's rank orders are the ordinary distributed orders
//! of the epoch ([`OrderSpec`]); each later stint splits the *pool*, the samples no rank
//! of an earlier stint consumed, among its ranks:
//!
//! - **Sequential and Random** (the [`Distributed`] rule): the epoch has a global order
//!   `G` (the index list, its NumPy permutation, or its `torch.randperm` positions), and
//!   rank `r` of `W` takes `G[r], G[r + W], …` padded from the start. After each rank
//!   consumed `c` samples, exactly the positions `G[0 .. c·W]` are consumed, so the pool is
//!   the rest of `G`, still in the epoch's random order. A later stint splits the pool
//!   the same strided way.
//! - **QuasiRandom** (pages): the pool is every rank's unconsumed tail of its own walk.
//!   A later stint groups the pool by page (pages in order of first appearance, samples in
//!   the walk's order) and deals the pages, largest first, so that the new ranks' shares
//!   differ by at most one sample (`dealing.rs`: whole pages where they fit, a page cut
//!   at sample level where none does, at most `world_size - 1` cuts); each rank reads its
//!   pages one after the other, in pool order. A page that an old rank had open goes to
//!   one new rank, or to two when it is cut: page locality is kept (one open page per
//!   rank), at the price of less shuffling across pages in the tail.
//!
//! Every rank of a stint yields `ceil(pool / world_size)` samples (for the first stint,
//! the distributed order's length); a rank one short repeats its last sample (QuasiRandom)
//! or pads from the pool's start (Sequential and Random, as PyTorch's
//! `DistributedSampler` pads), and a rank without samples repeats one of the pool. So
//! a stint repeats fewer than `world_size` samples. Apart from those padding entries, the
//! samples consumed in all stints are the epoch's samples, each exactly once.

use std::collections::HashMap;

use crate::dealing::deal_balanced;
use crate::distributed::Distributed;
use crate::error::{Error, Result};
use crate::mt19937::randperm;
use crate::quasi_random::{QuasiRandom, pad};
use crate::random::Random;
use crate::sample_pages::SamplePages;
use crate::spec::{OrderKind, OrderSpec};

/// One completed (or interrupted) stint of an epoch: its number of ranks and the
/// samples each of them consumed of its own order (the same on every rank: lockstep).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stint {
    /// The ranks of the stint.
    pub world_size: usize,
    /// Samples each rank consumed (padding entries included); more than a rank's share
    /// means all of it.
    pub consumed: usize,
}

/// One rank's share of a stint: the samples it yields, of which the first `own` are its
/// own and the rest repeat them (padding, so that every rank yields as many).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankShare {
    /// The rank's order for the stint, padding included.
    pub order: Vec<u64>,
    /// How many entries of `order` are not padding.
    pub own: usize,
}

/// The samples of an epoch left after some stints, and the rule that splits them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    samples: Vec<u64>,
    pages: bool,
}

/// An epoch of a built-in order as its first stint ran it: the order's knobs (with the
/// first stint's distributed configuration, any rank), the index list, the page map
/// (QuasiRandom only) and the epoch.
#[derive(Clone, Copy, Debug)]
pub struct ElasticEpoch<'a> {
    /// The order's knobs; `distributed` is the first stint's (`None`: one process).
    pub spec: &'a OrderSpec,
    /// The index list the order runs over.
    pub indices: &'a [u64],
    /// The page map (needed for QuasiRandom).
    pub pages: Option<&'a SamplePages>,
    /// The epoch.
    pub epoch: u64,
}

impl ElasticEpoch<'_> {
    /// The first stint's world size (1 without distributed mode).
    pub fn first_world_size(&self) -> usize {
        self.spec.distributed.map_or(1, |d| d.world_size())
    }

    /// Rank `rank`'s share of the first stint: its ordinary order in this epoch (what
    /// [`OrderSpec::build`] gives for that rank) and how much of it is its own.
    pub fn first_share(&self, rank: usize) -> Result<RankShare> {
        let world_size = self.first_world_size();
        let d = Distributed::new(world_size, rank)?;
        let spec = OrderSpec {
            distributed: self.spec.distributed.map(|_| d),
            ..*self.spec
        };
        let order = spec
            .build(self.indices.to_vec(), self.pages)?
            .order(self.epoch);
        let own = match self.spec.kind {
            OrderKind::QuasiRandom => self.quasi_random()?.own_walks(self.epoch)[rank].len(),
            OrderKind::Sequential | OrderKind::Random => {
                self.indices.len().saturating_sub(rank).div_ceil(world_size)
            }
        };
        Ok(RankShare { order, own })
    }

    /// The pool after the given stints, the first of which ran the ordinary orders
    /// (`stints` may be empty: then the pool is the whole epoch, split as a later stint).
    pub fn pool_after(&self, stints: &[Stint]) -> Result<Pool> {
        let Some((first, later)) = stints.split_first() else {
            return Ok(Pool {
                samples: self.global_order()?,
                pages: self.spec.kind == OrderKind::QuasiRandom,
            });
        };
        if first.world_size != self.first_world_size() {
            return Err(Error::StintMismatch {
                stint: 0,
                world_size: first.world_size,
                expected: self.first_world_size(),
            });
        }
        let mut pool = match self.spec.kind {
            OrderKind::Sequential | OrderKind::Random => {
                let global = self.global_order()?;
                let consumed = first.consumed.saturating_mul(first.world_size);
                Pool {
                    samples: global.get(consumed..).unwrap_or_default().to_vec(),
                    pages: false,
                }
            }
            OrderKind::QuasiRandom => {
                let walks = self.quasi_random()?.own_walks(self.epoch);
                let samples = walks
                    .iter()
                    .flat_map(|walk| walk.get(first.consumed..).unwrap_or_default())
                    .copied()
                    .collect();
                Pool {
                    samples,
                    pages: true,
                }
            }
        };
        for stint in later {
            pool = pool.after(stint.world_size, stint.consumed, self.pages)?;
        }
        Ok(pool)
    }

    /// The epoch's global order: `G` for Sequential and Random, the walk of one process
    /// for QuasiRandom.
    fn global_order(&self) -> Result<Vec<u64>> {
        let indices = self.indices;
        Ok(match (self.spec.kind, self.spec.distributed) {
            (OrderKind::Sequential, _) => indices.to_vec(),
            (OrderKind::Random, None) => crate::TraversalOrder::order(
                &Random::new(indices.to_vec(), self.spec.seed),
                self.epoch,
            ),
            (OrderKind::Random, Some(_)) => {
                randperm(indices.len(), self.spec.seed.wrapping_add(self.epoch))
                    .into_iter()
                    // A permutation of 0..len, so every position indexes `indices`.
                    .map(|position| indices[position as usize])
                    .collect()
            }
            (OrderKind::QuasiRandom, _) => self
                .quasi_random()?
                .own_walks(self.epoch)
                .into_iter()
                .flatten()
                .collect(),
        })
    }

    fn quasi_random(&self) -> Result<QuasiRandom> {
        let pages = self.pages.ok_or(Error::MissingPageMap)?;
        let order = QuasiRandom::new(self.indices, pages, self.spec.seed, self.spec.buffer_pages)?;
        Ok(match self.spec.distributed {
            Some(d) => order.with_distributed(d),
            None => order,
        })
    }
}

impl Pool {
    /// A pool of the given samples, split strided (`pages: false`) or by page.
    pub fn new(samples: Vec<u64>, pages: bool) -> Pool {
        Pool { samples, pages }
    }

    /// The samples left, in pool order.
    pub fn samples(&self) -> &[u64] {
        &self.samples
    }

    /// Samples each of `world_size` ranks yields when this pool is split among them.
    pub fn samples_per_rank(
        &self,
        world_size: usize,
        pages: Option<&SamplePages>,
    ) -> Result<usize> {
        Ok(self.split_all(world_size, pages)?.1)
    }

    /// Rank `rank`'s share when the pool is split among `world_size` ranks.
    pub fn share(
        &self,
        world_size: usize,
        rank: usize,
        pages: Option<&SamplePages>,
    ) -> Result<RankShare> {
        let d = Distributed::new(world_size, rank)?;
        if !self.pages {
            let order = d.select(&self.samples);
            let own = (self.samples.len().saturating_sub(rank)).div_ceil(world_size);
            return Ok(RankShare { order, own });
        }
        let (mut shares, target) = self.split_all(world_size, pages)?;
        let mut own = std::mem::take(&mut shares[rank]);
        let own_len = own.len();
        // A rank without samples repeats one of the pool, as QuasiRandom's distributed
        // mode; the split is by rank here, so the rank is the bin.
        pad(&mut own, target, rank, || shares.concat());
        Ok(RankShare {
            order: own,
            own: own_len,
        })
    }

    /// Every rank's own samples (before padding) and the common length.
    fn split_all(
        &self,
        world_size: usize,
        pages: Option<&SamplePages>,
    ) -> Result<(Vec<Vec<u64>>, usize)> {
        if world_size == 0 {
            return Err(Error::ZeroWorldSize);
        }
        if !self.pages {
            let per_rank = self.samples.len().div_ceil(world_size);
            let shares = (0..world_size)
                .map(|r| {
                    self.samples
                        .iter()
                        .skip(r)
                        .step_by(world_size)
                        .copied()
                        .collect()
                })
                .collect();
            return Ok((shares, per_rank));
        }
        let pages = pages.ok_or(Error::MissingPageMap)?;
        // Groups by page, in order of first appearance; the pageless group is one more.
        let mut group_of: HashMap<Option<u64>, usize> = HashMap::new();
        let mut groups: Vec<Vec<u64>> = Vec::new();
        for &sample in &self.samples {
            let g = *group_of.entry(pages.page_of(sample)).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[g].push(sample);
        }
        let sizes: Vec<usize> = groups.iter().map(Vec::len).collect();
        let mut by_size: Vec<usize> = (0..groups.len()).collect();
        // Stable: equal pages keep their order of appearance.
        by_size.sort_by_key(|&g| std::cmp::Reverse(sizes[g]));
        let target = self.samples.len().div_ceil(world_size);
        let shares = deal_balanced(&sizes, &by_size, world_size)
            .into_iter()
            .map(|mut bin| {
                // Each rank reads its pages in the pool's order.
                bin.sort_unstable();
                bin.iter()
                    .flat_map(|piece| groups[piece.group][piece.start..piece.end].iter().copied())
                    .collect()
            })
            .collect();
        Ok((shares, target))
    }

    /// The pool after `world_size` ranks split this one and each consumed `consumed`
    /// samples of its share.
    pub fn after(
        &self,
        world_size: usize,
        consumed: usize,
        pages: Option<&SamplePages>,
    ) -> Result<Pool> {
        if !self.pages {
            if world_size == 0 {
                return Err(Error::ZeroWorldSize);
            }
            let done = consumed.saturating_mul(world_size);
            return Ok(Pool {
                samples: self.samples.get(done..).unwrap_or_default().to_vec(),
                pages: false,
            });
        }
        let (shares, _) = self.split_all(world_size, pages)?;
        let samples = shares
            .iter()
            .flat_map(|share| share.get(consumed..).unwrap_or_default())
            .copied()
            .collect();
        Ok(Pool {
            samples,
            pages: true,
        })
    }
}
