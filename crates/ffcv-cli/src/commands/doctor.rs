//! `ffcv doctor FILE [loader knobs]`: find what limits the loader on this machine and
//! recommend settings, within a time budget.
//!
//! 1. Facts: file size against total and available memory (and `--max-memory`), the storage
//!    holding the file, CPUs in the affinity mask and physical cores, GPUs, batch size,
//!    pipeline, distributed or not ([`facts`], [`file_facts`]).
//! 2. A starting configuration from the decision rules ([`rules`]), overridden by the knobs
//!    given, and the values the search may try ([`start`]).
//! 3. A bounded baseline from that configuration, and the scarce resource named from its time
//!    breakdown ([`diagnose::diagnose`]).
//! 4. A/B trials of only the knobs that target that resource (`num_workers` for the CPU;
//!    `batches_ahead`, cache and order for storage; `batches_ahead` for the GPU link), with
//!    seed, batch size and pipeline fixed: rounds of the best configuration so far and the
//!    candidate alternate, and a change is kept only when its median gain exceeds the spread
//!    the trial measured ([`tune::tune`]).
//! 5. The diagnosis of the best configuration, with the figures as evidence, and the
//!    recommended `ffcv bench` flags ([`report`]); when no configuration could be measured,
//!    nothing is recommended.
//!
//! An image field whose images vary in size cannot be batched by the default decoder
//! (FFCV's `SimpleRGBImageDecoder`); without a `--decoder` for it, the doctor measures it
//! with FFCV's training decoder, `random-resized-crop:224x224`, and says so in the facts.
//!
//! `--time-budget SECONDS` (default 60) bounds steps 3 and 4: the runs share it and each
//! stops at its slice, whatever the file's size. `--no-measure` stops after step 2.
//!
//! Each bounded run is [`measure::measure`]; the arguments are [`DoctorArgs`], whose loader
//! flags are `ffcv bench`'s ([`crate::loader_args::LoaderArgs`]).

pub mod args;
pub mod diagnose;
pub mod facts;
pub mod file_facts;
pub mod heap;
pub mod measure;
pub mod report;
pub mod rules;
pub mod source;
pub mod start;
pub mod tune;

use std::io::Write as _;
use std::time::{Duration, Instant};

pub use self::args::DoctorArgs;
use self::diagnose::MemoryContext;
use self::facts::MachineFacts;
use self::file_facts::file_facts;
use self::report::Report;
use self::rules::{Needs, Situation};
use self::source::SourceFacts;
use self::start::{candidates, size_process_cache, starting_knobs};
use self::tune::Knobs;
use crate::error::CliError;

