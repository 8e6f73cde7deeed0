//! `page-cache/*` rows: where sample bytes come from, for each order, through the
//! process cache and the OS cache.
//!
//! Two datasets of one Bytes field, written once under `out_dir` (8 MiB pages, FFCV's
//! default): 2,048 samples of 128 KiB (256 MiB) and 65,536 samples of 3 KiB (192 MiB).
//! An epoch is what a loader does: `schedule_epoch`, then per batch `start_batch` and a
//! copy of every sample's bytes into the batch buffer on a rayon pool of all CPUs.
//!
//! - `page-cache/{os,process,process-cpu-readers,process-held,process-mapped}/{order}/{size}`:
//!   warm (the file in the OS page cache), one warm-up epoch, then three timed epochs
//!   alternating the caches; median. `process` copies pages into its slots (FFCV's way,
//!   12 readers; pages still held in a slot from the epoch before are not read again,
//!   `retain_pages`), `process-cpu-readers` the same with one reader per CPU,
//!   `process-held` gives every page a slot of its own (`hold_all_pages`: later epochs
//!   read nothing), `process-mapped` serves them from the reader's map (`map_pages`).
//!   Process rows carry `ratio` = process ÷ OS throughput for the same order,
//!   `read_amplification` = bytes the page readers read in the warm-up epoch (slots
//!   empty at its start) ÷ bytes of the samples used, and
//!   `read_amplification_later_epochs` / `pages_reused` for the timed epochs.
//! - `page-cache/os-cold/{order}/{size}/{auto,none,sequential,random}`: the file evicted
//!   from the OS cache first, one epoch (bounded to 8,192 samples for 3 KiB, and to a
//!   quarter of the samples with the `random` hint) with the automatic `madvise` hint,
//!   none, or a fixed one; `storage_bytes_read` from `/proc/self/io` (what the kernel
//!   read from the device for this process, readahead included).
//! - `page-cache/process-cold/quasi-random/128k/{buffered,direct,mapped}`: cold process
//!   cache with buffered, `O_DIRECT` or mapped (`map_pages`) page reads;
//!   `os_cache_bytes_after` shows whether the epoch filled the OS page cache.
//!
//! Orders come from the traversal crate (Sequential, Random with NumPy's permutation,
//! QuasiRandom with FFCV's default buffer of `2 × batch_size` pages and with a buffer
//! of 4 pages), seed 0.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use beton_io::{DatasetWriter, FieldMetadata, FieldSpec, FieldType, FieldValue, Reader};
use page_cache::{
    Advice, CachePolicy, CacheStats, EpochContext, OsAdvice, OsConfig, PageCache, ProcessConfig,
};
use rayon::prelude::*;
use serde_json::json;
use traversal::{QuasiRandom, Random, SamplePages, TraversalOrder, default_buffer_pages};

use crate::report::Row;

/// Samples a rayon task copies at once.
const CHUNK: usize = 16;
/// Timed epochs per warm row.
const REPS: usize = 3;
/// Samples of a cold 3 KiB epoch (a full one would take seconds of 4 KiB reads).
const COLD_SMALL_SAMPLES: usize = 8192;

/// One benchmark dataset.
struct Spec {
    label: &'static str,
    sample_bytes: usize,
    samples: u64,
    batch_size: usize,
}

const SPECS: [Spec; 2] = [
    Spec {
        label: "128k",
        sample_bytes: 128 * 1024,
        samples: 2048,
        batch_size: 64,
    },
    Spec {
        label: "3k",
        sample_bytes: 3 * 1024,
        samples: 65_536,
        batch_size: 512,
    },
];

/// The orders measured; `quasi-random-buffer4` is QuasiRandom with a buffer of 4 pages
/// instead of FFCV's `2 × batch_size` (which spans every page of these small datasets,
/// so it needs as many slots as Random): it shows the slot count a buffer smaller than
/// the dataset buys.
const ORDERS: [&str; 4] = [
    "sequential",
    "random",
    "quasi-random",
    "quasi-random-buffer4",
];

