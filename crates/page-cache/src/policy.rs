//! The cache policy: which cache serves an epoch's reads ([`CachePolicy`]) and the knobs
//! of each, every knob in the configuration of the cache it belongs to ([`OsConfig`],
//! [`ProcessConfig`]), with FFCV's defaults.

use crate::Advice;

/// Which cache a [`crate::PageCache`] is, with that cache's knobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CachePolicy {
    /// The OS page cache through the reader's map (FFCV's `os_cache=True`, the default).
    Os(OsConfig),
    /// The process cache: FFCV's page schedule, pages read into slots this process owns
    /// (FFCV's `os_cache=False`).
    Process(ProcessConfig),
}

impl Default for CachePolicy {
    fn default() -> Self {
        CachePolicy::Os(OsConfig::default())
    }
}

impl CachePolicy {
    /// FFCV's `os_cache` flag: the OS cache with its defaults when `true`, the process
    /// cache with its defaults when `false`.
    pub fn from_os_cache(os_cache: bool) -> CachePolicy {
        if os_cache {
            CachePolicy::Os(OsConfig::default())
        } else {
            CachePolicy::Process(ProcessConfig::default())
        }
    }

    /// Whether this is the OS cache (FFCV's `os_cache`).
    pub fn is_os(&self) -> bool {
        matches!(self, CachePolicy::Os(_))
    }

    /// The process cache's knobs; `None` for the OS cache.
    pub fn process(&self) -> Option<&ProcessConfig> {
        match self {
            CachePolicy::Process(config) => Some(config),
            CachePolicy::Os(_) => None,
        }
    }
}

impl From<OsConfig> for CachePolicy {
    fn from(config: OsConfig) -> CachePolicy {
        CachePolicy::Os(config)
    }
}

impl From<ProcessConfig> for CachePolicy {
    fn from(config: ProcessConfig) -> CachePolicy {
        CachePolicy::Process(config)
    }
}

/// The `madvise` policy of the OS cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OsAdvice {
    /// Pick from each epoch's order: no readahead (`Random`) for random orders over
    /// small samples of a file larger than half the available memory, the default
    /// readahead (`Normal`) otherwise (measured: `Sequential` did not help).
    #[default]
    Auto,
    /// Give no hints.
    Off,
    /// Always give this hint.
    Fixed(Advice),
}

/// The OS cache's knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OsConfig {
    /// The `madvise` policy.
    pub advice: OsAdvice,
}

/// The process cache's knobs, with FFCV's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessConfig {
    /// Batches ahead of need at which a page may be fetched (FFCV: 3).
    pub prefetch_ahead: usize,
    /// Page-reader threads per epoch (FFCV: 12).
    pub reader_threads: usize,
    /// Most bytes of page slots an epoch may use; `None` = the OS's available memory
    /// when the epoch is scheduled.
    pub max_memory: Option<u64>,
    /// Read pages with `O_DIRECT` (bypassing the OS page cache), falling back to
    /// buffered reads if the filesystem refuses.
    pub direct_io: bool,
    /// Serve pages from the reader's read-only map instead of copying them into slots.
    /// The schedule, the page readers and the memory guard stay the same, but a reader
    /// thread only makes its page resident (faulting it in ahead of need,
    /// `MADV_POPULATE_READ`), so no slot memory is allocated and reads of a cached file
    /// cost what the OS cache's do. A file truncated after a page was loaded can then
    /// raise SIGBUS, as with the OS cache. Ignored when `direct_io` is in effect.
    pub map_pages: bool,
    /// Copy mode: a page still held intact in a slot from the previous epoch keeps that
    /// slot and is not read again, when the slot is free over the page's lifetime in the
    /// new schedule. A file whose pages all fit in the slots is then read once, not once
    /// per epoch. `false` re-reads every page each epoch, as FFCV does (for a file
    /// rewritten in place between epochs).
    pub retain_pages: bool,
    /// Copy mode: give every page an epoch touches a slot of its own, so the slots end
    /// the epoch holding all of them and later epochs read nothing (implies
    /// `retain_pages`). Costs slot memory for every page the epoch reads (the file, for a
    /// full epoch) instead of the schedule's working set, so it is off by default; when
    /// that exceeds the memory budget the epoch falls back to the ordinary schedule.
    /// For datasets that fit in memory read in orders with a small working set
    /// (sequential, quasi-random), where each page is otherwise read again every epoch.
    pub hold_all_pages: bool,
}

impl Default for ProcessConfig {
    fn default() -> Self {
        ProcessConfig {
            prefetch_ahead: 3,
            reader_threads: 12,
            max_memory: None,
            direct_io: false,
            map_pages: false,
            retain_pages: true,
            hold_all_pages: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_ffcvs_os_cache_and_the_flag_picks_either_cache() {
        assert_eq!(CachePolicy::default(), CachePolicy::Os(OsConfig::default()));
        assert!(CachePolicy::from_os_cache(true).is_os());
        let process = CachePolicy::from_os_cache(false);
        assert!(!process.is_os());
        let config = process.process().expect("the process cache");
        assert_eq!((config.prefetch_ahead, config.reader_threads), (3, 12));
        assert!(config.retain_pages && !config.hold_all_pages && !config.direct_io);
        assert_eq!(CachePolicy::default().process(), None);
    }
}
