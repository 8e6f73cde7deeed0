//! The counters both caches report ([`CacheStats`]), below the caches and the
//! [`crate::PageCache`] that dispatches to them.

use std::time::Duration;

/// A snapshot of a cache's counters (all zero for the OS cache, which loads nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Pages read from storage into slots.
    pub pages_loaded: u64,
    /// Pages served from a slot that still held them from the previous epoch
    /// (`retain_pages`): neither read nor counted in `pages_loaded`.
    pub pages_reused: u64,
    /// Bytes read from storage: each page from its start to the end of its last
    /// allocation (rounded up to 4 KiB blocks with `O_DIRECT`).
    pub storage_bytes_read: u64,
    /// Time `start_batch` spent blocked waiting for pages.
    pub page_wait: Duration,
    /// Slots holding or awaiting a page now.
    pub slots_in_use: usize,
    /// Most slots in use at once.
    pub peak_slots_in_use: usize,
    /// Slots the schedule needs (for a cache: the most any epoch needed).
    pub num_slots: usize,
    /// Bytes of slot memory allocated.
    pub slot_memory_bytes: u64,
    /// Page reads that failed.
    pub page_read_errors: u64,
    /// Whether pages are read with `O_DIRECT`.
    pub direct_io: bool,
}
