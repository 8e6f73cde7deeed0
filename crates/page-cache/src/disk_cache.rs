//! A disk cache of pages in front of a remote [`PageSource`] ([`DiskCache`]): later epochs,
//! later loaders and other processes on the node that read the same object version find
//! its pages in a directory instead of asking the store again.
//!
//! Layout: `DIR/<object key>/<offset>-<length>.page`, one file per range read (a page from
//! its start to its last allocation), holding exactly those bytes. The object key is the
//! first 32 hex digits of SHA-256 over the source's name (URL), its pinned identity (ETag
//! or version id) and its length, so a replaced object never matches the entries of the
//! old one; a source with no identity is refused (nothing could tell its versions apart).
//!
//! - **Atomic writes.** A page is written to a temporary file in the same directory
//!   (synced) and renamed over the entry's name, so a reader in any process sees a whole
//!   entry or none. Two processes storing the same page write the same bytes; the last
//!   rename wins.
//! - **Verified by length.** An entry whose size is not the range's length (truncated,
//!   or damaged) is removed and the page read again from the source: it is never handed out.
//! - **Bounded.** Before storing, the cache adds the page to its running count of the
//!   directory's bytes; when that would pass the cap, or after every 1/16 of the cap it has
//!   written itself, it rescans the whole directory (every object, every process's files)
//!   and removes the least recently used entries (a hit refreshes an entry's modification
//!   time) until the page fits. So one process never goes over the cap, and P processes
//!   sharing a directory go over it by at most what each wrote since its last scan (about
//!   P x cap / 16), which the next scan of any of them removes. Temporary files left by a
//!   crashed process count too, and are removed after an hour.
//! - **Best effort.** A failure to store (disk full, permissions) is logged once and the
//!   page served from the source: the cache can make reads cheaper, never fail them.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use crate::source::{PageSource, SourceKind};

/// Where the disk cache lives and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskCacheConfig {
    /// The directory (created if missing), shared by every object and process using it.
    pub dir: PathBuf,
    /// The most bytes of entries the directory may hold.
    pub max_bytes: u64,
}

/// Counters of a [`DiskCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskCacheStats {
    /// Reads served from the directory.
    pub hits: u64,
    /// Reads passed to the source.
    pub misses: u64,
    /// Bytes served from the directory.
    pub hit_bytes: u64,
    /// Entries stored by this cache.
    pub stored: u64,
    /// Entries found with the wrong length, removed and read again.
    pub discarded: u64,
    /// Entries removed to stay within the cap (by this cache's scans).
    pub evicted: u64,
    /// Pages that could not be stored (served from the source all the same).
    pub store_failures: u64,
}

/// This process's idea of how full the directory is, between scans.
#[derive(Debug, Default)]
struct Usage {
    /// Bytes in the directory at the last scan plus what was stored since.
    total: u64,
    /// Bytes stored since the last scan.
    since_scan: u64,
}

/// Temporary files older than this belong to a process that died while writing.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// A [`PageSource`] that serves reads from a directory of pages when it can, and stores
/// what it had to read from the wrapped source (see the module docs).
#[derive(Debug)]
pub struct DiskCache {
    inner: Arc<dyn PageSource>,
    root: PathBuf,
    dir: PathBuf,
    max_bytes: u64,
    usage: Mutex<Usage>,
    temp_counter: AtomicU64,
    warned: AtomicBool,
    hits: AtomicU64,
    misses: AtomicU64,
    hit_bytes: AtomicU64,
    stored: AtomicU64,
    discarded: AtomicU64,
    evicted: AtomicU64,
    store_failures: AtomicU64,
}

