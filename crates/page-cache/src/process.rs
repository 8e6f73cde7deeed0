//! The process cache ([`crate::CachePolicy::Process`], FFCV's `os_cache = false`): FFCV's page schedule executed by page-reader
//! threads into slots this process owns.

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use beton_io::Reader;

use crate::ProcessConfig;
use crate::error::{Error, Result};
use crate::page_slots::{SlotArena, SlotOwner, SlotState};
use crate::readers::{Counters, Job, PageFile, ReaderPool, Wait};
use crate::schedule::PageSchedule;
use crate::source::PageSource;
use crate::stats::CacheStats;

const NO_SLOT: u32 = u32::MAX;

/// The process cache: reads whole pages into slots it owns, following each epoch's
/// schedule. Cheap to share (`Clone` shares the slot memory and counters).
#[derive(Clone)]
pub struct ProcessCache {
    inner: Arc<Inner>,
}

struct Inner {
    reader: Arc<Reader>,
    file: Arc<PageFile>,
    direct_io_fallback: Option<String>,
    prefetch_ahead: usize,
    reader_threads: usize,
    max_memory: Option<u64>,
    /// Keep pages whose slot survived from the previous epoch (`retain_pages`, copy mode).
    retain: bool,
    /// Give every page of an epoch its own slot (`hold_all_pages`, copy mode).
    hold_all: bool,
    page_size: u64,
    file_size: u64,
    num_samples: u64,
    /// Per page of the file: bytes from the page's start to the end of its last
    /// allocation (what a page read must fetch; 0 for pages without allocations).
    page_used: Vec<u64>,
    /// Slot memory between epochs (taken by a live epoch, returned when it drops).
    arena: Mutex<Option<SlotArena>>,
    /// Bytes of slot memory currently allocated (held here or by a live epoch).
    slot_memory_bytes: AtomicU64,
    /// How many times slot memory was allocated.
    slot_allocations: AtomicU64,
    live_threads: Arc<AtomicUsize>,
    totals: Arc<Counters>,
    wait_nanos: AtomicU64,
    slots_in_use: AtomicUsize,
    peak_slots: AtomicUsize,
    max_num_slots: AtomicUsize,
}

impl ProcessCache {
    /// Prepares the cache for `reader`'s file: opens its own descriptor for positional
    /// reads (with `O_DIRECT` if `config.direct_io`, falling back to buffered reads if
    /// refused) Allocates no slot memory yet.
    pub fn new(reader: Arc<Reader>, config: &ProcessConfig) -> Result<ProcessCache> {
        ProcessCache::with_source(reader, None, config)
    }

