//! One bounded measurement of the loader for `ffcv doctor`: build the loader with the given
//! knobs, warm up for a fifth of the time slice, then take batches (epoch after epoch) until
//! the slice is spent, and turn the loader's counters into a [`Measurement`].
//!
//! The consumer only drops each batch, as `ffcv bench` does without `--touch`: what is
//! measured is the loader alone.

use std::time::{Duration, Instant};

use ffcv::{Loader, LoaderStats, Order};
use traversal::OrderKind;

use super::args::DoctorArgs;
use super::diagnose::Measurement;
use super::tune::{Knobs, RunError};
use crate::process_counters::ProcessCounters;

/// Builds the loader `args` and `knobs` describe: the flags' loader, with the knobs the
/// search sets (workers, cache, order, queue depth, memory budget, QuasiRandom buffer) and
/// the seed on top.
pub fn build_loader(args: &DoctorArgs, knobs: &Knobs, seed: u64) -> Result<Loader, RunError> {
    let mut builder = args
        .loader
        .builder()
        .map_err(|err| RunError::other(err.to_string()))?
        .num_workers(knobs.num_workers as i64)
        .os_cache(knobs.os_cache)
        .order(Order::from(OrderKind::from(knobs.order)))
        .seed(seed)
        .batches_ahead(knobs.batches_ahead);
    if let Some(bytes) = knobs.max_memory {
        builder = builder.max_memory(bytes);
    }
    if let Some(pages) = knobs.quasi_buffer_pages {
        builder = builder.quasi_buffer_pages(pages);
    }
    builder.build().map_err(|err| RunError::from_loader(&err))
}

/// Measures `knobs` on the file for about `slice` of wall time (one batch may overrun it).
pub fn measure(
    args: &DoctorArgs,
    knobs: &Knobs,
    seed: u64,
    slice: Duration,
) -> Result<Measurement, RunError> {
    // The previous configuration's freed memory goes back first, so that what this one
    // holds is measured alone.
    super::heap::release_free_heap();
    let mut loader = build_loader(args, knobs, seed)?;
    if loader.is_empty() {
        return Err(RunError::other(format!(
            "an epoch has no full batch of {} (use --no-drop-last or a smaller --batch-size)",
            args.loader.batch_size
        )));
    }
    reset_peak_rss();
    let warm_up = slice / 5;
    let mut held = HeldMemory::default();
    take_batches(&mut loader, warm_up, &mut held)?;

    let before = loader.stats();
    let counters_before = ProcessCounters::now();
    let started = Instant::now();
    let taken = take_batches(&mut loader, slice - warm_up, &mut held)?;
    held.sample();
    let wall = started.elapsed().as_secs_f64();
    let after = loader.stats();
    let counted = counters_before.until(&ProcessCounters::now());
    Ok(Measurement {
        samples_per_sec: taken.samples as f64 / wall.max(f64::MIN_POSITIVE),
        wall_seconds: wall,
        page_wait_seconds: (after.wait_pages - before.wait_pages).as_secs_f64(),
        stage_seconds: (after.decode - before.decode).as_secs_f64(),
        slot_wait_seconds: (after.wait_slot - before.wait_slot).as_secs_f64(),
        consumer_wait_seconds: (after.consumer_wait - before.consumer_wait).as_secs_f64(),
        slot_stage_seconds: (after.slot_stage - before.slot_stage).as_secs_f64(),
        h2d_seconds: h2d_seconds(&before, &after),
        h2d_bytes: after.h2d_bytes - before.h2d_bytes,
        gpu_stage: args.loader.device != ffcv::gpu::DeviceSpec::Cpu,
        peak_rss_bytes: peak_rss_bytes(),
        peak_held_bytes: held.peak,
        workers: loader.num_workers(),
        cpu_seconds: counted.cpu_seconds,
        storage_bytes_read: after.storage_bytes_read - before.storage_bytes_read,
        memory_guard_fired: false,
        // A remote source's bytes come over sockets, which `/proc/self/io` does not count:
        // what the cache fetched from it is the storage read.
        read_bytes: if args.loader.is_remote() {
            Some(after.storage_bytes_read - before.storage_bytes_read)
        } else {
            counted.read_bytes
        },
        major_faults: counted.major_faults,
        payload_bytes: after.payload_bytes - before.payload_bytes,
        cpus: std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
    })
}

/// The device time of the window's copies: the GPU stage times every batch but the first
/// of each stage slot, so the timed batches' time is scaled to all the window's batches.
/// `None` when no batch of the window was timed (or there is no GPU stage).
fn h2d_seconds(before: &LoaderStats, after: &LoaderStats) -> Option<f64> {
    let timed = after.h2d_timed_batches - before.h2d_timed_batches;
    if timed == 0 {
        return None;
    }
    let batches = after.batches - before.batches;
    let seconds = (after.h2d_time - before.h2d_time).as_secs_f64();
    Some(seconds * batches.max(timed) as f64 / timed as f64)
}

/// What the consumer saw.
struct Taken {
    samples: u64,
}

/// The peak of the memory the process holds that the kernel cannot drop: anonymous and
/// shared pages (`RssAnon + RssShmem` of `/proc/self/status`), sampled as batches come.
/// `VmHWM` also counts the file pages the process maps (the reader maps the file, and the
/// OS cache reads samples through that map); those are the kernel's page cache, dropped
/// under pressure, so they are not memory pressure, and how many stay mapped depends on
/// the machine's load.
#[derive(Default)]
struct HeldMemory {
    peak: Option<u64>,
    last: Option<Instant>,
}

impl HeldMemory {
    /// Reads the current figure into the peak.
    fn sample(&mut self) {
        self.last = Some(Instant::now());
        if let Some(now) = held_bytes() {
            self.peak = Some(self.peak.map_or(now, |p| p.max(now)));
        }
    }

    /// Samples when the last sample is older than a few milliseconds (reading
    /// `/proc/self/status` costs tens of microseconds; batches may come faster).
    fn maybe_sample(&mut self) {
        if self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(5))
        {
            self.sample();
        }
    }
}

/// `RssAnon + RssShmem` of `/proc/self/status`, in bytes.
fn held_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = |key: &str| -> Option<u64> {
        let line = status.lines().find(|line| line.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    (kib("RssAnon:")? + kib("RssShmem:")?).checked_mul(1024)
}

/// Takes batches, epoch after epoch, until `limit` has passed (at least one batch),
/// sampling the memory held as they come.
fn take_batches(
    loader: &mut Loader,
    limit: Duration,
    held: &mut HeldMemory,
) -> Result<Taken, RunError> {
    let started = Instant::now();
    let mut taken = Taken { samples: 0 };
    loop {
        let mut epoch = loader.iter();
        loop {
            let Some(batch) = epoch.next() else {
                break;
            };
            let batch = batch.map_err(|err| RunError::from_loader(&err))?;
            taken.samples += batch.len() as u64;
            // While the batch is held: its slot counts.
            held.maybe_sample();
            drop(batch);
            if started.elapsed() >= limit {
                return Ok(taken);
            }
        }
    }
}

/// Resets the kernel's peak-RSS mark (`VmHWM`) so each run reports its own peak. Linux
/// 4.0+; elsewhere the peak stays the process's.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// `VmHWM` of `/proc/self/status`, in bytes.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}
