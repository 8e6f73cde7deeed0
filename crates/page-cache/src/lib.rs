//! Where a `.beton` sample's bytes come from during an epoch: the OS page cache through
//! the reader's map, or a process cache that reads whole pages ahead of need.
//!
//! # Overview
//!
//! - [`PageCache`] is built from a [`beton_io::Reader`] and a [`CachePolicy`]: either an
//!   [`OsCache`] ([`CachePolicy::Os`], FFCV's `os_cache=True`: reads are slices of the
//!   read-only map, with `madvise` hints chosen from the order) or a [`ProcessCache`]
//!   ([`CachePolicy::Process`], `os_cache=False`: FFCV's page schedule, executed by page-reader threads doing positional reads into
//!   slots this process owns; unlike FFCV, a page read stops at the end of the page's
//!   last allocation, so padding at the end of pages is never read).
//! - [`PageCache::schedule_epoch`] takes the epoch's batches (sample ids) and returns an
//!   [`EpochContext`]. Call [`EpochContext::start_batch`] for batches `0, 1, 2, …` in
//!   order; it may block until the pages the batch needs are loaded. Between two
//!   `start_batch` calls, [`EpochContext::read`] returns the bytes of an allocation of
//!   that batch, from any number of threads (`EpochContext` is `Sync`).
//!   [`EpochContext::read_extent`] serves a known extent (a field's stored bytes from
//!   its metadata) without the allocation lookup.
//! - [`PageSchedule`] is the pure schedule (pages per batch, first/last batch per page,
//!   slot assignment); [`CacheStats`] the counters (pages loaded, bytes read from
//!   storage, time spent waiting, slots in use and their peak, read errors).
//! - Each policy carries its own knobs: [`OsConfig`] the OS cache's `madvise` policy
//!   ([`OsAdvice`]); [`ProcessConfig`] FFCV's `prefetch_ahead` and reader threads, the
//!   memory budget, and knobs beyond FFCV's: `direct_io` (page reads with `O_DIRECT`,
//!   so a larger-than-RAM dataset does not evict the OS cache), `map_pages` (the
//!   schedule and readers as usual, but pages are served from the reader's map instead
//!   of copied: near OS-cache speed on a cached file), `retain_pages`, `hold_all_pages`. [`evict_from_os_cache`] and [`os_cached_bytes`] support
//!   cold-cache measurements.
//! - [`PageSource`] is where the process cache reads pages of a remote object
//!   ([`LocalSource`], and with the `remote` feature `remote::ObjectSource`);
//!   [`DiskCache`] wraps one with a directory of pages shared by later epochs, loaders and
//!   processes, written atomically, verified by length and kept within a size cap.
//!
//! The process cache allocates its slot memory once and reuses it in later epochs that
//! need no more slots, and (`retain_pages`, the default) does not re-read a page whose
//! slot still holds it from the previous epoch. Before allocating, it checks the schedule's need against
//! `max_memory` (default: the OS's available memory) and fails with
//! [`Error::MemoryBudget`] rather than exhaust memory. Dropping an `EpochContext` stops
//! and joins its page readers.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use page_cache::{CachePolicy, PageCache, ProcessConfig};
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/ffcv-1.0.2/multipage.beton");
//! let reader = Arc::new(beton_io::Reader::open(path)?);
//! let policy = CachePolicy::Process(ProcessConfig { reader_threads: 2, ..ProcessConfig::default() });
//! let cache = PageCache::new(Arc::clone(&reader), &policy)?;
//!
//! // Two batches of samples; the cache plans which pages each needs.
//! let batches = vec![vec![0, 1, 2], vec![39, 7]];
//! let mut epoch = cache.schedule_epoch(&batches)?;
//! for (b, batch) in batches.iter().enumerate() {
//!     epoch.start_batch(b)?;
//!     for &sample in batch {
//!         for row in reader.alloc_rows().filter(|r| r.sample_id == sample) {
//!             assert_eq!(epoch.read(row.ptr)?, reader.data_at(row.ptr)?);
//!         }
//!     }
//! }
//! assert_eq!(epoch.stats().pages_loaded, 3); // pages 1 (samples 0-2), 2 (sample 7), 7 (sample 39)
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod advice;
mod disk_cache;
mod error;
mod memory;
mod os;
mod page_slots;
mod policy;
mod process;
mod readers;
#[cfg(feature = "remote")]
pub mod remote;
mod schedule;
mod shards;
mod source;
mod stats;
#[cfg(feature = "remote")]
mod store_url;

use std::sync::Arc;

use beton_io::Reader;

pub use advice::{Advice, evict_from_os_cache, os_cached_bytes};
pub use disk_cache::{DiskCache, DiskCacheConfig, DiskCacheStats};
pub use error::{BudgetFix, Error, Result};
pub use memory::{
    CgroupMemory, CgroupVersion, MemoryBound, MemoryFacts, available_memory, cgroup_memory,
    memory_facts,
};
pub use os::{OsCache, OsEpoch};
pub use policy::{CachePolicy, OsAdvice, OsConfig, ProcessConfig};
pub use process::{ProcessCache, ProcessEpoch};
pub use schedule::{PageSchedule, ScheduledPage};
pub use shards::ShardSource;
pub use source::{LocalSource, PageSource, SourceKind};
pub use stats::CacheStats;