    /// As [`ProcessCache::new`], reading pages from `source` when given (a remote
    /// object, whose `reader` was opened from its byte ranges): then `direct_io` and
    /// `map_pages` do not apply, and the reader threads are at least the source's
    /// [`PageSource::preferred_concurrency`], so that many range requests are in
    /// flight; the slots the schedule may fill, checked against the memory budget as
    /// always, bound them.
    pub fn with_source(
        reader: Arc<Reader>,
        source: Option<Arc<dyn PageSource>>,
        config: &ProcessConfig,
    ) -> Result<ProcessCache> {
        let path = reader.path().to_owned();
        let opened = match &source {
            Some(s) => {
                if config.direct_io || config.map_pages {
                    tracing::warn!(
                        url = s.name(),
                        "direct_io and map_pages apply to local files only; ignored for a remote source"
                    );
                }
                PageFile::from_source(Arc::clone(s)).map(|f| (f, None))
            }
            None if !reader.holds_data() => Err(std::io::Error::other(
                "the reader was opened from byte ranges; give the process cache its page source",
            )),
            None => PageFile::open(
                &path,
                config.direct_io,
                config.map_pages.then(|| Arc::clone(&reader)),
            ),
        };
        let (file, direct_io_fallback) = opened.map_err(|source| Error::Open {
            path: path.clone(),
            source,
        })?;
        let reader_threads = match &source {
            Some(s) => config.reader_threads.max(s.preferred_concurrency()),
            None => config.reader_threads,
        };
        if let Some(why) = &direct_io_fallback {
            tracing::warn!(path = %path.display(), reason = %why, "O_DIRECT unavailable; using buffered page reads");
        }
        let page_size = reader.page_size();
        // Sized by the validated file's page count, not by a number read from it.
        let num_pages = reader.file_size().div_ceil(page_size.max(1));
        let mut page_used = vec![0u64; usize::try_from(num_pages).unwrap_or(0)];
        for row in reader.alloc_rows() {
            let page = row.ptr / page_size;
            let end = (row.ptr - page * page_size)
                .saturating_add(row.size)
                .min(page_size);
            if let Some(u) = page_used.get_mut(page as usize) {
                *u = (*u).max(end);
            }
        }
        Ok(ProcessCache {
            inner: Arc::new(Inner {
                page_used,
                page_size: reader.page_size(),
                file_size: reader.file_size(),
                num_samples: reader.num_samples(),
                reader,
                file: Arc::new(file),
                direct_io_fallback,
                prefetch_ahead: config.prefetch_ahead,
                reader_threads: reader_threads.max(1),
                max_memory: config.max_memory,
                retain: (config.retain_pages || config.hold_all_pages) && !config.map_pages,
                hold_all: config.hold_all_pages && !config.map_pages,
                arena: Mutex::new(None),
                slot_memory_bytes: AtomicU64::new(0),
                slot_allocations: AtomicU64::new(0),
                live_threads: Arc::new(AtomicUsize::new(0)),
                totals: Arc::new(Counters::default()),
                wait_nanos: AtomicU64::new(0),
                slots_in_use: AtomicUsize::new(0),
                peak_slots: AtomicUsize::new(0),
                max_num_slots: AtomicUsize::new(0),
            }),
        })
    }

    /// The reader this cache serves.
    pub fn reader(&self) -> &Arc<Reader> {
        &self.inner.reader
    }

    /// The source pages are read from when it is not the reader's local file (a remote
    /// object), for its kind and counters.
    pub fn source(&self) -> Option<&Arc<dyn PageSource>> {
        self.inner.file.source()
    }

    /// Whether page reads bypass the OS page cache (`O_DIRECT` asked for and accepted).
    pub fn direct_io(&self) -> bool {
        self.inner.file.is_direct()
    }

    /// Whether pages are served from the reader's map (zero-copy, `map_pages`) rather
    /// than copied into slots.
    pub fn maps_pages(&self) -> bool {
        self.inner.file.maps_pages()
    }

    /// Why `O_DIRECT` was not used although asked for (None if not asked or accepted).
    pub fn direct_io_fallback(&self) -> Option<&str> {
        self.inner.direct_io_fallback.as_deref()
    }

    /// Bytes of slot memory currently allocated by this cache.
    pub fn slot_memory_bytes(&self) -> u64 {
        self.inner.slot_memory_bytes.load(Ordering::SeqCst)
    }

    /// How many times slot memory has been allocated (once, unless an epoch needed more
    /// slots than any before it, or two epochs were alive at once).
    pub fn slot_allocations(&self) -> u64 {
        self.inner.slot_allocations.load(Ordering::SeqCst)
    }

    /// Page-reader threads currently running (0 once every epoch context is dropped).
    pub fn live_reader_threads(&self) -> usize {
        self.inner.live_threads.load(Ordering::SeqCst)
    }

    /// Counters accumulated over every epoch of this cache.
    pub fn stats(&self) -> CacheStats {
        let i = &self.inner;
        CacheStats {
            pages_loaded: i.totals.pages_loaded.load(Ordering::Relaxed),
            pages_reused: i.totals.pages_reused.load(Ordering::Relaxed),
            storage_bytes_read: i.totals.storage_bytes_read.load(Ordering::Relaxed),
            page_wait: Duration::from_nanos(i.wait_nanos.load(Ordering::Relaxed)),
            slots_in_use: i.slots_in_use.load(Ordering::Relaxed),
            peak_slots_in_use: i.peak_slots.load(Ordering::Relaxed),
            num_slots: i.max_num_slots.load(Ordering::Relaxed),
            slot_memory_bytes: self.slot_memory_bytes(),
            page_read_errors: i.totals.page_read_errors.load(Ordering::Relaxed),
            direct_io: self.direct_io(),
        }
    }

