//! `ffcv bench FILE [loader knobs] [--decoder FIELD=SPEC] [--transform FIELD=OPS]
//! [--epochs N] [--warmup N] [--json] [--touch]`: a bounded measurement of the loader.
//!
//! Builds the loader, runs `--warmup` epochs, then `--epochs` timed epochs, and reports the
//! median over the timed epochs of: `samples_per_sec`, `bytes_per_sec` (stored payload of
//! the enabled fields), `epoch_seconds`, batch latency `latency_p50_ms`/`latency_p99_ms`
//! (how long the consumer waited in `next()`), `storage_bytes_read` (from `/proc/self/io`:
//! reads that reached the device; the process cache's counter where that file is
//! unreadable, and for a remote source (`"remote": true`), whose reads are network
//! requests the kernel does not count as storage reads), `cache_bytes_read` (what the process cache read, from storage or the OS's
//! page cache; 0 with the OS cache), and where the producer's
//! time went: `wait_pages_seconds`, `decode_seconds`, `wait_slot_seconds` (waiting for the
//! consumer), `slot_stage_seconds` (host time in the slot stage, e.g. enqueueing GPU
//! copies); the consumer's side: `consumer_wait_seconds` (time inside the iterator waiting
//! for batches, from the loader's counter); the GPU stage's copies: `h2d_bytes` and
//! `h2d_seconds` (device time measured with CUDA events, scaled from the timed batches to
//! every batch of the epoch; both 0 without a GPU stage); plus the process's
//! `peak_rss_bytes`. Whether the run waits on the disk or computes, from the kernel's
//! counters: `major_faults` (page faults that read from storage, `/proc/self/stat`),
//! `read_amplification` (`storage_bytes_read` over the stored payload of the epoch's
//! samples; 1.0 reads each byte once, a warm cache reads 0) and `cpu_utilisation`
//! (process CPU time over wall time times the CPUs this process may use, 0 to 1; also
//! `cpu_seconds`). `memory_limit_bytes`, `memory_available_bytes` and `memory_bound`
//! (`cgroup` or `physical`) are the memory this process may use, its cgroup's limit
//! included. The consumer only touches each batch unless `--touch` asks it to read every
//! byte.
//!
//! Resuming: `--resume STATE.json` continues a saved loader state (the first epoch run is
//! the rest of the state's epoch); `--stop-after N --save-state STATE.json` consumes N
//! batches of the first epoch (fewer if it ends first), writes the loader state and
//! reports the epoch, the batches and the sample ids consumed, without timing anything.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ffcv::{Loader, LoaderStats};
use serde_json::json;

use crate::error::CliError;
use crate::loader_args::LoaderArgs;
use crate::process_counters::{ProcessCounters, cpu_utilisation, read_amplification};

/// Arguments of `ffcv bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The dataset and the loader's knobs (shared with `ffcv doctor`).
    #[command(flatten)]
    pub loader: LoaderArgs,

    /// Timed epochs.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub epochs: u64,

    /// Untimed epochs first.
    #[arg(long, default_value_t = 1)]
    pub warmup: u64,

    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,

    /// Read every byte of every batch (default: only touch each batch).
    #[arg(long)]
    pub touch: bool,

    /// Continue from a loader state written by --save-state (the same file, order, seed,
    /// batch size and drop-last; any workers, cache, world size).
    #[arg(long, value_name = "STATE.json")]
    pub resume: Option<PathBuf>,

    /// Consume N batches of the first epoch, write the loader state to --save-state and
    /// stop (no timed epochs).
    #[arg(long, value_name = "N", requires = "save_state")]
    pub stop_after: Option<u64>,

    /// Where --stop-after writes the loader state.
    #[arg(long, value_name = "STATE.json", requires = "stop_after")]
    pub save_state: Option<PathBuf>,
}

/// One timed epoch.
#[derive(Debug, Clone, Default)]
struct EpochFigures {
    seconds: f64,
    samples: u64,
    payload_bytes: u64,
    latency_p50_ms: f64,
    latency_p99_ms: f64,
    storage_bytes_read: u64,
    cache_bytes_read: u64,
    wait_pages: f64,
    decode: f64,
    wait_slot: f64,
    slot_stage: f64,
    consumer_wait: f64,
    h2d_seconds: f64,
    h2d_bytes: u64,
    major_faults: u64,
    cpu_seconds: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The `q`-quantile (0..=1) of sorted durations, nearest rank.
fn quantile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}

