//! Page-reader threads: whole pages read with positional reads into their slots.
//!
//! The consumer queues jobs (page, slot) in the order the schedule allows them; each
//! thread pops one, reads the page into the slot through [`SlotWriters::fill`], counts
//! it and wakes the consumer. Errors are kept per page for the consumer to report.
//! Dropping the pool stops the threads (queued jobs are abandoned) and joins them.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use beton_io::Reader;

use crate::page_slots::{Fill, SlotOwner, SlotState, SlotWriters};
use crate::source::PageSource;

/// Alignment `O_DIRECT` needs for offsets, lengths and buffers on common filesystems.
pub(crate) const DIRECT_ALIGN: usize = 4096;

/// The file as the page readers see it: a descriptor of its own, possibly `O_DIRECT`.
pub(crate) struct PageFile {
    file: File,
    direct: bool,
    /// With `map_pages`: the reader whose map serves the pages; readers only make them
    /// resident (never with `direct`).
    map: Option<Arc<Reader>>,
    /// Set for a file that is not local (an object in a store): every page read goes
    /// through it, and `file` is unused.
    source: Option<Arc<dyn PageSource>>,
    path: PathBuf,
}

impl PageFile {
    /// Opens `path` for positional reads. With `direct`, tries `O_DIRECT` and probes one
    /// aligned read; if the filesystem refuses, falls back to buffered reads and
    /// returns why in the second value.
    pub(crate) fn open(
        path: &Path,
        direct: bool,
        map: Option<Arc<Reader>>,
    ) -> io::Result<(PageFile, Option<String>)> {
        let buffered = || {
            File::open(path).map(|file| PageFile {
                file,
                direct: false,
                map: map.clone(),
                source: None,
                path: path.to_owned(),
            })
        };
        if !direct {
            return Ok((buffered()?, None));
        }
        match open_direct(path) {
            Ok(file) => {
                let pf = PageFile {
                    file,
                    direct: true,
                    map: None,
                    source: None,
                    path: path.to_owned(),
                };
                // Some filesystems accept the flag at open and refuse the reads.
                // An anonymous mapping is page-aligned, as O_DIRECT wants.
                let mut probe = memmap2::MmapMut::map_anon(DIRECT_ALIGN)?;
                match pf.file.read_at(&mut probe[..], 0) {
                    Ok(_) => Ok((pf, None)),
                    Err(e) => Ok((buffered()?, Some(format!("O_DIRECT read refused: {e}")))),
                }
            }
            Err(e) => Ok((buffered()?, Some(format!("O_DIRECT open refused: {e}")))),
        }
    }

    /// Page reads through `source` (a remote object): no descriptor of our own, no
    /// `O_DIRECT`, no map.
    pub(crate) fn from_source(source: Arc<dyn PageSource>) -> io::Result<PageFile> {
        // Never read: every read_page goes to the source. /dev/null keeps the field a
        // plain File instead of an Option threaded through the local paths.
        let file = File::open("/dev/null")?;
        Ok(PageFile {
            file,
            direct: false,
            map: None,
            path: PathBuf::from(source.name()),
            source: Some(source),
        })
    }

    /// The remote source pages are read from, if any.
    pub(crate) fn source(&self) -> Option<&Arc<dyn PageSource>> {
        self.source.as_ref()
    }

    /// Whether reads bypass the OS page cache.
    pub(crate) fn is_direct(&self) -> bool {
        self.direct
    }

    /// Whether pages are served from the reader's map rather than copied.
    pub(crate) fn maps_pages(&self) -> bool {
        self.map.is_some()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads `len` bytes at `offset` into the start of `buf` (`len <= buf.len()`);
    /// returns the bytes transferred from storage (more than `len` with `O_DIRECT`,
    /// which reads whole 4 KiB blocks).
    fn read_page(&self, buf: &mut [u8], offset: u64, len: usize) -> io::Result<usize> {
        if let Some(source) = &self.source {
            source.read_at(offset, &mut buf[..len])?;
            return Ok(len);
        }
        if !self.direct {
            // Measured: a cold 8 MiB pread in small readahead windows is several times
            // slower than after asking for the whole range at once.
            crate::advice::will_need(&self.file, offset, len);
            self.file.read_exact_at(&mut buf[..len], offset)?;
            return Ok(len);
        }
        // O_DIRECT: aligned offset (pages are multiples of 4 KiB), aligned length (round
        // up: the kernel stops at the end of the file), aligned buffer (slots are).
        let want = len.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let want = want.min(buf.len());
        let mut done = 0;
        while done < len {
            let n = self
                .file
                .read_at(&mut buf[done..want], offset + done as u64)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("file ends {done} bytes into a {len}-byte page"),
                ));
            }
            done += n;
            if done < len && !done.is_multiple_of(DIRECT_ALIGN) {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("short direct read: {done} of {len} bytes"),
                ));
            }
        }
        Ok(done)
    }
}