    /// The pages each batch needs, checking every sample id.
    pub fn pages_per_batch(&self, batches: &[Vec<u64>]) -> Result<Vec<Vec<u64>>> {
        let i = &self.inner;
        let page_map = i.reader.page_map();
        batches
            .iter()
            .enumerate()
            .map(|(b, batch)| {
                let mut pages = Vec::new();
                for &s in batch {
                    if s >= i.num_samples {
                        return Err(Error::SampleOutOfRange {
                            path: i.reader.path().to_owned(),
                            batch: b,
                            sample: s,
                            num_samples: i.num_samples,
                        });
                    }
                    pages.extend_from_slice(page_map.pages_of_sample(s));
                }
                pages.sort_unstable();
                pages.dedup();
                Ok(pages)
            })
            .collect()
    }

    /// The schedule an epoch over `batches` would follow (what `schedule_epoch` uses).
    pub fn plan(&self, batches: &[Vec<u64>]) -> Result<PageSchedule> {
        Ok(PageSchedule::compute(
            &self.pages_per_batch(batches)?,
            self.inner.prefetch_ahead,
        ))
    }

    /// Plans the epoch, checks the memory budget, takes (or allocates) the slot memory
    /// and starts the page readers. Nothing is read until [`ProcessEpoch::start_batch`].
    pub fn schedule_epoch(&self, batches: &[Vec<u64>]) -> Result<ProcessEpoch> {
        let i = &self.inner;
        let path = i.reader.path().to_owned();
        let mut schedule = self.plan(batches)?;

        // The guard runs before any allocation. Memory we already hold counts towards
        // the default budget: it is reused, and MemAvailable does not include it.
        let held_bytes = lock(&i.arena).as_ref().map_or(0, SlotArena::bytes);
        let budget = match i.max_memory {
            Some(m) => m,
            None => {
                crate::memory::available_memory().map_or(u64::MAX, |m| m.saturating_add(held_bytes))
            }
        };
        let hold_all = i.hold_all && reserve_slot_per_page(&mut schedule, i.page_size, budget);
        let needed = schedule.slot_bytes(i.page_size);
        if needed > budget {
            return Err(Error::MemoryBudget {
                path,
                needed,
                budget,
                num_slots: schedule.num_slots,
                page_size: i.page_size,
                fix: crate::error::BudgetFix::Unknown,
            });
        }

        // With map_pages the pages stay in the reader's map: slots only track them.
        let slot_size = if i.file.maps_pages() {
            0
        } else {
            usize::try_from(i.page_size).map_err(|_| Error::Setup {
                path: path.clone(),
                what: "page size",
                source: std::io::Error::other("page size exceeds the address space"),
            })?
        };
        let previous = lock(&i.arena).take();
        let arena = match previous {
            Some(a) if a.num_slots() >= schedule.num_slots && a.slot_size() == slot_size => a,
            previous => {
                if let Some(old) = previous {
                    // Free the smaller arena before mapping the larger one.
                    i.slot_memory_bytes.fetch_sub(old.bytes(), Ordering::SeqCst);
                    drop(old);
                }
                let a = SlotArena::new(schedule.num_slots, slot_size).map_err(|source| {
                    Error::Setup {
                        path: path.clone(),
                        what: "slot memory",
                        source,
                    }
                })?;
                i.slot_memory_bytes.fetch_add(a.bytes(), Ordering::SeqCst);
                i.slot_allocations.fetch_add(1, Ordering::SeqCst);
                tracing::debug!(
                    slots = schedule.num_slots,
                    bytes = a.bytes(),
                    "allocated page slots"
                );
                a
            }
        };
        let owner = SlotOwner::new(arena, i.retain);
        let num_pages = i.file_size.div_ceil(i.page_size.max(1));
        // The page table is sized by pages of the (validated) file, not by file contents.
        let page_slot = vec![NO_SLOT; usize::try_from(num_pages).unwrap_or(0)];
        let kept = if i.retain {
            let mut held = page_slot.clone();
            for slot in 0..schedule.num_slots {
                if let SlotState::Ready(p) = owner.state(slot)
                    && let Some(h) = held.get_mut(p as usize)
                {
                    *h = slot as u32;
                }
            }
            let held = |p: u64| held.get(p as usize).copied().filter(|&s| s != NO_SLOT);
            if hold_all {
                schedule.one_slot_per_page(held)
            } else {
                schedule.keep_held_slots(held)
            }
        } else {
            vec![false; schedule.pages.len()]
        };
        let to_read = kept.iter().filter(|&&k| !k).count();
        let counters = Arc::new(Counters::default());
        // At least one reader whenever the epoch has pages: a kept page found not intact
        // after all is read like any other.
        let threads = if schedule.pages.is_empty() {
            0
        } else {
            i.reader_threads.min(to_read.max(1))
        };
        let pool = if threads == 0 {
            None
        } else {
            match ReaderPool::start(
                threads,
                Arc::clone(&i.file),
                owner.writers(),
                [Arc::clone(&counters), Arc::clone(&i.totals)],
                Arc::clone(&i.live_threads),
            ) {
                Ok(p) => Some(p),
                Err(source) => {
                    self.give_back(owner);
                    return Err(Error::Setup {
                        path,
                        what: "page-reader threads",
                        source,
                    });
                }
            }
        };
        i.max_num_slots
            .fetch_max(schedule.num_slots, Ordering::Relaxed);
        Ok(ProcessEpoch {
            cache: self.clone(),
            schedule,
            kept,
            owner,
            pool,
            page_slot,
            next_batch: 0,
            counters,
            wait: Duration::ZERO,
            in_use: 0,
            peak: 0,
            aborted: None,
        })
    }