/// Every `page-cache/*` row, writing its datasets under `out_dir` if needed.
pub fn rows(out_dir: &Path) -> Result<Vec<Row>, String> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for spec in &SPECS {
        let path = ensure_dataset(out_dir, spec)?;
        rows.extend(warm_rows(&path, spec, &pool, threads)?);
        rows.extend(cold_os_rows(&path, spec, &pool)?);
        if spec.label == "128k" {
            rows.extend(cold_process_rows(&path, spec, &pool)?);
        }
    }
    Ok(rows)
}

/// Writes the dataset unless a file with the same shape is already there.
fn ensure_dataset(out_dir: &Path, spec: &Spec) -> Result<PathBuf, String> {
    let path = out_dir.join(format!("page-cache-{}.beton", spec.label));
    if let Ok(r) = Reader::open(&path) {
        let first = r.alloc_rows().next().map(|row| row.size);
        if r.num_samples() == spec.samples && first == Some(spec.sample_bytes as u64) {
            return Ok(path);
        }
    }
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let size = spec.sample_bytes;
    let source = beton_io::from_fn(spec.samples, move |i| {
        let fill = (i as u8).wrapping_mul(31);
        Ok(vec![FieldValue::Bytes(vec![fill; size])])
    });
    DatasetWriter::new(&path, vec![FieldSpec::new("data", FieldType::Bytes)])
        .map_err(|e| e.to_string())?
        .write(&source)
        .map_err(|e| e.to_string())?;
    // Eviction (cold rows) only drops clean pages.
    std::fs::File::open(&path)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// The sample pointers of field 0 and the epoch orders of one dataset.
struct Plan {
    ptrs: Vec<u64>,
    sample_bytes: usize,
    batch_size: usize,
    /// `orders[o][rep]`: the samples of epoch `rep` (rep 0 is the warm-up).
    orders: Vec<Vec<Vec<u64>>>,
}

impl Plan {
    fn new(reader: &Reader, spec: &Spec) -> Result<Plan, String> {
        let n = reader.num_samples();
        let ptrs = (0..n)
            .map(|s| match reader.metadata(s, 0) {
                Ok(FieldMetadata::Bytes { ptr, .. }) => Ok(ptr),
                Ok(other) => Err(format!("sample {s}: unexpected metadata {other:?}")),
                Err(e) => Err(e.to_string()),
            })
            .collect::<Result<Vec<u64>, String>>()?;
        let indices: Vec<u64> = (0..n).collect();
        let pages =
            SamplePages::from_fn(n, |s| reader.page_map().pages_of_sample(s).first().copied());
        let random = Random::all(n, 0);
        let quasi = QuasiRandom::new(&indices, &pages, 0, default_buffer_pages(spec.batch_size))
            .map_err(|e| e.to_string())?;
        let quasi4 = QuasiRandom::new(&indices, &pages, 0, 4).map_err(|e| e.to_string())?;
        let epochs = 0..=REPS as u64;
        let orders = vec![
            epochs.clone().map(|_| indices.clone()).collect(),
            epochs.clone().map(|e| random.order(e)).collect(),
            epochs.clone().map(|e| quasi.order(e)).collect(),
            epochs.map(|e| quasi4.order(e)).collect(),
        ];
        Ok(Plan {
            ptrs,
            sample_bytes: spec.sample_bytes,
            batch_size: spec.batch_size,
            orders,
        })
    }

    fn batches(&self, order: &[u64]) -> Vec<Vec<u64>> {
        order.chunks(self.batch_size).map(<[u64]>::to_vec).collect()
    }
}

/// What one epoch measured.
struct Epoch {
    seconds: f64,
    samples: usize,
    stats: CacheStats,
}

/// Runs one epoch: schedule, then per batch `start_batch` and a parallel copy of every
/// sample into the batch buffer.
fn run_epoch(
    cache: &PageCache,
    plan: &Plan,
    order: &[u64],
    pool: &rayon::ThreadPool,
    out: &mut [u8],
) -> Result<Epoch, String> {
    let batches = plan.batches(order);
    let started = Instant::now();
    let mut ctx = cache.schedule_epoch(&batches).map_err(|e| e.to_string())?;
    for (b, batch) in batches.iter().enumerate() {
        ctx.start_batch(b).map_err(|e| e.to_string())?;
        copy_batch(&ctx, plan, batch, pool, out)?;
    }
    let stats = ctx.stats();
    drop(ctx);
    Ok(Epoch {
        seconds: started.elapsed().as_secs_f64(),
        samples: order.len(),
        stats,
    })
}

fn copy_batch(
    ctx: &EpochContext,
    plan: &Plan,
    batch: &[u64],
    pool: &rayon::ThreadPool,
    out: &mut [u8],
) -> Result<(), String> {
    let size = plan.sample_bytes;
    pool.install(|| {
        out[..batch.len() * size]
            .par_chunks_mut(CHUNK * size)
            .zip(batch.par_chunks(CHUNK))
            .try_for_each(|(dst, samples)| {
                for (d, &s) in dst.chunks_mut(size).zip(samples) {
                    let bytes = ctx.read(plan.ptrs[s as usize]).map_err(|e| e.to_string())?;
                    d[..bytes.len()].copy_from_slice(bytes);
                }
                black_box(dst);
                Ok(())
            })
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn seconds_summary(v: &[f64]) -> serde_json::Value {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    json!({"min": s.first(), "median": median(s.clone()), "max": s.last()})
}

fn warm_rows(
    path: &Path,
    spec: &Spec,
    pool: &rayon::ThreadPool,
    threads: usize,
) -> Result<Vec<Row>, String> {
    let reader = Arc::new(Reader::open(path).map_err(|e| e.to_string())?);
    let plan = Plan::new(&reader, spec)?;
    // (row prefix, configuration); the first is the OS cache every ratio refers to.
    let variants = [
        ("os", "os_cache", CachePolicy::default()),
        (
            "process",
            "process cache (prefetch 3, 12 readers, pages copied)",
            CachePolicy::Process(ProcessConfig::default()),
        ),
        (
            "process-cpu-readers",
            "process cache (prefetch 3, one reader per CPU, pages copied)",
            CachePolicy::Process(ProcessConfig {
                reader_threads: threads,
                ..ProcessConfig::default()
            }),
        ),
        (
            "process-held",
            "process cache (prefetch 3, 12 readers, pages copied, a slot per page: hold_all_pages)",
            CachePolicy::Process(ProcessConfig {
                hold_all_pages: true,
                ..ProcessConfig::default()
            }),
        ),
        (
            "process-mapped",
            "process cache (prefetch 3, 12 readers, pages mapped: map_pages)",
            CachePolicy::Process(ProcessConfig {
                map_pages: true,
                ..ProcessConfig::default()
            }),
        ),
    ];
    let mut out = vec![0u8; spec.batch_size * spec.sample_bytes];
    let mut rows = Vec::new();
    for (o, name) in ORDERS.iter().enumerate() {
        // Fresh caches per order: slots still holding the previous order's pages would
        // hide this order's reads.
        let caches = variants
            .iter()
            .map(|(_, _, config)| PageCache::new(Arc::clone(&reader), config))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let epochs = &plan.orders[o];
        // Warm-up: fills the OS page cache and each process cache's slot memory.
        // Its reads are each order's own cost: the slots start empty (later epochs may
        // find pages still held from the epoch before, `retain_pages`).
        let mut first = Vec::with_capacity(caches.len());
        for cache in &caches {
            first.push(run_epoch(cache, &plan, &epochs[0], pool, &mut out)?);
        }
        let mut secs = vec![Vec::new(); caches.len()];
        let mut stats = vec![CacheStats::default(); caches.len()];
        // The caches alternate inside every repetition, so a busy moment of the machine
        // hits them alike and their ratio stays fair.
        for order in &epochs[1..] {
            for (c, cache) in caches.iter().enumerate() {
                let e = run_epoch(cache, &plan, order, pool, &mut out)?;
                secs[c].push(e.seconds);
                stats[c] = e.stats;
            }
        }
        let samples = epochs[1].len();
        let used_bytes = (samples * spec.sample_bytes) as f64;
        let sps: Vec<f64> = secs
            .iter()
            .map(|s| samples as f64 / median(s.clone()))
            .collect();
        for (c, (prefix, what, _)) in variants.iter().enumerate() {
            let mut row = Row {
                name: format!("page-cache/{prefix}/{name}/{}", spec.label),
                config: format!(
                    "{} samples of {} B, batch {}, {threads} threads, file in the OS page cache, order {name}, {what}",
                    spec.samples, spec.sample_bytes, spec.batch_size
                ),
                samples_per_sec: sps[c],
                bytes_per_sec: sps[c] * spec.sample_bytes as f64,
                ..Row::default()
            };
            let x = &mut row.extra;
            x.insert("epoch_seconds".into(), seconds_summary(&secs[c]));
            if let PageCache::Os(os) = &caches[c] {
                let advice = os.advice_for(&plan.batches(&epochs[1]));
                x.insert("madvise".into(), json!(format!("{advice:?}")));
            } else {
                row.ratio = Some(sps[c] / sps[0]);
                row.ratio_to = Some("os-cache".into());
                let st = &stats[c];
                let first_used = (first[c].samples * spec.sample_bytes) as f64;
                x.insert(
                    "read_amplification".into(),
                    json!(first[c].stats.storage_bytes_read as f64 / first_used),
                );
                x.insert(
                    "read_amplification_later_epochs".into(),
                    json!(st.storage_bytes_read as f64 / used_bytes),
                );
                x.insert("storage_bytes_read".into(), json!(st.storage_bytes_read));
                x.insert("pages_loaded".into(), json!(st.pages_loaded));
                x.insert("pages_reused".into(), json!(st.pages_reused));
                x.insert("num_slots".into(), json!(st.num_slots));
                x.insert("slot_memory_bytes".into(), json!(st.slot_memory_bytes));
                x.insert(
                    "page_wait_ms".into(),
                    json!(st.page_wait.as_secs_f64() * 1e3),
                );
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Bytes this process has caused to be read from storage (`/proc/self/io`).
fn storage_read_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

fn cold_os_rows(path: &Path, spec: &Spec, pool: &rayon::ThreadPool) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let limit = if spec.sample_bytes < 64 * 1024 {
        COLD_SMALL_SAMPLES
    } else {
        usize::MAX
    };
    let advices = [
        ("auto", OsAdvice::Auto),
        ("none", OsAdvice::Off),
        ("sequential", OsAdvice::Fixed(Advice::Sequential)),
        ("random", OsAdvice::Fixed(Advice::Random)),
    ];
    for (o, name) in ORDERS.iter().enumerate().take(2) {
        for (label, advice) in advices {
            page_cache::evict_from_os_cache(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            // A fresh reader: a live map keeps faulted pages in the OS cache.
            let reader = Arc::new(Reader::open(path).map_err(|e| e.to_string())?);
            let plan = Plan::new(&reader, spec)?;
            // 128 KiB samples without readahead fault in 4 KiB at a time (seconds per
            // epoch): a quarter of the epoch shows it.
            let limit = if matches!(advice, OsAdvice::Fixed(Advice::Random)) {
                limit.min(spec.samples as usize / 4)
            } else {
                limit
            };
            let order: Vec<u64> = plan.orders[o][1].iter().copied().take(limit).collect();
            let config = CachePolicy::Os(OsConfig { advice });
            let cache = PageCache::new(Arc::clone(&reader), &config).map_err(|e| e.to_string())?;
            let chosen = match &cache {
                PageCache::Os(c) => format!("{:?}", c.advice_for(&plan.batches(&order))),
                PageCache::Process(_) => String::new(),
            };
            let mut out = vec![0u8; spec.batch_size * spec.sample_bytes];
            let before = storage_read_bytes();
            let e = run_epoch(&cache, &plan, &order, pool, &mut out)?;
            let read = storage_read_bytes()
                .zip(before)
                .map(|(a, b)| a.saturating_sub(b));
            let used = (e.samples * spec.sample_bytes) as f64;
            let sps = e.samples as f64 / e.seconds;
            let mut row = Row {
                name: format!("page-cache/os-cold/{name}/{}/{label}", spec.label),
                config: format!(
                    "{} of {} samples of {} B, batch {}, file evicted from the OS cache, madvise {label} ({chosen})",
                    e.samples, spec.samples, spec.sample_bytes, spec.batch_size
                ),
                samples_per_sec: sps,
                bytes_per_sec: sps * spec.sample_bytes as f64,
                ..Row::default()
            };
            row.extra.insert("epoch_seconds".into(), json!(e.seconds));
            row.extra.insert("madvise".into(), json!(chosen));
            if let Some(read) = read {
                row.extra.insert("storage_bytes_read".into(), json!(read));
                row.extra
                    .insert("read_amplification".into(), json!(read as f64 / used));
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

fn cold_process_rows(
    path: &Path,
    spec: &Spec,
    pool: &rayon::ThreadPool,
) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (label, direct_io, map_pages) in [
        ("buffered", false, false),
        ("direct", true, false),
        ("mapped", false, true),
    ] {
        page_cache::evict_from_os_cache(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let reader = Arc::new(Reader::open(path).map_err(|e| e.to_string())?);
        let plan = Plan::new(&reader, spec)?;
        let config = CachePolicy::Process(ProcessConfig {
            direct_io,
            map_pages,
            ..ProcessConfig::default()
        });
        let cache = PageCache::new(Arc::clone(&reader), &config).map_err(|e| e.to_string())?;
        let fallback = match &cache {
            PageCache::Process(c) => c.direct_io_fallback().map(str::to_owned),
            PageCache::Os(_) => None,
        };
        let mut out = vec![0u8; spec.batch_size * spec.sample_bytes];
        let cached_before = page_cache::os_cached_bytes(path).ok();
        let e = run_epoch(&cache, &plan, &plan.orders[2][1], pool, &mut out)?;
        let cached_after = page_cache::os_cached_bytes(path).ok();
        let used = (e.samples * spec.sample_bytes) as f64;
        let sps = e.samples as f64 / e.seconds;
        let mut row = Row {
            name: format!(
                "page-cache/process-cold/quasi-random/{}/{label}",
                spec.label
            ),
            config: format!(
                "{} samples of {} B, batch {}, file evicted from the OS cache, process cache with {label} page reads",
                e.samples, spec.sample_bytes, spec.batch_size
            ),
            samples_per_sec: sps,
            bytes_per_sec: sps * spec.sample_bytes as f64,
            ..Row::default()
        };
        let x = &mut row.extra;
        x.insert("epoch_seconds".into(), json!(e.seconds));
        x.insert("direct_io".into(), json!(e.stats.direct_io));
        x.insert("direct_io_fallback".into(), json!(fallback));
        x.insert(
            "storage_bytes_read".into(),
            json!(e.stats.storage_bytes_read),
        );
        x.insert(
            "read_amplification".into(),
            json!(e.stats.storage_bytes_read as f64 / used),
        );
        x.insert("os_cache_bytes_before".into(), json!(cached_before));
        x.insert("os_cache_bytes_after".into(), json!(cached_after));
        x.insert(
            "page_wait_ms".into(),
            json!(e.stats.page_wait.as_secs_f64() * 1e3),
        );
        rows.push(row);
    }
    Ok(rows)
}