#[cfg(target_os = "linux")]
fn open_direct(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

#[cfg(not(target_os = "linux"))]
fn open_direct(_path: &Path) -> io::Result<File> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "O_DIRECT is only used on Linux",
    ))
}

/// Counters the readers update (one set per epoch, one per cache).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) pages_loaded: AtomicU64,
    /// Pages served from a slot kept from the previous epoch (not read).
    pub(crate) pages_reused: AtomicU64,
    pub(crate) storage_bytes_read: AtomicU64,
    pub(crate) page_read_errors: AtomicU64,
}

/// One page to read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job {
    pub(crate) page: u64,
    pub(crate) slot: usize,
    pub(crate) offset: u64,
    pub(crate) len: usize,
}

struct Queue {
    jobs: VecDeque<Job>,
    stop: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    work: Condvar,
    /// Held while a reader announces a finished page; the consumer re-checks slot
    /// states under it before sleeping, so no wake-up is lost.
    done: Mutex<()>,
    done_cv: Condvar,
    /// Set if a reader thread ended without being asked to (a panic).
    dead: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a reader panicked; the data (a queue, a map) stays
    // consistent, and `dead` reports the panic.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How a wait for a page ended.
pub(crate) enum Wait {
    Ready,
    Failed(Arc<io::Error>),
    ReadersGone,
}

/// The running page readers of one epoch.
pub(crate) struct ReaderPool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// What the consumer uses to load a page itself (see [`ReaderPool::load_now`]).
    inline: ThreadCtx,
}