    fn give_back(&self, mut owner: SlotOwner) {
        if let Some(arena) = owner.release() {
            self.keep(arena);
        }
    }

    /// Keeps `arena` for the next epoch (or frees it if a larger one is kept).
    fn keep(&self, arena: SlotArena) {
        let mut slot = lock(&self.inner.arena);
        match slot.as_ref() {
            // Another epoch returned a larger arena meanwhile: keep that one.
            Some(kept) if kept.num_slots() >= arena.num_slots() => {
                self.inner
                    .slot_memory_bytes
                    .fetch_sub(arena.bytes(), Ordering::SeqCst);
            }
            _ => {
                if let Some(old) = slot.replace(arena) {
                    self.inner
                        .slot_memory_bytes
                        .fetch_sub(old.bytes(), Ordering::SeqCst);
                }
            }
        }
    }

    fn path(&self) -> &Path {
        self.inner.reader.path()
    }
}

/// `hold_all_pages`: grows the schedule to a slot for each of its pages if that fits
/// `budget`, and says whether it did (otherwise the ordinary schedule stands).
fn reserve_slot_per_page(schedule: &mut PageSchedule, page_size: u64, budget: u64) -> bool {
    let slots = schedule.num_slots.max(schedule.pages.len());
    let fits = (slots as u64).saturating_mul(page_size) <= budget;
    if fits {
        schedule.num_slots = slots;
    } else {
        tracing::info!(
            pages = schedule.pages.len(),
            budget,
            "hold_all_pages: the epoch's pages exceed the memory budget; using the ordinary schedule"
        );
    }
    fits
}

/// The read of `page` into `slot`: only up to the end of the page's last allocation; the
/// rest of a page is padding (or an abandoned copy) no read can ask for.
fn job_for(inner: &Inner, page: u64, slot: usize) -> Job {
    Job {
        page,
        slot,
        offset: page * inner.page_size,
        len: page_len(inner, page) as usize,
    }
}