/// `VmHWM` of `/proc/self/status`: the peak resident set size.
fn peak_rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

fn consume(batch: &ffcv::Batch, touch: bool) -> u64 {
    let mut acc = batch.len() as u64;
    for info in batch.outputs() {
        let Ok(out) = batch.output(&info.name) else {
            continue;
        };
        let bytes = out.bytes();
        if touch {
            for chunk in bytes.chunks(8) {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                acc = acc.wrapping_add(u64::from_ne_bytes(word));
            }
        } else if let Some(&b) = bytes.first() {
            acc = acc.wrapping_add(u64::from(b));
        }
    }
    acc
}

/// The bytes an epoch read from storage: the kernel's count of device reads for a local
/// file (`None` where `/proc/self/io` is unreadable), else the process cache's count of
/// bytes read from its source. A remote source's bytes arrive over sockets, which
/// `/proc/self/io` does not count as reads, so for it only the cache's counter is true.
pub fn storage_bytes(remote: bool, kernel_read: Option<u64>, cache_read: u64) -> u64 {
    match kernel_read {
        Some(read) if !remote => read,
        _ => cache_read,
    }
}

fn run_epoch(loader: &mut Loader, touch: bool, remote: bool) -> Result<EpochFigures, ffcv::Error> {
    let before: LoaderStats = loader.stats();
    let counters_before = ProcessCounters::now();
    let mut latencies = Vec::with_capacity(loader.len());
    let mut sink = 0u64;
    let loader_path = loader.reader().path().to_owned();
    let start = Instant::now();
    {
        let mut it = loader.iter();
        loop {
            let t = Instant::now();
            let Some(item) = it.next() else { break };
            let batch = item?;
            if let Some(gpu) = batch.attachment::<ffcv::gpu::GpuBatch>() {
                // A GPU batch counts once its copy to the device is done.
                gpu.synchronize().map_err(|e| ffcv::Error::SlotStage {
                    path: loader_path.clone(),
                    batch: batch.index(),
                    message: e.to_string(),
                    cause: None,
                })?;
            }
            latencies.push(t.elapsed());
            sink = sink.wrapping_add(consume(&batch, touch));
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    std::hint::black_box(sink);
    let after = loader.stats();
    let counted = counters_before.until(&ProcessCounters::now());
    latencies.sort_unstable();
    let storage_bytes_read = storage_bytes(
        remote,
        counted.read_bytes,
        after.storage_bytes_read - before.storage_bytes_read,
    );
    Ok(EpochFigures {
        seconds,
        samples: after.samples - before.samples,
        payload_bytes: after.payload_bytes - before.payload_bytes,
        latency_p50_ms: quantile_ms(&latencies, 0.5),
        latency_p99_ms: quantile_ms(&latencies, 0.99),
        storage_bytes_read,
        cache_bytes_read: after.storage_bytes_read - before.storage_bytes_read,
        wait_pages: (after.wait_pages - before.wait_pages).as_secs_f64(),
        decode: (after.decode - before.decode).as_secs_f64(),
        wait_slot: (after.wait_slot - before.wait_slot).as_secs_f64(),
        slot_stage: (after.slot_stage - before.slot_stage).as_secs_f64(),
        consumer_wait: (after.consumer_wait - before.consumer_wait).as_secs_f64(),
        h2d_seconds: h2d_seconds(&before, &after),
        h2d_bytes: after.h2d_bytes - before.h2d_bytes,
        major_faults: counted.major_faults.unwrap_or(0),
        cpu_seconds: counted.cpu_seconds.unwrap_or(0.0),
    })
}

/// Device time of the GPU copies between two snapshots: the stage times every batch but
/// the first of each stage slot, so the timed batches' time is scaled to all batches. 0
/// when no batch was timed (no GPU stage, or too few batches).
fn h2d_seconds(before: &LoaderStats, after: &LoaderStats) -> f64 {
    let timed = after.h2d_timed_batches - before.h2d_timed_batches;
    if timed == 0 {
        return 0.0;
    }
    let batches = (after.batches - before.batches).max(timed);
    (after.h2d_time - before.h2d_time).as_secs_f64() * batches as f64 / timed as f64
}

fn build(args: &BenchArgs) -> Result<Loader, Box<dyn std::error::Error + Send + Sync>> {
    let state = match &args.resume {
        Some(path) => Some(crate::state_file::read(path)?),
        None => None,
    };
    // A mixture's order needs the seed before the loader exists: the state's, unless given.
    let mut b = args
        .loader
        .builder_seeded(state.as_ref().map(|s| s.seed()))?;
    if let Some(state) = state {
        b = b.resume(state);
    }
    Ok(b.build()?)
}

/// `--stop-after N --save-state PATH`: consumes up to N batches of the next epoch, writes
/// the state after them and reports what was consumed.
fn stop_and_save(
    loader: &mut Loader,
    args: &BenchArgs,
    stop_after: u64,
    path: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let epoch = loader.next_epoch();
    let mut ids = Vec::new();
    let mut batches = 0u64;
    let state = {
        let mut it = loader.iter();
        while batches < stop_after {
            let Some(item) = it.next() else { break };
            let batch = item?;
            ids.extend_from_slice(batch.sample_ids());
            batches += 1;
        }
        it.state()
    };
    crate::state_file::write(path, &state)?;
    let report = json!({
        "file": args.loader.file.display().to_string(),
        "epoch": epoch,
        "batches_consumed": batches,
        "seed": loader.seed(),
        "state": path.display().to_string(),
        "state_epoch": state.epoch(),
        "sample_ids": ids,
    });
    if args.json {
        println!("{report}");
    } else {
        println!(
            "{}: consumed {batches} batches of epoch {epoch}; loader state written to {}",
            args.loader.file.display(),
            path.display()
        );
    }
    Ok(())
}

/// Runs `ffcv bench`.
pub fn run(args: &BenchArgs) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut loader = build(args)?;
    if loader.is_empty() {
        return Err(CliError::Usage(format!(
            "{}: an epoch has no batch with --batch-size {} (add --no-drop-last or lower it)",
            args.loader.file.display(),
            args.loader.batch_size
        ))
        .into());
    }
    if let (Some(n), Some(path)) = (args.stop_after, &args.save_state) {
        return stop_and_save(&mut loader, args, n, path);
    }
    let remote = args.loader.is_remote();
    for _ in 0..args.warmup {
        run_epoch(&mut loader, args.touch, remote)?;
    }
    let mut epochs = Vec::new();
    for _ in 0..args.epochs {
        epochs.push(run_epoch(&mut loader, args.touch, remote)?);
    }
    let m = |f: fn(&EpochFigures) -> f64| median(epochs.iter().map(f).collect());
    let samples_per_sec = m(|e| e.samples as f64 / e.seconds.max(1e-12));
    let bytes_per_sec = m(|e| e.payload_bytes as f64 / e.seconds.max(1e-12));
    // The memory this process may use, its cgroup's limit included (read after the run:
    // `available` then says what the epochs left).
    let memory = ffcv::page_cache::memory_facts();
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let amplification =
        m(|e| read_amplification(e.storage_bytes_read, e.payload_bytes).unwrap_or(0.0));
    let utilisation = median(
        epochs
            .iter()
            .map(|e| cpu_utilisation(e.cpu_seconds, e.seconds, cpus).unwrap_or(0.0))
            .collect(),
    );
    let report = json!({
        "file": args.loader.file.display().to_string(),
        "remote": remote,
        "batch_size": args.loader.batch_size,
        "num_workers": loader.num_workers(),
        "order": traversal::OrderKind::from(args.loader.order()).name(),
        "os_cache": !args.loader.no_os_cache,
        "seed": loader.seed(),
        "compile": !args.loader.no_compile,
        "warmup": args.warmup,
        "epochs": args.epochs,
        "samples_per_epoch": epochs[0].samples,
        "samples_per_sec": samples_per_sec,
        "bytes_per_sec": bytes_per_sec,
        "epoch_seconds": m(|e| e.seconds),
        "latency_p50_ms": m(|e| e.latency_p50_ms),
        "latency_p99_ms": m(|e| e.latency_p99_ms),
        "peak_rss_bytes": peak_rss_bytes().unwrap_or(0),
        "storage_bytes_read": m(|e| e.storage_bytes_read as f64) as u64,
        "cache_bytes_read": m(|e| e.cache_bytes_read as f64) as u64,
        "wait_pages_seconds": m(|e| e.wait_pages),
        "decode_seconds": m(|e| e.decode),
        "wait_slot_seconds": m(|e| e.wait_slot),
        "slot_stage_seconds": m(|e| e.slot_stage),
        "consumer_wait_seconds": m(|e| e.consumer_wait),
        "h2d_seconds": m(|e| e.h2d_seconds),
        "h2d_bytes": m(|e| e.h2d_bytes as f64) as u64,
        "quasi_buffer_pages": loader.quasi_buffer_pages(),
        "memory_limit_bytes": memory.as_ref().map(ffcv::page_cache::MemoryFacts::limit),
        "memory_available_bytes": memory.as_ref().map(ffcv::page_cache::MemoryFacts::available),
        "memory_bound": memory.as_ref().map(|f| match f.bound() {
            ffcv::page_cache::MemoryBound::Cgroup => "cgroup",
            ffcv::page_cache::MemoryBound::Physical => "physical",
        }),
        "major_faults": m(|e| e.major_faults as f64) as u64,
        "read_amplification": amplification,
        "cpu_seconds": m(|e| e.cpu_seconds),
        "cpu_utilisation": utilisation,
        "cpus": cpus,
    });
    if args.json {
        println!("{report}");
    } else {
        let r = &report;
        println!(
            "{}: {} epochs (+{} warm-up), batch {}, {} workers, {} order, {}",
            args.loader.file.display(),
            args.epochs,
            args.warmup,
            args.loader.batch_size,
            loader.num_workers(),
            r["order"].as_str().unwrap_or_default(),
            if args.loader.no_os_cache {
                "process cache"
            } else {
                "OS cache"
            }
        );
        println!("  samples/s        {:>14.0}", samples_per_sec);
        println!("  MB/s (payload)   {:>14.1}", bytes_per_sec / 1e6);
        println!(
            "  epoch            {:>14.4} s",
            r["epoch_seconds"].as_f64().unwrap_or(0.0)
        );
        println!(
            "  batch latency    p50 {:.3} ms, p99 {:.3} ms",
            r["latency_p50_ms"].as_f64().unwrap_or(0.0),
            r["latency_p99_ms"].as_f64().unwrap_or(0.0)
        );
        println!(
            "  producer time    pages {:.4} s, decode {:.4} s, waiting for the consumer {:.4} s",
            r["wait_pages_seconds"].as_f64().unwrap_or(0.0),
            r["decode_seconds"].as_f64().unwrap_or(0.0),
            r["wait_slot_seconds"].as_f64().unwrap_or(0.0)
        );
        println!(
            "  consumer time    waiting for batches {:.4} s",
            r["consumer_wait_seconds"].as_f64().unwrap_or(0.0)
        );
        if args.loader.device != ffcv::gpu::DeviceSpec::Cpu {
            println!(
                "  GPU stage        host {:.4} s, copies {:.4} s device time, {} bytes",
                r["slot_stage_seconds"].as_f64().unwrap_or(0.0),
                r["h2d_seconds"].as_f64().unwrap_or(0.0),
                r["h2d_bytes"]
            );
        }
        println!(
            "  storage read     {} bytes per epoch; peak RSS {} bytes; seed {}",
            r["storage_bytes_read"], r["peak_rss_bytes"], r["seed"]
        );
        println!(
            "  disk vs CPU      read amplification {:.2}, {} major faults, CPU utilisation {:.0}% of {} CPUs ({:.2} s)",
            amplification,
            r["major_faults"],
            100.0 * utilisation,
            cpus,
            r["cpu_seconds"].as_f64().unwrap_or(0.0)
        );
        if let (Some(limit), Some(bound)) =
            (r["memory_limit_bytes"].as_u64(), r["memory_bound"].as_str())
        {
            println!(
                "  memory           limit {limit} bytes ({bound} binds), {} bytes available",
                r["memory_available_bytes"]
            );
        }
        if let Some(pages) = loader.quasi_buffer_pages() {
            println!("  quasi-random     buffer of {pages} pages");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_source_counts_the_cache_reads_not_the_kernels() {
        // Local: the kernel's device reads (the OS cache reads no bytes of its own).
        assert_eq!(storage_bytes(false, Some(4096), 0), 4096);
        assert_eq!(storage_bytes(false, None, 8192), 8192);
        // Remote: the kernel saw no storage reads; the cache fetched 3 pages.
        assert_eq!(storage_bytes(true, Some(0), 3 << 20), 3 << 20);
        assert_eq!(storage_bytes(true, None, 5), 5);
    }
}
