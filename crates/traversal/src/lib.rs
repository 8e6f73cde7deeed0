//! Sample orders for FFCV-style loaders: which samples an epoch visits, in which order,
//! on which rank — bit-compatible with FFCV 1.0.2, NumPy and PyTorch.
//!
//! This crate is pure computation over index lists and a page map given as plain data;
//! it does no I/O and depends on no other crate of the workspace.
//!
//! # Overview
//!
//! Every order implements [`TraversalOrder`]: `order(epoch)` returns the sample ids of
//! that epoch. Users may implement it for their own orders (it is `Send + Sync`).
//!
//! - [`Sequential`]: the indices as given (FFCV `OrderOption.SEQUENTIAL`).
//! - [`Random`]: `numpy.random.default_rng(seed + epoch).permutation(indices)`, bit for
//!   bit (FFCV `OrderOption.RANDOM`). The NumPy machinery is public: [`SeedSequence`],
//!   [`NumpyPcg64`] (PCG64 through `rand_pcg`, NumPy's buffered 32-bit draws, masked
//!   rejection and `shuffle`).
//! - [`QuasiRandom`]: FFCV's page-aware shuffle (`OrderOption.QUASI_RANDOM`): pages in
//!   random order, samples shuffled within each page, each next sample drawn from a
//!   buffer of pages, so a page cache needs few slots. Unlike FFCV it is stateless
//!   (an epoch's order depends only on seed, epoch, indices and [`SamplePages`]), and
//!   it supports distributed mode. [`shuffle_quality`] measures what a buffer size buys.
//! - [`Distributed`]: PyTorch's `DistributedSampler` (`drop_last=False`) as FFCV uses
//!   it: Sequential and Random take `with_distributed`, which pads the order to a
//!   multiple of the world size from its start and keeps every `world_size`-th sample;
//!   distributed Random permutes with `torch.randperm` ([`randperm`], MT19937 as ATen).
//! - [`ElasticEpoch`], [`Pool`] and [`Stint`] resume an epoch part-way, with the same or
//!   another number of ranks: the samples no rank consumed, split among the new ranks.
//! - [`OrderKind`] and [`OrderSpec`] pick and build a built-in order from its name and
//!   knobs (what a command line or a loader builder needs).
//!
//! # Example
//!
//! ```
//! use traversal::{Distributed, QuasiRandom, Random, SamplePages, TraversalOrder};
//!
//! // FFCV's RANDOM order for 10 samples, seed 0, epoch 0: NumPy's
//! // `default_rng(0).permutation(10)`.
//! let random = Random::all(10, 0);
//! assert_eq!(random.order(0), vec![4, 6, 2, 7, 3, 5, 9, 0, 8, 1]);
//!
//! // Rank 1 of 4 in distributed mode gets ceil(10 / 4) = 3 samples per epoch.
//! let rank1 = Random::all(10, 0).with_distributed(Distributed::new(4, 1)?);
//! assert_eq!(rank1.order(0).len(), 3);
//!
//! // QuasiRandom over 12 samples, 3 per page, with a buffer of 2 pages.
//! let pages = SamplePages::from_fn(12, |sample| Some(sample / 3));
//! let indices: Vec<u64> = (0..12).collect();
//! let quasi = QuasiRandom::new(&indices, &pages, 7, 2)?;
//! let mut order = quasi.order(0);
//! assert_eq!(order, quasi.order(0)); // the same (seed, epoch) gives the same order
//! order.sort_unstable();
//! assert_eq!(order, indices); // a permutation of the indices
//! # Ok::<(), traversal::Error>(())
//! ```

mod dealing;
mod distributed;
mod elastic;
mod error;
mod mt19937;
mod pcg64;
mod quality;
mod quasi_random;
mod random;
mod sample_pages;
mod seed_sequence;
mod sequential;
mod spec;

pub use distributed::Distributed;
pub use elastic::{ElasticEpoch, Pool, RankShare, Stint};
pub use error::{Error, Result};
pub use mt19937::{RANDPERM_SMALL_LIMIT, TorchMt19937, randperm};
pub use pcg64::NumpyPcg64;
pub use quality::{ShuffleQuality, shuffle_quality};
pub use quasi_random::{QuasiRandom, default_buffer_pages};
pub use random::Random;
pub use sample_pages::SamplePages;
pub use seed_sequence::{SeedSequence, int_to_words};
pub use sequential::Sequential;
pub use spec::{OrderKind, OrderSpec, UnknownOrderKind};

/// An order over a fixed list of sample indices: the sample ids to visit in `epoch`.
///
/// Implementations must be deterministic in `epoch` (the loader may ask twice) and
/// cheap enough to call once per epoch.
pub trait TraversalOrder: Send + Sync {
    /// The sample ids of `epoch`, in order.
    fn order(&self, epoch: u64) -> Vec<u64>;

    /// How many samples an epoch yields (the loader's length before batching). The
    /// default computes epoch 0's order; the built-in orders answer directly.
    fn samples_per_epoch(&self) -> usize {
        self.order(0).len()
    }

    /// What identifies this order's choices beyond the file, the seed and the batching,
    /// for resume: a loader refuses a state saved under another identity instead of
    /// resuming a different order. `None` (the default) records nothing, and then the
    /// user answers for resuming with the same order.
    fn identity(&self) -> Option<String> {
        None
    }

    /// The ranks of an order that deals each epoch as [`Distributed::select`] does: rank
    /// `r` of `W` takes positions `r, r + W, …` of one global order ([`strided_order`]),
    /// padded from its start. A loader can then resume such an order's epoch with another
    /// number of ranks: a new stint splits the positions no rank consumed, as for the
    /// built-in orders ([`Pool`]). `None` (the default): the order splits its epochs its
    /// own way, and an epoch resumes only with the world that saved it.
    ///
    /// [`strided_order`]: TraversalOrder::strided_order
    fn strided_world(&self) -> Option<Distributed> {
        None
    }

    /// The global order of `epoch` that [`strided_world`]'s ranks take strided positions
    /// of (`None` when `strided_world` is `None`).
    ///
    /// [`strided_world`]: TraversalOrder::strided_world
    fn strided_order(&self, _epoch: u64) -> Option<Vec<u64>> {
        None
    }
}

impl<T: TraversalOrder + ?Sized> TraversalOrder for Box<T> {
    fn order(&self, epoch: u64) -> Vec<u64> {
        (**self).order(epoch)
    }

    fn samples_per_epoch(&self) -> usize {
        (**self).samples_per_epoch()
    }

    fn identity(&self) -> Option<String> {
        (**self).identity()
    }

    fn strided_world(&self) -> Option<Distributed> {
        (**self).strided_world()
    }

    fn strided_order(&self, epoch: u64) -> Option<Vec<u64>> {
        (**self).strided_order(epoch)
    }
}

impl<T: TraversalOrder + ?Sized> TraversalOrder for std::sync::Arc<T> {
    fn order(&self, epoch: u64) -> Vec<u64> {
        (**self).order(epoch)
    }

    fn samples_per_epoch(&self) -> usize {
        (**self).samples_per_epoch()
    }

    fn identity(&self) -> Option<String> {
        (**self).identity()
    }

    fn strided_world(&self) -> Option<Distributed> {
        (**self).strided_world()
    }

    fn strided_order(&self, epoch: u64) -> Option<Vec<u64>> {
        (**self).strided_order(epoch)
    }
}
