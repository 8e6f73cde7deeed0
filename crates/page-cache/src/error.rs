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
         {fix}"
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
        /// What would fix it; the cache alone does not know the order, so it says
        /// [`BudgetFix::Unknown`] and the loader, which does, replaces it
        /// ([`Error::with_budget_fix`]).
        fix: BudgetFix,
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

/// The knob that fixes an [`Error::MemoryBudget`], by the order that made the schedule: a
/// message never recommends the order already in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetFix {
    /// The order is not known here.
    Unknown,
    /// Random or Sequential (named): their schedules keep pages of the whole window of
    /// prefetched batches open, QuasiRandom bounds that by its buffer.
    OtherOrder(&'static str),
    /// QuasiRandom: its buffer of `buffer_pages` pages decides how many pages are open;
    /// `fitting` is the largest buffer whose schedules fit the budget, when one does.
    QuasiRandomBuffer {
        /// The buffer in use, in pages.
        buffer_pages: usize,
        /// The largest buffer that fits the budget, if any.
        fitting: Option<usize>,
    },
}

impl std::fmt::Display for BudgetFix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            BudgetFix::Unknown => f.write_str(
                "use the QuasiRandom order (its schedules need few slots), raise max_memory, \
                 or use the OS cache (os_cache = true)",
            ),
            BudgetFix::OtherOrder(order) => write!(
                f,
                "the {order} order keeps many pages open: use the QuasiRandom order (its \
                 schedules need few slots), raise max_memory, or use the OS cache (os_cache = true)"
            ),
            BudgetFix::QuasiRandomBuffer {
                buffer_pages,
                fitting: Some(fitting),
            } => write!(
                f,
                "the QuasiRandom buffer of {buffer_pages} pages keeps too many pages open: \
                 lower quasi_buffer_pages (--quasi-buffer-pages) to {fitting}, which fits this \
                 budget, or raise max_memory"
            ),
            BudgetFix::QuasiRandomBuffer {
                buffer_pages,
                fitting: None,
            } => write!(
                f,
                "even a QuasiRandom buffer of 1 page does not fit (the buffer in use is \
                 {buffer_pages} pages): raise max_memory, lower batch_size or prefetch_ahead, \
                 or use the OS cache (os_cache = true)"
            ),
        }
    }
}

impl Error {
    /// The same error with `fix` as its advice when it is an [`Error::MemoryBudget`];
    /// any other error unchanged.
    pub fn with_budget_fix(self, new_fix: BudgetFix) -> Error {
        match self {
            Error::MemoryBudget {
                path,
                needed,
                budget,
                num_slots,
                page_size,
                ..
            } => Error::MemoryBudget {
                path,
                needed,
                budget,
                num_slots,
                page_size,
                fix: new_fix,
            },
            other => other,
        }
    }
}
