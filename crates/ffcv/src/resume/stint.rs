//! What the resume plan and the iterators pass each other about an epoch's stints: the
//! stints so far ([`StintRecord`]) and where an epoch starts ([`EpochStart`]).

/// One stint of an epoch as an iterator knows it: world size and batches consumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StintRecord {
    pub(super) world_size: usize,
    pub(super) batches: u64,
}

/// How an epoch starts: the ordinary order from its first batch, or a resumed position.
#[derive(Debug, Default)]
pub(crate) struct EpochStart {
    /// This rank's order for the stint; `None`: the loader's own order of the epoch.
    pub(crate) order: Option<Vec<u64>>,
    /// Batches of the stint this rank consumed before the iterator starts.
    pub(crate) skip: usize,
    /// The epoch's stints before the current one.
    pub(crate) earlier: Vec<StintRecord>,
}

/// Batches of a rank's order of `samples` samples.
pub(super) fn batches_of(samples: usize, batch_size: usize, drop_last: bool) -> usize {
    if drop_last {
        samples / batch_size
    } else {
        samples.div_ceil(batch_size)
    }
}
