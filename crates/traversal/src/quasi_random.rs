//! `QuasiRandom`: FFCV's page-aware shuffle, which reads each page's samples close
//! together so that a process cache needs few page slots, made stateless and extended
//! to distributed mode.
//!
//! One epoch, as FFCV's `generate_order_inner`: the samples of each page are shuffled,
//! the pages are put in random order, and a buffer holds up to `buffer_pages` pages;
//! each next sample is the next unread sample of a page picked uniformly from the
//! buffer, a page leaves the buffer when it is exhausted and the next page in the page
//! order takes its place. At any moment at most `buffer_pages` pages are "open" (some
//! of their samples emitted, some not), which bounds the pages a cache must hold.
//!
//! Differences from FFCV, on purpose:
//! - The randomness comes from a PCG64 stream keyed by (seed, epoch) and, distributed,
//!   the rank, so an epoch's order depends only on (seed, epoch, indices, page map).
//!   FFCV reseeds numba's generators and shuffles its page table in place, so its
//!   orders depend on how many orders were computed before; they cannot be reproduced.
//! - A sample belongs to the first page holding its data ([`SamplePages`]); samples
//!   without any data (not written by FFCV's writer) form one extra group.
//! - Distributed mode (FFCV raises `NotImplementedError`): each epoch the pages are
//!   dealt out to the ranks so that the ranks' shares differ by at most one sample
//!   (`dealing.rs`): whole pages where they fit, a page cut at sample level where none
//!   does, so a cut page is read by two ranks (at most `world_size - 1` cuts an epoch).
//!   Each rank walks its share as above and pads to the common length
//!   `ceil(samples / world_size)` by repeating its last sample, so an epoch repeats
//!   fewer than `world_size` samples, as `DistributedSampler` pads. See
//!   [`QuasiRandom::with_distributed`].

use std::cmp::Reverse;
use std::collections::BTreeMap;

use crate::TraversalOrder;
use crate::dealing::{Piece, deal_balanced};
use crate::distributed::Distributed;
use crate::error::{Error, Result};
use crate::pcg64::NumpyPcg64;
use crate::sample_pages::SamplePages;
use crate::seed_sequence::SeedSequence;

/// Domain-separation words for the generator streams, so that the walk of one process,
/// the page dealing and each rank's walk never share a stream.
const STREAM_WALK: u32 = 0x5157_414c; // "QWAL"
const STREAM_DEAL: u32 = 0x5144_4541; // "QDEA"
const STREAM_RANK: u32 = 0x5152_4e4b; // "QRNK"

/// FFCV's buffer size for a batch size: `2 * batch_size` pages.
pub const fn default_buffer_pages(batch_size: usize) -> usize {
    batch_size.saturating_mul(2)
}

/// The page-aware random order (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuasiRandom {
    /// The indices grouped by page (ascending page id, pageless group last); inside a
    /// group in index-list order.
    samples: Vec<u64>,
    /// `samples[starts[g]..starts[g + 1]]` is group `g`; never an empty group.
    starts: Vec<usize>,
    seed: u64,
    buffer_pages: usize,
    distributed: Option<DistributedShare>,
}

/// The distributed configuration and the per-rank length it implies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DistributedShare {
    distributed: Distributed,
    samples_per_rank: usize,
}

fn stream(words: &[u32]) -> NumpyPcg64 {
    NumpyPcg64::from_seed_sequence(&SeedSequence::from_words(words))
}

fn split(value: u64) -> [u32; 2] {
    // Truncation is the point: the low and the high word.
    [value as u32, (value >> 32) as u32]
}

impl QuasiRandom {
    /// Over `indices`, grouped by the page `pages` gives each, with a buffer of
    /// `buffer_pages` pages (FFCV: [`default_buffer_pages`]).
    ///
    /// Fails when no sample of the dataset has data in a page (FFCV: "won't benefit
    /// from QuasiRandom order"), when an index is not a sample of `pages`, or when the
    /// buffer is empty.
    pub fn new(
        indices: &[u64],
        pages: &SamplePages,
        seed: u64,
        buffer_pages: usize,
    ) -> Result<QuasiRandom> {
        if buffer_pages == 0 {
            return Err(Error::ZeroBufferPages);
        }
        if !pages.has_data_pages() {
            return Err(Error::NoDataPages);
        }
        // Key (false, page) for a real page, (true, 0) for samples without data, so the
        // pageless group sorts last.
        let mut groups: BTreeMap<(bool, u64), Vec<u64>> = BTreeMap::new();
        for (position, &index) in indices.iter().enumerate() {
            if index >= pages.num_samples() {
                return Err(Error::IndexOutOfRange {
                    index,
                    position,
                    num_samples: pages.num_samples(),
                });
            }
            let key = match pages.page_of(index) {
                Some(page) => (false, page),
                None => (true, 0),
            };
            groups.entry(key).or_default().push(index);
        }
        let mut samples = Vec::with_capacity(indices.len());
        let mut starts = Vec::with_capacity(groups.len() + 1);
        starts.push(0);
        for group in groups.into_values() {
            samples.extend_from_slice(&group);
            starts.push(samples.len());
        }
        Ok(QuasiRandom {
            samples,
            starts,
            seed,
            buffer_pages,
            distributed: None,
        })
    }