/// Either cache, behind one interface.
#[derive(Clone)]
pub enum PageCache {
    /// [`CachePolicy::Os`].
    Os(OsCache),
    /// [`CachePolicy::Process`].
    Process(ProcessCache),
}

impl PageCache {
    /// Builds the cache `policy` names, with its knobs.
    pub fn new(reader: Arc<Reader>, policy: &CachePolicy) -> Result<PageCache> {
        PageCache::with_source(reader, None, policy)
    }

    /// As [`PageCache::new`], with the pages of a remote object read from `source`.
    ///
    /// A remote object cannot be memory-mapped, so the OS cache (`CachePolicy::Os`) is
    /// served by the process cache with its default knobs, with a warning (FFCV's default
    /// is `os_cache = true`; refusing it would fail every loader built with defaults over
    /// a URL). Callers that know the user's process-cache knobs (the facade's builder)
    /// pass `CachePolicy::Process` themselves.
    pub fn with_source(
        reader: Arc<Reader>,
        source: Option<Arc<dyn PageSource>>,
        policy: &CachePolicy,
    ) -> Result<PageCache> {
        // Local shards stitched into one map (`Reader::concat`) are served by the OS cache
        // like one file; only a source whose bytes are not all mapped needs the process cache.
        let mapped_shards = matches!(policy, CachePolicy::Os(_))
            && reader.holds_data()
            && source.as_ref().is_some_and(|s| !s.kind().is_remote());
        if let Some(s) = source.as_ref().filter(|_| !mapped_shards) {
            let config = match policy {
                CachePolicy::Process(config) => config.clone(),
                CachePolicy::Os(_) => {
                    tracing::warn!(
                        url = s.name(),
                        "os_cache=True needs a memory-mapped local file; {} is a {} source, so \
                         it is read through the process cache (set os_cache=False to silence \
                         this)",
                        s.name(),
                        s.kind().name()
                    );
                    ProcessConfig::default()
                }
            };
            return Ok(PageCache::Process(ProcessCache::with_source(
                reader, source, &config,
            )?));
        }
        Ok(match policy {
            CachePolicy::Os(_) if !reader.holds_data() => {
                return Err(Error::Open {
                    path: reader.path().to_owned(),
                    source: std::io::Error::other(
                        "the reader was opened from byte ranges; give the process cache its \
                         page source",
                    ),
                });
            }
            CachePolicy::Os(config) => PageCache::Os(OsCache::new(reader, config)),
            CachePolicy::Process(config) => PageCache::Process(ProcessCache::new(reader, config)?),
        })
    }

    /// The reader the cache serves.
    pub fn reader(&self) -> &Arc<Reader> {
        match self {
            PageCache::Os(c) => c.reader(),
            PageCache::Process(c) => c.reader(),
        }
    }

    /// Plans an epoch over `batches` (sample ids per batch).
    pub fn schedule_epoch(&self, batches: &[Vec<u64>]) -> Result<EpochContext> {
        Ok(match self {
            PageCache::Os(c) => EpochContext::Os(c.schedule_epoch(batches)?),
            PageCache::Process(c) => EpochContext::Process(Box::new(c.schedule_epoch(batches)?)),
        })
    }

    /// Counters accumulated over every epoch (zero for the OS cache).
    pub fn stats(&self) -> CacheStats {
        match self {
            PageCache::Os(_) => CacheStats::default(),
            PageCache::Process(c) => c.stats(),
        }
    }
}

/// One epoch of either cache.
pub enum EpochContext {
    /// An OS-cache epoch.
    Os(OsEpoch),
    /// A process-cache epoch (boxed: it carries the epoch's schedule).
    Process(Box<ProcessEpoch>),
}

impl EpochContext {
    /// Prepares batch `b` (batches start in order from 0); the process cache blocks
    /// until the pages `b` needs are loaded.
    pub fn start_batch(&mut self, b: usize) -> Result<()> {
        match self {
            EpochContext::Os(e) => e.start_batch(b),
            EpochContext::Process(e) => e.start_batch(b),
        }
    }

    /// The bytes of the allocation at `ptr` (size from the allocation table).
    #[inline]
    pub fn read(&self, ptr: u64) -> Result<&[u8]> {
        match self {
            EpochContext::Os(e) => e.read(ptr),
            EpochContext::Process(e) => e.read(ptr),
        }
    }

    /// `len` bytes at file offset `ptr` (a field's stored extent from its metadata)
    /// without the allocation lookup `read` does: cheaper for small samples. They must
    /// lie inside the file (OS cache) or inside one page held for the current batch
    /// (process cache).
    #[inline]
    pub fn read_extent(&self, ptr: u64, len: u64) -> Result<&[u8]> {
        match self {
            EpochContext::Os(e) => e.read_extent(ptr, len),
            EpochContext::Process(e) => e.read_extent(ptr, len),
        }
    }

    /// Number of batches of the epoch.
    pub fn num_batches(&self) -> usize {
        match self {
            EpochContext::Os(e) => e.num_batches(),
            EpochContext::Process(e) => e.num_batches(),
        }
    }

    /// This epoch's counters so far.
    pub fn stats(&self) -> CacheStats {
        match self {
            EpochContext::Os(e) => e.stats(),
            EpochContext::Process(e) => e.stats(),
        }
    }
}
