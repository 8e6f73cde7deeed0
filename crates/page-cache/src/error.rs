//! The crate's error type: every variant names the file and the page, pointer or
//! batch it concerns.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// What can go wrong while scheduling or reading pages.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The `.beton` reader reported an error.
    #[error(transparent)]
    Beton(#[from] beton_io::Error),

    /// A batch names a sample the file does not have.
    #[error("{path}: batch {batch} names sample {sample}, but the file has {num_samples} samples")]
    SampleOutOfRange {
        /// The dataset file.
        path: PathBuf,
        /// Batch index in the epoch.
        batch: usize,
        /// The offending sample id.
        sample: u64,
        /// Samples in the file.
        num_samples: u64,
    },

    /// The epoch's page schedule needs more slot memory than the budget allows.
    #[error(
        "{path}: this epoch's page schedule needs {needed} bytes of page slots \
         ({num_slots} slots of {page_size} bytes) but the memory budget is {budget} bytes; \
         use the QuasiRandom order (its schedules need few slots), raise max_memory, \
         or use the OS cache (os_cache = true)"
    )]
    MemoryBudget {
        /// The dataset file.
        path: PathBuf,
        /// Bytes the schedule needs.
        needed: u64,
        /// The budget (`max_memory`, or the OS's available memory).
        budget: u64,
        /// Slots the schedule needs.
        num_slots: usize,
        /// Bytes per slot (the file's page size).
        page_size: u64,
    },

    /// Reading a page from storage failed in a page-reader thread.
    #[error("{path}: reading page {page} ({len} bytes at offset {offset}) failed: {source}")]
    PageRead {
        /// The dataset file.
        path: PathBuf,
        /// Page index.
        page: u64,
        /// File offset of the page.
        offset: u64,
        /// Bytes the page should hold.
        len: u64,
        /// The I/O error.
        source: Arc<io::Error>,
    },

    /// A page-reader thread ended abnormally while the consumer waited for a page.
    #[error("{path}: the page-reader threads stopped while page {page} was awaited")]
    ReadersGone {
        /// The dataset file.
        path: PathBuf,
        /// The page that was awaited.
        page: u64,
    },

    /// An earlier batch of this epoch failed; the epoch cannot continue.
    #[error("{path}: batch {batch} cannot start: the epoch stopped at an earlier error ({cause})")]
    EpochAborted {
        /// The dataset file.
        path: PathBuf,
        /// The batch that was requested.
        batch: usize,
        /// The first error, as text.
        cause: String,
    },

    /// `start_batch` was called out of order or past the end.
    #[error("start_batch({got}) called out of order: expected batch {expected} of {num_batches}")]
    BatchOutOfOrder {
        /// The batch that should come next.
        expected: usize,
        /// The batch requested.
        got: usize,
        /// Batches in the epoch.
        num_batches: usize,
    },

    /// No allocation of the file starts at this pointer.
    #[error("{path}: no allocation starts at offset {ptr}")]
    UnknownPointer {
        /// The dataset file.
        path: PathBuf,
        /// The pointer that was read.
        ptr: u64,
    },

    /// The page holding this allocation is not loaded for the current batch.
    #[error(
        "{path}: the allocation at offset {ptr} lies in page {page}, which is not loaded \
         for the current batch ({batch:?}); read only samples of the batch passed to start_batch"
    )]
    PageNotLoaded {
        /// The dataset file.
        path: PathBuf,
        /// The pointer that was read.
        ptr: u64,
        /// Its page.
        page: u64,
        /// The current batch (None before the first `start_batch`).
        batch: Option<usize>,
    },

    /// An allocation runs past the end of its page (FFCV's writer never does this; the
    /// process cache holds pages separately, so it cannot serve such a read).
    #[error(
        "{path}: the allocation at offset {ptr} ({size} bytes) runs past the end of page {page}"
    )]
    AllocationCrossesPage {
        /// The dataset file.
        path: PathBuf,
        /// The pointer that was read.
        ptr: u64,
        /// Its size.
        size: u64,
        /// Its page.
        page: u64,
    },

    /// An extent asked of the OS cache lies outside the file.
    #[error("{path}: {len} bytes at offset {ptr} lie outside the file")]
    ExtentOutsideFile {
        /// The dataset file.
        path: PathBuf,
        /// Start of the extent.
        ptr: u64,
        /// Its length.
        len: u64,
    },

    /// Opening the file for page reads failed.
    #[error("{path}: cannot open for page reads: {source}")]
    Open {
        /// The dataset file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },

    /// Allocating slot memory or starting reader threads failed.
    #[error("{path}: cannot set up the process cache ({what}): {source}")]
    Setup {
        /// The dataset file.
        path: PathBuf,
        /// What was being set up.
        what: &'static str,
        /// The I/O error.
        source: io::Error,
    },

    /// A slot was still busy when the schedule reassigned it (an internal invariant
    /// broke; reported rather than risk reading a page being written).
    #[error("{path}: slot {slot} is still busy ({state}) when page {page} needs it")]
    SlotBusy {
        /// The dataset file.
        path: PathBuf,
        /// The slot.
        slot: usize,
        /// The page scheduled into it.
        page: u64,
        /// The state found, as text.
        state: String,
    },
}