    /// Only this rank's share (FFCV refuses QuasiRandom in distributed mode; we don't).
    ///
    /// Each epoch the page groups are shuffled by (seed, epoch), stably sorted by
    /// decreasing sample count and dealt to `world_size` bins that hold
    /// `samples / world_size` samples each, one more for the first
    /// `samples % world_size` bins: a group goes whole to the bin with the least room
    /// that holds it, and a group that fits no bin is cut, the bin with the most room
    /// taking what it holds (at most `world_size - 1` cuts; the samples of a cut group
    /// are shuffled by (seed, epoch) first). The bins are then given to the ranks in an
    /// order shuffled by (seed, epoch). Ranks thus hold disjoint samples, and disjoint
    /// pages apart from the cut ones, different ones each epoch.
    ///
    /// Every rank yields `ceil(samples / world_size)` samples: a rank one short repeats
    /// the last sample of its walk (its page is still open), and a rank without samples
    /// (fewer samples than ranks) repeats one of another rank. So an epoch holds every
    /// index once plus fewer than `world_size` repeats, as `DistributedSampler`.
    pub fn with_distributed(mut self, distributed: Distributed) -> QuasiRandom {
        let samples_per_rank = self.samples.len().div_ceil(distributed.world_size());
        self.distributed = Some(DistributedShare {
            distributed,
            samples_per_rank,
        });
        self
    }

    /// The buffer size in pages.
    pub fn buffer_pages(&self) -> usize {
        self.buffer_pages
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The number of page groups among the indices.
    pub fn num_groups(&self) -> usize {
        self.starts.len() - 1
    }

    fn group_len(&self, group: usize) -> usize {
        self.starts[group + 1] - self.starts[group]
    }

    fn group(&self, group: usize) -> &[u64] {
        &self.samples[self.starts[group]..self.starts[group + 1]]
    }

    /// The buffered walk over the given pages (see the module docs); each slice is one
    /// page, or the part of a cut page dealt to this rank.
    fn walk(&self, pages: &[&[u64]], rng: &mut NumpyPcg64) -> Vec<u64> {
        // Each page's samples, shuffled, laid end to end.
        let mut local = Vec::with_capacity(pages.iter().map(|p| p.len()).sum());
        let mut ranges = Vec::with_capacity(pages.len());
        for page in pages {
            let start = local.len();
            local.extend_from_slice(page);
            rng.shuffle(&mut local[start..]);
            ranges.push((start, local.len()));
        }
        let page_order = rng.permutation(ranges.len());
        let mut cursor: Vec<usize> = ranges.iter().map(|&(start, _)| start).collect();
        let mut buffer: Vec<usize> = Vec::with_capacity(self.buffer_pages.min(ranges.len()));
        let mut next_page = 0;
        let mut order = Vec::with_capacity(local.len());
        while order.len() < local.len() {
            while next_page < page_order.len() && buffer.len() < self.buffer_pages {
                // A permutation of 0..ranges.len(), so a valid page position.
                let page = page_order[next_page] as usize;
                if ranges[page].0 < ranges[page].1 {
                    buffer.push(page);
                }
                next_page += 1;
            }
            // Unread samples remain, and every page holding some is in the buffer or
            // still to be added, so the buffer is not empty here.
            let Some(last) = buffer.len().checked_sub(1) else {
                break;
            };
            let slot = rng.random_interval(last as u64) as usize;
            let page = buffer[slot];
            order.push(local[cursor[page]]);
            cursor[page] += 1;
            if cursor[page] == ranges[page].1 {
                buffer.swap_remove(slot);
            }
        }
        order
    }
}

/// One epoch's dealing of the page groups to the ranks (the same on every rank: it
/// depends on (seed, epoch) only).
struct EpochDeal {
    /// Each bin's pieces of groups, in dealing order.
    bins: Vec<Vec<Piece>>,
    /// The bin of each rank.
    bin_of_rank: Vec<u64>,
    /// The samples of each cut group, shuffled (its pieces index into these); the
    /// pieces of a whole group index into the group.
    cut: BTreeMap<usize, Vec<u64>>,
}

impl QuasiRandom {
    /// The epoch's dealing of page groups to `world_size` ranks.
    fn deal_epoch(&self, epoch: u64, world_size: usize) -> EpochDeal {
        let [seed_lo, seed_hi] = split(self.seed);
        let [epoch_lo, epoch_hi] = split(epoch);
        let mut dealer = stream(&[STREAM_DEAL, seed_lo, seed_hi, epoch_lo, epoch_hi]);
        let mut groups: Vec<usize> = dealer
            .permutation(self.num_groups())
            .into_iter()
            .map(|g| g as usize)
            .collect();
        let sizes: Vec<usize> = (0..self.num_groups()).map(|g| self.group_len(g)).collect();
        // Stable: equal groups keep their shuffled order.
        groups.sort_by_key(|&g| Reverse(sizes[g]));
        let bins = deal_balanced(&sizes, &groups, world_size);
        let bin_of_rank = dealer.permutation(world_size);
        // A cut group would otherwise split by index-list position, the same samples
        // going together every epoch.
        let mut cut = BTreeMap::new();
        for piece in bins.iter().flatten() {
            if piece.len() < sizes[piece.group] {
                cut.entry(piece.group)
                    .or_insert_with(|| self.group(piece.group).to_vec());
            }
        }
        for samples in cut.values_mut() {
            dealer.shuffle(samples);
        }
        EpochDeal {
            bins,
            bin_of_rank,
            cut,
        }
    }