/// Runs `ffcv doctor`.
pub fn run(args: &DoctorArgs) -> Result<(), CliError> {
    // The value parser bounds it; this keeps `run` safe for arguments built another way.
    let budget = Duration::try_from_secs_f64(args.time_budget)
        .ok()
        .filter(|b| !b.is_zero())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--time-budget {}: expected a positive number of seconds",
                args.time_budget
            ))
        })?;
    if args.loader.batch_size == 0 {
        return Err(CliError::Usage(
            "--batch-size must be at least 1".to_owned(),
        ));
    }
    if let Some((world_size, rank)) = args.loader.distributed()
        && rank >= world_size
    {
        return Err(CliError::Usage(format!(
            "--rank {rank} must be below --world-size {world_size}"
        )));
    }
    if args.loader.mix.is_set() {
        // The doctor's facts (pages, page size, remote probe) are those of one dataset.
        return Err(CliError::Usage(
            "ffcv doctor measures one dataset; give FILE instead of --mix".into(),
        ));
    }
    let dataset = crate::dataset_args::open(&args.loader.file, &args.loader.more)?;
    let reader = std::sync::Arc::clone(&dataset.reader);
    // The source is probed, then dropped: each measured run opens its own.
    let source = match &dataset.source {
        // Local shards have a source too, but are local files: nothing to probe.
        Some(remote) if dataset.is_remote() => SourceFacts::probe(remote, reader.page_size()),
        _ => SourceFacts::local(),
    };
    drop(dataset);
    let file = file_facts(&reader, &args.loader.decoders, &args.loader.transforms)?;
    // The decoders measured and recommended: the user's, and the doctor's fallbacks.
    let mut effective = args.clone();
    effective
        .loader
        .decoders
        .extend(file.fallbacks.iter().map(|(decoder, _)| decoder.clone()));
    let args = &effective;
    let machine = MachineFacts::probe(&args.loader.file);
    let needs = Needs {
        repeatable: args.repeatable,
        uniform: args.uniform,
    };
    let situation = Situation {
        file_bytes: file.bytes,
        memory: machine.memory,
        max_memory: args.loader.cache.max_memory,
        world_size: args.world_size(),
        affinity_cpus: machine.affinity_cpus,
        physical_cores: machine.physical_cores,
        needs,
        requested_order: args.loader.order,
        seed: args.loader.seed,
        remote: source.is_remote().then(|| source.kind.name()),
    };
    let mut recommendation = rules::recommend(&situation);
    // A remote source: enough pages in flight to cover the link (unless the user chose the
    // depth); the runs, the buffer sizing and the recommended command all use it.
    let mut prefetched = args.clone();
    if source.is_remote() && args.loader.cache.prefetch_ahead.is_none() && file.samples > 0 {
        let bytes_per_batch =
            file.bytes as f64 / file.samples as f64 * args.loader.batch_size as f64;
        if let Some((depth, fired)) = rules::remote_prefetch(
            source.latency_seconds,
            source.bandwidth_bytes_per_sec,
            file.page_size,
            bytes_per_batch / file.page_size.max(1) as f64,
        ) {
            recommendation.fired.push(fired);
            prefetched.loader.cache.prefetch_ahead = Some(depth as u64);
        }
    }
    let args = &prefetched;
    let mut start = starting_knobs(&args.loader, &recommendation, machine.affinity_cpus);
    size_process_cache(
        &args.loader,
        &reader,
        &situation,
        &mut recommendation,
        &mut start,
    );
    let memory = MemoryContext {
        limit_bytes: rules::memory_limit(&situation),
        file_larger_than_limit: recommendation.larger_than_memory,
        file_bytes: file.bytes,
    };

    let progress = !args.json;
    let tuning = if args.no_measure {
        None
    } else {
        let candidates = candidates(&start, &recommendation, machine.affinity_cpus, needs);
        let planned = tune::planned_runs(&candidates);
        let slice = budget / u32::try_from(planned).unwrap_or(u32::MAX);
        let started = Instant::now();
        // A run may start while at least half a slice is left, so the total stays near the
        // budget (each run stops at its slice; one batch may overrun it).
        let mut time_left = || started.elapsed() + slice / 2 <= budget;
        let seed = recommendation.seed.or(args.loader.seed).unwrap_or(0);
        let mut measure = |knobs: &Knobs| {
            if progress {
                eprintln!("ffcv doctor: measuring {}", knobs.flags());
            }
            measure::measure(args, knobs, seed, slice)
        };
        let classify = |m: &diagnose::Measurement| diagnose::diagnose(m, &memory).resource;
        Some(tune::tune(
            start,
            &candidates,
            &classify,
            &mut time_left,
            &mut measure,
        ))
    };
    // Without a single successful run only memory can still be named (the guard refused
    // every configuration, or the file is larger than the memory allowed); anything else
    // would be a guess.
    let diagnosis = tuning
        .as_ref()
        .and_then(|tuning| match &tuning.best_measurement {
            Some(best) => Some(diagnose::diagnose(best, &memory)),
            None => {
                let guard = tuning.trials.iter().any(|t| t.memory_guard_fired());
                let needed = tuning
                    .trials
                    .iter()
                    .filter_map(|t| t.error.as_ref()?.memory_budget_needed)
                    .min();
                diagnose::diagnose_unmeasured(guard, needed, &memory)
            }
        });

    let cpu_normalizing: Vec<String> = args
        .loader
        .transforms
        .iter()
        .filter(|t| t.ops.iter().any(|op| op.name() == "NormalizeImage"))
        .map(|t| t.field.clone())
        .collect();
    let device_advice = rules::normalize_on_device(
        machine.gpus,
        diagnosis
            .as_ref()
            .is_some_and(|d| d.resource == diagnose::Resource::Cpu),
        &cpu_normalizing,
    );
    let report = Report {
        args,
        file: &file,
        source: &source,
        machine: &machine,
        recommendation: &recommendation,
        start,
        tuning: tuning.as_ref(),
        diagnosis: diagnosis.as_ref(),
        device_advice: device_advice.as_ref(),
    };
    let text = if args.json {
        format!("{}\n", report.to_json())
    } else {
        report.text()
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(CliError::Stdout)?;
    // Nothing measured and nothing named: the report shows the errors, and the exit status
    // says the doctor could not do its job. (A memory diagnosis without a measurement is a
    // finding: the guard's figures say what budget would do.)
    if let Some(tuning) = &tuning
        && tuning.best_measurement.is_none()
        && diagnosis.is_none()
    {
        let reason = tuning
            .trials
            .iter()
            .find_map(|t| t.error.as_ref().map(|e| e.message.clone()))
            .unwrap_or_else(|| "the time budget allowed no run".to_owned());
        return Err(CliError::NothingMeasured {
            path: args.loader.file.clone(),
            reason,
        });
    }
    Ok(())
}
