//! The traversal error type: invalid configurations, named with the value at fault.

/// Everything that can be wrong with an order's configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A distributed order needs at least one rank.
    #[error("world size must be at least 1")]
    ZeroWorldSize,
    /// The rank is not one of `0..world_size`.
    #[error("rank {rank} is out of range for world size {world_size} (ranks are 0..{world_size})")]
    RankOutOfRange {
        /// The rank asked for.
        rank: usize,
        /// The number of ranks.
        world_size: usize,
    },
    /// QuasiRandom over a dataset whose samples have no data in any page (FFCV's
    /// `ValueError` for the same case).
    #[error(
        "dataset won't benefit from QuasiRandom order: no sample has data in a page \
         (only scalar fields?); use Random"
    )]
    NoDataPages,
    /// An index of the index list names no sample of the dataset.
    #[error(
        "sample index {index} at position {position} of the index list is out of range: \
         the dataset has {num_samples} samples"
    )]
    IndexOutOfRange {
        /// The offending sample id.
        index: u64,
        /// Where it sits in the index list (or the order being measured).
        position: usize,
        /// The number of samples the page map covers.
        num_samples: u64,
    },
    /// QuasiRandom's buffer must hold at least one page.
    #[error("QuasiRandom needs a buffer of at least one page (got 0)")]
    ZeroBufferPages,
    /// QuasiRandom was asked for without the dataset's page map.
    #[error("QuasiRandom needs the dataset's page map (which page holds each sample)")]
    MissingPageMap,
    /// Batches of zero samples cannot be measured.
    #[error("batch size must be at least 1")]
    ZeroBatchSize,
    /// The label column given to the shuffle-quality measure is shorter than a sample id.
    #[error("the label column has {labels} entries, but sample {sample} is in the order")]
    MissingLabel {
        /// The sample without a label.
        sample: u64,
        /// The length of the label column.
        labels: usize,
    },
    /// A resumed epoch's stint does not fit the order it resumes.
    #[error(
        "stint {stint} of the resumed epoch ran {world_size} ranks, but the order it \
         resumes ran {expected}"
    )]
    StintMismatch {
        /// The stint's position in the epoch (0 = the first).
        stint: usize,
        /// The stint's world size.
        world_size: usize,
        /// The world size the order implies.
        expected: usize,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