impl DiskCache {
    /// A cache of `inner`'s pages under `config.dir`, which is created if missing.
    ///
    /// Fails when the directory cannot be created, or when `inner` pins no identity
    /// ([`PageSource::pinned_identity`]: an HTTP server that sends no ETag), since entries
    /// of a replaced object could not be told from the current one's.
    pub fn new(inner: Arc<dyn PageSource>, config: &DiskCacheConfig) -> io::Result<DiskCache> {
        let identity = inner.pinned_identity().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: nothing pins its bytes (a server that gives no ETag or version, or a \
                     shard set with a local file), so cached pages could not be told from those \
                     of a replaced object; read it without --page-cache-dir",
                    inner.name()
                ),
            )
        })?;
        let mut hash = Sha256::new();
        for part in [inner.name(), identity.as_str(), &inner.len().to_string()] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part.as_bytes());
        }
        let mut key = String::with_capacity(32);
        for b in &hash.finalize()[..16] {
            let _ = write!(key, "{b:02x}");
        }
        let dir = config.dir.join(key);
        fs::create_dir_all(&dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("page cache directory {}: {e}", config.dir.display()),
            )
        })?;
        let cache = DiskCache {
            inner,
            root: config.dir.clone(),
            dir,
            max_bytes: config.max_bytes,
            usage: Mutex::new(Usage::default()),
            temp_counter: AtomicU64::new(0),
            warned: AtomicBool::new(false),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            hit_bytes: AtomicU64::new(0),
            stored: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            store_failures: AtomicU64::new(0),
        };
        cache.lock_usage().total = cache.scan_and_evict(0);
        tracing::debug!(source = cache.inner.name(), dir = %cache.dir.display(), "disk page cache");
        Ok(cache)
    }

    /// The directory of this object's entries (inside the configured directory).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The source the cache reads on a miss.
    pub fn inner(&self) -> &Arc<dyn PageSource> {
        &self.inner
    }

    /// Hits, misses and the rest so far.
    pub fn stats(&self) -> DiskCacheStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DiskCacheStats {
            hits: get(&self.hits),
            misses: get(&self.misses),
            hit_bytes: get(&self.hit_bytes),
            stored: get(&self.stored),
            discarded: get(&self.discarded),
            evicted: get(&self.evicted),
            store_failures: get(&self.store_failures),
        }
    }

    fn lock_usage(&self) -> std::sync::MutexGuard<'_, Usage> {
        self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry_path(&self, offset: u64, len: usize) -> PathBuf {
        self.dir.join(format!("{offset}-{len}.page"))
    }

    /// Fills `buf` from the entry if it is there with exactly `buf.len()` bytes; removes
    /// an entry of any other length. `false` means "read the source".
    fn read_entry(&self, path: &Path, buf: &mut [u8]) -> bool {
        let Ok(file) = File::open(path) else {
            return false;
        };
        let Ok(meta) = file.metadata() else {
            return false;
        };
        if meta.len() != buf.len() as u64 {
            tracing::warn!(
                entry = %path.display(),
                len = meta.len(),
                expected = buf.len(),
                "disk page cache: entry has the wrong length; discarded and read again"
            );
            self.discarded.fetch_add(1, Ordering::Relaxed);
            let _ = fs::remove_file(path);
            return false;
        }
        if file.read_exact_at(buf, 0).is_err() {
            // Whatever part was filled is overwritten by the source's read.
            return false;
        }
        // The modification time orders eviction: a hit makes the entry recent.
        let _ = file.set_modified(SystemTime::now());
        true
    }

    /// Stores `data` as the entry at `path`, making room first; failures are counted and
    /// logged once, never returned.
    fn store(&self, path: &Path, data: &[u8]) {
        let len = data.len() as u64;
        if len > self.max_bytes {
            return;
        }
        {
            let mut usage = self.lock_usage();
            if usage.total.saturating_add(len) > self.max_bytes
                || usage.since_scan >= self.max_bytes / 16
            {
                usage.total = self.scan_and_evict(len);
                usage.since_scan = 0;
            }
            usage.total = usage.total.saturating_add(len);
            usage.since_scan = usage.since_scan.saturating_add(len);
        }
        match self.write_entry(path, data) {
            Ok(()) => {
                self.stored.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.store_failures.fetch_add(1, Ordering::Relaxed);
                let mut usage = self.lock_usage();
                usage.total = usage.total.saturating_sub(len);
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        entry = %path.display(),
                        "disk page cache: cannot store a page ({e}); reading on from the source"
                    );
                }
            }
        }
    }

    /// Temp file, data, sync, rename: an entry appears whole or not at all.
    fn write_entry(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let temp = self.dir.join(format!(
            ".{name}.tmp-{}-{}",
            std::process::id(),
            self.temp_counter.fetch_add(1, Ordering::Relaxed)
        ));
        let result = (|| {
            let mut file = match File::create(&temp) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // The directory was removed under us (another process, a user).
                    fs::create_dir_all(&self.dir)?;
                    File::create(&temp)?
                }
                other => other?,
            };
            file.write_all(data)?;
            file.sync_data()?;
            fs::rename(&temp, path)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&temp);
        }
        result
    }

    /// Lists every entry and temporary file under the configured directory, removes stale
    /// temporary files and then the oldest entries until `incoming` more bytes fit the cap;
    /// returns the bytes left.
    fn scan_and_evict(&self, incoming: u64) -> u64 {
        let now = SystemTime::now();
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        let mut total = 0u64;
        let objects = fs::read_dir(&self.root).into_iter().flatten().flatten();
        for object in objects {
            let Ok(files) = fs::read_dir(object.path()) else {
                continue;
            };
            for file in files.flatten() {
                let Ok(meta) = file.metadata() else { continue };
                if !meta.is_file() {
                    continue;
                }
                let name = file.file_name();
                let name = name.to_string_lossy();
                let modified = meta.modified().unwrap_or(now);
                let is_temp = name.starts_with('.') && name.contains(".tmp-");
                if is_temp {
                    let stale = now
                        .duration_since(modified)
                        .is_ok_and(|age| age > STALE_TEMP);
                    if stale && fs::remove_file(file.path()).is_ok() {
                        continue;
                    }
                    total = total.saturating_add(meta.len());
                } else if name.ends_with(".page") {
                    total = total.saturating_add(meta.len());
                    entries.push((modified, meta.len(), file.path()));
                }
            }
        }
        if total.saturating_add(incoming) <= self.max_bytes {
            return total;
        }
        entries.sort();
        for (_, len, path) in entries {
            if total.saturating_add(incoming) <= self.max_bytes {
                break;
            }
            // Another process may have removed it first: then it is gone all the same.
            match fs::remove_file(&path) {
                Ok(()) => {
                    self.evicted.fetch_add(1, Ordering::Relaxed);
                    total = total.saturating_sub(len);
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    total = total.saturating_sub(len);
                }
                Err(_) => {}
            }
        }
        total
    }
}

impl PageSource for DiskCache {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn kind(&self) -> SourceKind {
        self.inner.kind()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        // Ranges past the end are the source's error to give, never a cache lookup.
        let in_range = offset
            .checked_add(buf.len() as u64)
            .is_some_and(|end| end <= self.inner.len());
        if buf.is_empty() || !in_range {
            return self.inner.read_at(offset, buf);
        }
        let path = self.entry_path(offset, buf.len());
        if self.read_entry(&path, buf) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            self.hit_bytes
                .fetch_add(buf.len() as u64, Ordering::Relaxed);
            return Ok(());
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        self.inner.read_at(offset, buf)?;
        self.store(&path, buf);
        Ok(())
    }

    fn preferred_concurrency(&self) -> usize {
        self.inner.preferred_concurrency()
    }

    fn pinned_identity(&self) -> Option<String> {
        self.inner.pinned_identity()
    }
}