impl ReaderPool {
    /// Starts `n` reader threads.
    pub(crate) fn start(
        n: usize,
        file: Arc<PageFile>,
        writers: SlotWriters,
        counters: [Arc<Counters>; 2],
        live: Arc<AtomicUsize>,
    ) -> io::Result<ReaderPool> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                stop: false,
            }),
            work: Condvar::new(),
            done: Mutex::new(()),
            done_cv: Condvar::new(),
            dead: AtomicBool::new(false),
        });
        let inline = ThreadCtx {
            shared: Arc::clone(&shared),
            file: Arc::clone(&file),
            writers: writers.clone(),
            counters: counters.clone(),
            live: Arc::clone(&live),
        };
        let mut pool = ReaderPool {
            shared,
            threads: Vec::with_capacity(n),
            inline,
        };
        for i in 0..n {
            let ctx = ThreadCtx {
                shared: Arc::clone(&pool.shared),
                file: Arc::clone(&file),
                writers: writers.clone(),
                counters: counters.clone(),
                live: Arc::clone(&live),
            };
            live.fetch_add(1, Ordering::SeqCst);
            let spawned = std::thread::Builder::new()
                .name(format!("page-reader-{i}"))
                .spawn(move || ctx.run());
            match spawned {
                Ok(h) => pool.threads.push(h),
                Err(e) => {
                    live.fetch_sub(1, Ordering::SeqCst);
                    // Dropping the pool stops and joins the threads already started.
                    return Err(e);
                }
            }
        }
        Ok(pool)
    }

    /// Queues page reads, in order.
    pub(crate) fn submit(&self, jobs: impl IntoIterator<Item = Job>) {
        let mut q = lock(&self.shared.queue);
        let before = q.jobs.len();
        q.jobs.extend(jobs);
        let added = q.jobs.len() - before;
        drop(q);
        match added {
            0 => {}
            1 => self.shared.work.notify_one(),
            _ => self.shared.work.notify_all(),
        }
    }

    /// Loads a queued page on the calling thread, if no reader has claimed it yet: a
    /// consumer about to wait for a page does the read itself instead of sleeping until
    /// a reader thread gets to it (the reader that pops the job later finds it done).
    pub(crate) fn load_now(&self, job: Job) {
        self.inline.load(job);
    }

    /// Blocks until `page` is ready or failed in `slot` of `owner`.
    pub(crate) fn wait(&self, page: u64, owner: &SlotOwner, slot: usize) -> Wait {
        let check = || match owner.state(slot) {
            SlotState::Ready(p) if p == page => Some(Wait::Ready),
            SlotState::Failed(p) if p == page => {
                Some(Wait::Failed(owner.error(slot).unwrap_or_else(|| {
                    Arc::new(io::Error::other("page read failed"))
                })))
            }
            _ => None,
        };
        if let Some(w) = check() {
            return w;
        }
        let mut guard = lock(&self.shared.done);
        loop {
            if let Some(w) = check() {
                return w;
            }
            if self.shared.dead.load(Ordering::SeqCst) {
                return Wait::ReadersGone;
            }
            guard = self
                .shared
                .done_cv
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Drop for ReaderPool {
    fn drop(&mut self) {
        {
            let mut q = lock(&self.shared.queue);
            q.stop = true;
            q.jobs.clear();
        }
        self.shared.work.notify_all();
        for h in self.threads.drain(..) {
            // A reader that panicked has already reported it through `dead`.
            let _ = h.join();
        }
    }
}

struct ThreadCtx {
    shared: Arc<Shared>,
    file: Arc<PageFile>,
    writers: SlotWriters,
    counters: [Arc<Counters>; 2],
    live: Arc<AtomicUsize>,
}

/// Decrements the live-thread count and, if the thread is unwinding, tells the
/// consumer so it stops waiting.
struct ExitGuard<'a>(&'a ThreadCtx);

impl Drop for ExitGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.shared.dead.store(true, Ordering::SeqCst);
            let _g = lock(&self.0.shared.done);
            self.0.shared.done_cv.notify_all();
        }
        self.0.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ThreadCtx {
    fn run(self) {
        let _exit = ExitGuard(&self);
        loop {
            let job = {
                let mut q = lock(&self.shared.queue);
                loop {
                    if q.stop {
                        return;
                    }
                    if let Some(job) = q.jobs.pop_front() {
                        break job;
                    }
                    q = self
                        .shared
                        .work
                        .wait(q)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            };
            self.load(job);
        }
    }

    fn load(&self, job: Job) {
        let span = tracing::trace_span!("page_load", page = job.page, slot = job.slot);
        let _e = span.enter();
        let file = &self.file;
        let transferred = std::cell::Cell::new(job.len);
        // Counted before the slot is published, so a consumer that sees the page ready
        // (or failed) also sees it counted.
        let account = |ok: bool| {
            for c in &self.counters {
                if ok {
                    c.pages_loaded.fetch_add(1, Ordering::Relaxed);
                    c.storage_bytes_read
                        .fetch_add(transferred.get() as u64, Ordering::Relaxed);
                } else {
                    c.page_read_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        };
        let outcome = if let Some(reader) = &file.map {
            // The page stays where the reader's map has it; only make it resident.
            self.writers.fill(
                job.slot,
                job.page,
                |_| {
                    let start = usize::try_from(job.offset).unwrap_or(usize::MAX);
                    let bytes = reader.bytes().map_err(io::Error::other)?;
                    crate::advice::populate(bytes, start, job.len)?;
                    Ok(0)
                },
                &account,
            )
        } else {
            self.writers.fill(
                job.slot,
                job.page,
                |buf| {
                    if job.len > buf.len() {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!(
                                "page of {} bytes exceeds the {}-byte slot",
                                job.len,
                                buf.len()
                            ),
                        ));
                    }
                    transferred.set(file.read_page(buf, job.offset, job.len)?);
                    Ok(job.len)
                },
                &account,
            )
        };
        match outcome {
            Fill::Done => {}
            Fill::Failed(e) => {
                tracing::warn!(
                    path = %self.file.path().display(),
                    page = job.page,
                    offset = job.offset,
                    error = %e,
                    "page read failed"
                );
            }
            Fill::NotQueued => return,
        }
        let _g = lock(&self.shared.done);
        self.shared.done_cv.notify_all();
    }
}