/// Bytes a read of `page` fetches: up to the end of its last allocation, inside the file.
fn page_len(inner: &Inner, page: u64) -> u64 {
    let offset = page * inner.page_size;
    let used = inner
        .page_used
        .get(page as usize)
        .copied()
        .unwrap_or(inner.page_size);
    used.min(inner.file_size.saturating_sub(offset))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One epoch of the process cache: `start_batch(b)` in order, then `read` the samples of
/// batch `b` from any number of threads.
pub struct ProcessEpoch {
    cache: ProcessCache,
    schedule: PageSchedule,
    /// Per entry of the schedule's pages: whether its slot still holds it, intact, from
    /// the previous epoch (then it is not read again).
    kept: Vec<bool>,
    /// The slots (emptied on drop, when the arena goes back to the cache).
    owner: SlotOwner,
    /// `Some` while readers run (taken first on drop, which joins them).
    pool: Option<ReaderPool>,
    /// Slot of each page currently held, `NO_SLOT` otherwise.
    page_slot: Vec<u32>,
    next_batch: usize,
    counters: Arc<Counters>,
    wait: Duration,
    in_use: usize,
    peak: usize,
    aborted: Option<String>,
}

impl ProcessEpoch {
    /// The epoch's schedule.
    pub fn schedule(&self) -> &PageSchedule {
        &self.schedule
    }

    /// Number of batches of the epoch.
    pub fn num_batches(&self) -> usize {
        self.schedule.num_batches()
    }

    /// Releases the pages batch `b - 1` was the last to need, queues the pages that may
    /// now be prefetched, and blocks until every page batch `b` needs first is loaded.
    ///
    /// Batches must start in order `0, 1, 2, …`. After an error the epoch is over: later
    /// calls return [`Error::EpochAborted`].
    pub fn start_batch(&mut self, b: usize) -> Result<()> {
        let path = self.cache.path().to_owned();
        if let Some(cause) = &self.aborted {
            return Err(Error::EpochAborted {
                path,
                batch: b,
                cause: cause.clone(),
            });
        }
        let num_batches = self.num_batches();
        if b != self.next_batch || b >= num_batches {
            return Err(Error::BatchOutOfOrder {
                expected: self.next_batch,
                got: b,
                num_batches,
            });
        }
        let span = tracing::trace_span!("start_batch", batch = b);
        let _e = span.enter();
        let result = self.advance(b, &path);
        if let Err(e) = &result {
            self.aborted = Some(e.to_string());
        }
        self.next_batch = b + 1;
        result
    }

    fn advance(&mut self, b: usize, path: &Path) -> Result<()> {
        let inner = &self.cache.inner;
        let owner = &mut self.owner;
        for &i in &self.schedule.leaving[b] {
            let page = self.schedule.pages[i].page;
            if let Some(s) = self.page_slot.get_mut(page as usize) {
                *s = NO_SLOT;
            }
            self.in_use = self.in_use.saturating_sub(1);
        }
        let range = self.schedule.prefetch_ranges[b].clone();
        let mut jobs = Vec::with_capacity(range.len());
        for i in range {
            let sp = self.schedule.pages[i];
            let slot = sp.slot as usize;
            let kept = self.kept.get(i).copied().unwrap_or(false);
            if kept && owner.state(slot) == SlotState::Ready(sp.page) {
                // Still Ready(page) from the previous epoch: nothing wrote the slot since
                // (only a reader that claimed a Queued slot writes, and none was queued).
                // The state is checked anyway, so a schedule that got this wrong costs a
                // read, never a wait for a page nobody reads.
                if let Some(s) = self.page_slot.get_mut(sp.page as usize) {
                    *s = sp.slot;
                }
                self.in_use += 1;
                for c in [&self.counters, &inner.totals] {
                    c.pages_reused.fetch_add(1, Ordering::Relaxed);
                }
                continue;
            }
            owner
                .assign(slot, sp.page)
                .map_err(|state| Error::SlotBusy {
                    path: path.to_owned(),
                    slot,
                    page: sp.page,
                    state: format!("{state:?}"),
                })?;
            if let Some(s) = self.page_slot.get_mut(sp.page as usize) {
                *s = sp.slot;
            }
            self.in_use += 1;
            jobs.push(job_for(inner, sp.page, slot));
        }
        self.peak = self.peak.max(self.in_use);
        inner.slots_in_use.store(self.in_use, Ordering::Relaxed);
        inner.peak_slots.fetch_max(self.in_use, Ordering::Relaxed);
        if let Some(pool) = &self.pool {
            pool.submit(jobs);
        }

        let t0 = Instant::now();
        let result = self.wait_entering(b, path);
        let waited = t0.elapsed();
        self.wait += waited;
        inner
            .wait_nanos
            .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
        result
    }

    fn wait_entering(&self, b: usize, path: &Path) -> Result<()> {
        let inner = &self.cache.inner;
        let owner = &self.owner;
        let Some(pool) = self.pool.as_ref() else {
            // No pages at all in this epoch: nothing to wait for.
            return Ok(());
        };
        for &i in &self.schedule.entering[b] {
            let sp = self.schedule.pages[i];
            let slot = sp.slot as usize;
            if owner.state(slot) == SlotState::Queued(sp.page) {
                // No reader has started this page yet: read it here rather than idle.
                pool.load_now(job_for(inner, sp.page, slot));
            }
            match pool.wait(sp.page, owner, slot) {
                Wait::Ready => {}
                Wait::Failed(source) => {
                    let offset = sp.page * inner.page_size;
                    return Err(Error::PageRead {
                        path: path.to_owned(),
                        page: sp.page,
                        offset,
                        len: page_len(inner, sp.page),
                        source,
                    });
                }
                Wait::ReadersGone => {
                    return Err(Error::ReadersGone {
                        path: path.to_owned(),
                        page: sp.page,
                    });
                }
            }
        }
        Ok(())
    }

    /// The bytes of the allocation at `ptr`, from its page's slot. Callable from many
    /// threads at once; the page must be held for the current batch.
    pub fn read(&self, ptr: u64) -> Result<&[u8]> {
        let inner = &*self.cache.inner;
        // The reader's table is in memory (never the map), so a file truncated after
        // opening cannot fault here.
        let Some(size) = inner.reader.alloc_size(ptr) else {
            return Err(Error::UnknownPointer {
                path: inner.reader.path().to_owned(),
                ptr,
            });
        };
        self.read_extent(ptr, size)
    }

    /// `len` bytes at file offset `ptr` (for example a field's stored extent from its
    /// metadata), without looking the allocation up; they must lie in one page held for
    /// the current batch.
    pub fn read_extent(&self, ptr: u64, len: u64) -> Result<&[u8]> {
        let inner = &*self.cache.inner;
        let page = ptr / inner.page_size;
        let offset = (ptr % inner.page_size) as usize;
        let not_loaded = || Error::PageNotLoaded {
            path: inner.reader.path().to_owned(),
            ptr,
            page,
            batch: self.next_batch.checked_sub(1),
        };
        let crosses = || Error::AllocationCrossesPage {
            path: inner.reader.path().to_owned(),
            ptr,
            size: len,
            page,
        };
        let slot = match self.page_slot.get(page as usize) {
            Some(&s) if s != NO_SLOT => s as usize,
            _ => return Err(not_loaded()),
        };
        let bytes = if inner.file.maps_pages() {
            if !self.owner.is_ready(slot, page) {
                return Err(not_loaded());
            }
            // Resident in the reader's map (a page reader populated it).
            let start = page * inner.page_size;
            let end = (start + page_len(inner, page)).min(inner.file_size);
            inner
                .reader
                .bytes()?
                .get(start as usize..end as usize)
                .ok_or_else(crosses)?
        } else {
            self.owner.read(slot, page).ok_or_else(not_loaded)?
        };
        usize::try_from(len)
            .ok()
            .and_then(|l| bytes.get(offset..offset.checked_add(l)?))
            .ok_or_else(crosses)
    }

    /// This epoch's counters so far.
    pub fn stats(&self) -> CacheStats {
        let c = &self.counters;
        CacheStats {
            pages_loaded: c.pages_loaded.load(Ordering::Relaxed),
            pages_reused: c.pages_reused.load(Ordering::Relaxed),
            storage_bytes_read: c.storage_bytes_read.load(Ordering::Relaxed),
            page_wait: self.wait,
            slots_in_use: self.in_use,
            peak_slots_in_use: self.peak,
            num_slots: self.schedule.num_slots,
            slot_memory_bytes: self.owner.bytes(),
            page_read_errors: c.page_read_errors.load(Ordering::Relaxed),
            direct_io: self.cache.direct_io(),
        }
    }
}

impl Drop for ProcessEpoch {
    fn drop(&mut self) {
        // Stop and join the readers first: afterwards no thread holds the slots.
        drop(self.pool.take());
        self.cache.inner.slots_in_use.store(0, Ordering::Relaxed);
        if let Some(arena) = self.owner.release() {
            self.cache.keep(arena);
        }
    }
}
