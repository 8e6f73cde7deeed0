//! One bounded measurement of the loader for `ffcv doctor`: build the loader with the given
//! knobs, warm up for a fifth of the time slice, then take batches (epoch after epoch) until
//! the slice is spent, and turn the loader's counters into a [`Measurement`].
//!
//! The consumer only drops each batch, as `ffcv bench` does without `--touch`: what is
//! measured is the loader alone.

use std::time::{Duration, Instant};

use ffcv::{DecoderChoice, Loader, LoaderStats, Order};
use traversal::OrderKind;

use super::DoctorArgs;
use super::diagnose::Measurement;
use super::tune::{Knobs, RunError};

/// Builds the loader `args` and `knobs` describe.
pub fn build_loader(args: &DoctorArgs, knobs: &Knobs, seed: u64) -> Result<Loader, RunError> {
    let mut builder = Loader::builder(&args.file)
        .batch_size(args.batch_size)
        .num_workers(knobs.num_workers as i64)
        .os_cache(knobs.os_cache)
        .order(Order::from(OrderKind::from(knobs.order)))
        .seed(seed)
        .drop_last(!args.no_drop_last)
        .batches_ahead(knobs.batches_ahead)
        .recompile(args.recompile)
        .compile(!args.no_compile);
    builder = args.cache.apply(builder);
    if args.device != ffcv::gpu::DeviceSpec::Cpu {
        builder = builder.device(args.device);
    }
    if args.world_size > 1 {
        builder = builder
            .distributed(true)
            .world_size(args.world_size as usize)
            .rank(args.rank as usize);
    }
    for spec in &args.decoders {
        let (field, decoder) = spec
            .split_once('=')
            .ok_or_else(|| RunError::other(format!("--decoder `{spec}`: expected FIELD=SPEC")))?;
        let choice: DecoderChoice = decoder
            .parse()
            .map_err(|err| RunError::other(format!("--decoder `{spec}`: {err}")))?;
        builder = builder.decoder(field, choice);
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
    let mut loader = build_loader(args, knobs, seed)?;
    if loader.is_empty() {
        return Err(RunError::other(format!(
            "an epoch has no full batch of {} (use --no-drop-last or a smaller --batch-size)",
            args.batch_size
        )));
    }
    reset_peak_rss();
    let warm_up = slice / 5;
    take_batches(&mut loader, warm_up)?;

    let before = loader.stats();
    let cpu_before = process_cpu_seconds();
    let started = Instant::now();
    let taken = take_batches(&mut loader, slice - warm_up)?;
    let wall = started.elapsed().as_secs_f64();
    let after = loader.stats();
    let cpu = match (cpu_before, process_cpu_seconds()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
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
        gpu_stage: args.device != ffcv::gpu::DeviceSpec::Cpu,
        peak_rss_bytes: peak_rss_bytes(),
        workers: loader.num_workers(),
        cpu_seconds: cpu,
        storage_bytes_read: after.storage_bytes_read - before.storage_bytes_read,
        memory_guard_fired: false,
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

/// Takes batches, epoch after epoch, until `limit` has passed (at least one batch).
fn take_batches(loader: &mut Loader, limit: Duration) -> Result<Taken, RunError> {
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

/// User + system CPU seconds of this process from `/proc/self/stat` (fields 14 and 15, in
/// clock ticks; the kernel reports them in USER_HZ = 100 on Linux).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_cpu_ticks(&stat).map(|ticks| ticks as f64 / 100.0)
}

/// `utime + stime` from the text of `/proc/PID/stat`. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state is field 3, so utime (14) and stime (15) are the 12th and 13th.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::parse_cpu_ticks;

    #[test]
    fn cpu_ticks_are_read_after_the_command_name() {
        let stat = "4242 (ffcv (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 3 0";
        assert_eq!(parse_cpu_ticks(stat), Some(287));
        assert_eq!(parse_cpu_ticks("no parenthesis"), None);
        assert_eq!(parse_cpu_ticks("1 (x) S 1 2"), None);
    }
}