    /// The samples of one dealt piece.
    fn piece<'a>(&'a self, deal: &'a EpochDeal, piece: &Piece) -> &'a [u64] {
        let samples = deal
            .cut
            .get(&piece.group)
            .map_or_else(|| self.group(piece.group), Vec::as_slice);
        &samples[piece.start..piece.end]
    }

    /// Rank `rank`'s walk over its own pieces, before any padding.
    fn rank_walk(&self, epoch: u64, rank: usize, deal: &EpochDeal) -> Vec<u64> {
        let [seed_lo, seed_hi] = split(self.seed);
        let [epoch_lo, epoch_hi] = split(epoch);
        let my_bin = deal.bin_of_rank[rank] as usize;
        let [rank_lo, rank_hi] = split(rank as u64);
        let mut rng = stream(&[
            STREAM_RANK,
            seed_lo,
            seed_hi,
            epoch_lo,
            epoch_hi,
            rank_lo,
            rank_hi,
        ]);
        let pieces: Vec<&[u64]> = deal.bins[my_bin]
            .iter()
            .map(|piece| self.piece(deal, piece))
            .collect();
        self.walk(&pieces, &mut rng)
    }

    /// The walk of every rank of the configured world in `epoch`, before padding (one
    /// walk, the whole order, without distributed mode). What an elastic resume needs to
    /// know which samples each old rank held.
    pub(crate) fn own_walks(&self, epoch: u64) -> Vec<Vec<u64>> {
        let Some(share) = self.distributed else {
            return vec![self.order(epoch)];
        };
        let world_size = share.distributed.world_size();
        let deal = self.deal_epoch(epoch, world_size);
        (0..world_size)
            .map(|rank| self.rank_walk(epoch, rank, &deal))
            .collect()
    }
}

/// Pads `own` to `target` entries: by repeating its last samples (their pages are open at
/// the end of the order), or, when `own` is empty, with entry `bin % len` onwards of
/// `others` (every sample dealt, so that the bins without samples repeat different ones).
pub(crate) fn pad(own: &mut Vec<u64>, target: usize, bin: usize, others: impl Fn() -> Vec<u64>) {
    let missing = target.saturating_sub(own.len());
    if missing == 0 {
        return;
    }
    if own.is_empty() {
        let others = others();
        if others.is_empty() {
            return;
        }
        let from = bin % others.len();
        own.extend(others.iter().cycle().skip(from).take(missing));
    } else {
        let source: Vec<u64> = own.iter().rev().take(missing).rev().copied().collect();
        own.extend(source.iter().cycle().take(missing));
    }
}

impl TraversalOrder for QuasiRandom {
    fn order(&self, epoch: u64) -> Vec<u64> {
        let Some(share) = self.distributed else {
            let [seed_lo, seed_hi] = split(self.seed);
            let [epoch_lo, epoch_hi] = split(epoch);
            let mut rng = stream(&[STREAM_WALK, seed_lo, seed_hi, epoch_lo, epoch_hi]);
            let all: Vec<&[u64]> = (0..self.num_groups()).map(|g| self.group(g)).collect();
            return self.walk(&all, &mut rng);
        };
        let world_size = share.distributed.world_size();
        let rank = share.distributed.rank();
        let deal = self.deal_epoch(epoch, world_size);
        let mut order = self.rank_walk(epoch, rank, &deal);
        let target = share.samples_per_rank;
        if order.len() < target {
            tracing::debug!(
                rank,
                epoch,
                own = order.len(),
                target,
                "QuasiRandom distributed: padding this rank's order"
            );
            let bin = deal.bin_of_rank[rank] as usize;
            pad(&mut order, target, bin, || {
                deal.bins
                    .iter()
                    .flatten()
                    .flat_map(|piece| self.piece(&deal, piece).iter().copied())
                    .collect()
            });
        }
        order
    }

    fn samples_per_epoch(&self) -> usize {
        match self.distributed {
            None => self.samples.len(),
            Some(share) => share.samples_per_rank,
        }
    }
}
