//! `ffcv doctor FILE [loader knobs]`: find what limits the loader on this machine and
//! recommend settings, within a time budget.
//!
//! 1. Facts: file size against total and available memory (and `--max-memory`), the storage
//!    holding the file, CPUs in the affinity mask and physical cores, GPUs, batch size,
//!    pipeline, distributed or not ([`facts`]).
//! 2. A starting configuration from the decision rules ([`rules`]).
//! 3. A bounded baseline from that configuration, and the scarce resource named from its time
//!    breakdown ([`diagnose::diagnose`]).
//! 4. A/B trials of only the knobs that target that resource (`num_workers` for the CPU;
//!    `batches_ahead`, cache and order for storage; `batches_ahead` for the GPU link), with
//!    seed, batch size and pipeline fixed: rounds of the best configuration so far and the
//!    candidate alternate, and a change is kept only when its median gain exceeds the spread
//!    the trial measured ([`tune::tune`]).
//! 5. The diagnosis of the best configuration, with the figures as evidence, and the
//!    recommended `ffcv bench` flags; when no configuration could be measured, nothing is
//!    recommended.
//!
//! An image field whose images vary in size cannot be batched by the default decoder
//! (FFCV's `SimpleRGBImageDecoder`); without a `--decoder` for it, the doctor measures it
//! with FFCV's training decoder, `random-resized-crop:224x224`, and says so in the facts.
//!
//! `--time-budget SECONDS` (default 60) bounds steps 3 and 4: the runs share it and each
//! stops at its slice, whatever the file's size. `--no-measure` stops after step 2.

pub mod diagnose;
pub mod facts;
pub mod measure;
pub mod rules;
pub mod source;
pub mod tune;

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use beton_io::{FieldType, Reader};
use serde_json::{Value, json};

use self::diagnose::MemoryContext;
use self::facts::MachineFacts;
use self::rules::{Needs, Recommendation, Situation, human_bytes, order_name};
use self::source::SourceFacts;
use self::tune::{Candidates, Knobs, Tuning};
use crate::cache_args::CacheArgs;
use crate::commands::order::OrderChoice;
use crate::error::CliError;
use crate::numeric_flags;

/// Arguments of `ffcv doctor`: the loader knobs of `ffcv bench`, plus the budget and what the
/// run needs.
#[derive(clap::Args, Debug, Clone)]
pub struct DoctorArgs {
    /// The .beton file (a path, `file://`, `s3://` or `http(s)://` URL), or the first of
    /// several read as one dataset (shards); a glob pattern (`'data/train-*.beton'`) or an
    /// `s3://` prefix (`s3://bucket/train-`) names every match, sorted.
    pub file: PathBuf,
    /// More shards of the same dataset, after FILE (global sample ids run through the
    /// files in the order given).
    #[arg(value_name = "MORE")]
    pub more: Vec<PathBuf>,

    /// Samples per batch, 1 to 2^20 (kept fixed while measuring).
    #[arg(long, default_value_t = 512, value_parser = numeric_flags::batch_size::<usize>())]
    pub batch_size: usize,

    /// Pipeline threads to start from (-1 = CPUs in the affinity mask, else 1 to 1024);
    /// default: one per physical core.
    #[arg(long, allow_hyphen_values = true, value_parser = numeric_flags::num_workers)]
    pub num_workers: Option<i64>,

    /// The order to start from; default: the decision rules' choice.
    #[arg(long, value_enum)]
    pub order: Option<OrderChoice>,

    /// Start from the process cache instead of the OS page cache.
    #[arg(long)]
    pub no_os_cache: bool,

    /// The order's seed (kept fixed while measuring).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Queue depth to start from (1 to 1024).
    #[arg(long, value_parser = numeric_flags::batches_ahead::<usize>())]
    pub batches_ahead: Option<usize>,

    /// Keep the final partial batch.
    #[arg(long)]
    pub no_drop_last: bool,

    /// Regenerate the pipeline code every epoch.
    #[arg(long)]
    pub recompile: bool,

    /// Run the pipeline with the interpreter instead of compiled code.
    #[arg(long)]
    pub no_compile: bool,

    /// Process-cache knobs.
    #[command(flatten)]
    pub cache: CacheArgs,

    /// Processes in the distributed job (1 = not distributed).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub world_size: u64,

    /// This process's rank in the distributed job.
    #[arg(long, default_value_t = 0)]
    pub rank: u64,

    /// A field's decoder, as `ffcv bench` takes it: FIELD=SPEC with SPEC one of default, none,
    /// raw-bytes, int, float, bytes, json, ndarray, simple, center-crop:HxW[:RATIO] or
    /// random-resized-crop:HxW[:LO,HI[:LO,HI]], either crop optionally ending in `:dct-scale`
    /// (repeatable).
    #[arg(long = "decoder", value_name = "FIELD=SPEC")]
    pub decoders: Vec<String>,

    /// A field's transforms after its decoder, as `ffcv bench` takes them: FIELD=OP[,OP…]
    /// with OP one of flip[:P], normalize:imagenet[:DTYPE], normalize:M1,M2,M3/S1,S2,S3[:DTYPE],
    /// chw, convert:DTYPE, cutout:SIZE, translate:PAD, squeeze (repeatable). The doctor
    /// measures and tunes the loader with them, as the training job would run it.
    #[arg(long = "transform", value_name = "FIELD=OP[,OP…]",
          value_parser = crate::pipeline_args::parse_transform)]
    pub transforms: Vec<crate::pipeline_args::TransformArg>,

    /// Where batches go: `cpu`, or `cuda:N` to stage every batch on that GPU through the
    /// loader's GPU stage.
    #[arg(long, default_value = "cpu")]
    pub device: ffcv::gpu::DeviceSpec,

    /// Seconds all measurements together may take (above 0, at most a week).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0,
          value_parser = numeric_flags::time_budget_seconds)]
    pub time_budget: f64,

    /// The order must be the same every run (Sequential, or Random with a fixed seed).
    #[arg(long)]
    pub repeatable: bool,

    /// The shuffle must be an exactly uniform permutation (rules out QuasiRandom).
    #[arg(long)]
    pub uniform: bool,

    /// Record the facts and the rules' starting configuration, measure nothing.
    #[arg(long)]
    pub no_measure: bool,

    /// Print the report as one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// The facts about the file and the run (the machine's are in [`MachineFacts`]).
#[derive(Debug, Clone)]
pub struct FileFacts {
    /// File size in bytes.
    pub bytes: u64,
    /// Samples in the file.
    pub samples: u64,
    /// Page size.
    pub page_size: u64,
    /// `name: decoder` per field.
    pub pipeline: Vec<String>,
    /// Whether any image field stores JPEG (judged from the first samples).
    pub has_jpeg: bool,
    /// Decoders the doctor chose because the default cannot serve a field, as
    /// `FIELD=SPEC`, each with the reason.
    pub fallbacks: Vec<(String, String)>,
}

/// The decoder an image field of varying sizes is measured with: FFCV's training decoder
/// (`RandomResizedCropRGBImageDecoder((224, 224))`, its ImageNet example's setting).
pub const TRAINING_DECODER: &str = "random-resized-crop:224x224";

/// Number of samples whose image metadata is looked at to tell raw from JPEG.
const MODE_PROBE_SAMPLES: u64 = 64;

/// A sample of an image field and its size: `(sample, height, width)`.
type SizedSample = (u64, u16, u16);

/// The first two samples of an image field whose sizes differ, or `None` when every image
/// has one size (the rule `SimpleRGBImageDecoder` applies).
fn varying_image_size(reader: &Reader, index: usize) -> Result<Option<[SizedSample; 2]>, CliError> {
    let mut first = None;
    for sample in 0..reader.num_samples() {
        if let beton_io::FieldMetadata::RgbImage { width, height, .. } =
            reader.metadata(sample, index)?
        {
            match first {
                None => first = Some((sample, height, width)),
                Some((s, h, w)) if (h, w) != (height, width) => {
                    return Ok(Some([(s, h, w), (sample, height, width)]));
                }
                Some(_) => {}
            }
        }
    }
    Ok(None)
}

fn file_facts(
    reader: &Reader,
    decoders: &[String],
    transforms: &[crate::pipeline_args::TransformArg],
) -> Result<FileFacts, CliError> {
    let mut pipeline = Vec::new();
    let mut has_jpeg = false;
    let mut fallbacks = Vec::new();
    for (index, field) in reader.fields().iter().enumerate() {
        let mut chosen = decoders.iter().find_map(|spec| {
            let (name, decoder) = spec.split_once('=')?;
            (name == field.name).then(|| decoder.to_owned())
        });
        let default = match field.field_type {
            FieldType::RgbImage => "simple",
            _ => "default",
        };
        let mut note = String::new();
        if field.field_type == FieldType::RgbImage
            && chosen
                .as_deref()
                .is_none_or(|d| d == "default" || d == "simple")
            && let Some([(s0, h0, w0), (s1, h1, w1)]) = varying_image_size(reader, index)?
        {
            let because = format!(
                "the images vary in size (sample {s0} is {h0}x{w0}, sample {s1} is {h1}x{w1}), \
                 which the default decoder (simple) cannot batch: measured with FFCV's \
                 training decoder {TRAINING_DECODER}"
            );
            note = format!(" ({because})");
            fallbacks.push((format!("{}={TRAINING_DECODER}", field.name), because));
            chosen = Some(TRAINING_DECODER.to_owned());
        }
        let then: String = transforms
            .iter()
            .filter(|t| t.field == field.name)
            .map(|t| format!(" -> {}", t.describe()))
            .collect();
        pipeline.push(format!(
            "{} ({}): {}{then}{note}",
            field.name,
            field.field_type.type_name(),
            chosen.as_deref().unwrap_or(default)
        ));
        if field.field_type == FieldType::RgbImage {
            for sample in 0..reader.num_samples().min(MODE_PROBE_SAMPLES) {
                if let beton_io::FieldMetadata::RgbImage { mode, .. } =
                    reader.metadata(sample, index)?
                {
                    has_jpeg |= mode == beton_io::IMAGE_MODE_JPEG;
                }
            }
        }
    }
    for spec in decoders {
        let known = spec.split_once('=').is_some_and(|(name, decoder)| {
            reader.field_index(name).is_some() && decoder.parse::<ffcv::DecoderChoice>().is_ok()
        });
        if !known {
            return Err(CliError::Usage(format!(
                "--decoder `{spec}`: expected FIELD=SPEC with a field of {} and a known decoder",
                reader.path().display()
            )));
        }
    }
    for t in transforms {
        let disabled = decoders
            .iter()
            .rev()
            .find_map(|spec| spec.split_once('=').filter(|(name, _)| *name == t.field))
            .is_some_and(|(_, decoder)| decoder == "none");
        if reader.field_index(&t.field).is_none() || disabled {
            return Err(CliError::Usage(format!(
                "--transform `{}`: expected FIELD=OPS with an enabled field of {}",
                t.text,
                reader.path().display()
            )));
        }
    }
    Ok(FileFacts {
        bytes: reader.file_size(),
        samples: reader.num_samples(),
        page_size: reader.page_size(),
        pipeline,
        has_jpeg,
        fallbacks,
    })
}

/// The process cache's share of the memory it may use when the doctor picks the budget:
/// the rest is left to the batches, the pipelines and the OS.
pub const PROCESS_CACHE_SHARE_NUM: u64 = 1;
/// Denominator of that share (1/2).
pub const PROCESS_CACHE_SHARE_DEN: u64 = 2;

/// For a start from the process cache with QuasiRandom: a memory budget (the user's
/// `--max-memory`, else half the memory the process may use) and the largest QuasiRandom
/// buffer up to FFCV's whose page schedules fit it (the user's `--quasi-buffer-pages` if
/// given), recorded in `start` and as rules that fired.
fn size_process_cache(
    args: &DoctorArgs,
    reader: &Reader,
    situation: &Situation,
    recommendation: &mut Recommendation,
    start: &mut Knobs,
) {
    if start.os_cache || start.order != OrderChoice::QuasiRandom {
        return;
    }
    let budget = match (args.cache.max_memory, situation.memory) {
        (Some(given), _) => given,
        (None, Some(memory)) => {
            let budget = memory.available / PROCESS_CACHE_SHARE_DEN * PROCESS_CACHE_SHARE_NUM;
            recommendation.fired.push(rules::Fired {
                id: "process-cache-budget",
                because: format!(
                    "the process cache gets half of the memory this process may use ({} of {}), leaving the rest to batches, pipelines and the OS: --max-memory {budget}",
                    human_bytes(budget),
                    human_bytes(memory.available)
                ),
            });
            start.max_memory = Some(budget);
            budget
        }
        (None, None) => return,
    };
    if args.cache.quasi_buffer_pages.is_some() {
        return;
    }
    let map = reader.page_map();
    let pages = traversal::SamplePages::from_fn(reader.num_samples(), |s| {
        map.pages_of_sample(s).first().copied()
    });
    let indices: Vec<u64> = (0..reader.num_samples()).collect();
    let distributed = if args.world_size > 1 {
        traversal::Distributed::new(args.world_size as usize, args.rank as usize).ok()
    } else {
        None
    };
    let plan = ffcv::quasi_buffer::QuasiPlan {
        reader,
        pages: &pages,
        indices: &indices,
        seed: recommendation.seed.or(args.seed).unwrap_or(0),
        distributed,
        batch_size: args.batch_size,
        drop_last: !args.no_drop_last,
        prefetch_ahead: args.cache.prefetch_ahead.map_or(3, |p| p as usize),
    };
    let Ok(sizing) = plan.size_buffer(budget) else {
        return;
    };
    let page = reader.page_size();
    recommendation.fired.push(rules::Fired {
        id: "quasi-buffer-fits",
        because: if !sizing.fits {
            format!(
                "no QuasiRandom buffer fits the process cache's {} (even 1 page of {}): raise --max-memory or lower --batch-size",
                human_bytes(budget),
                human_bytes(page)
            )
        } else if sizing.buffer_pages == sizing.ffcv_pages {
            format!(
                "QuasiRandom keeps FFCV's buffer of {} pages (2 x batch size): its page schedules need {} slots of {}, within the process cache's {}",
                sizing.buffer_pages,
                sizing.slots_needed,
                human_bytes(page),
                human_bytes(budget)
            )
        } else {
            format!(
                "QuasiRandom buffer of {} pages instead of FFCV's {} (2 x batch size), the largest whose page schedules fit the process cache's {} ({} slots of {}): --quasi-buffer-pages {}",
                sizing.buffer_pages,
                sizing.ffcv_pages,
                human_bytes(budget),
                sizing.slots_needed,
                human_bytes(page),
                sizing.buffer_pages
            )
        },
    });
    if sizing.fits {
        start.quasi_buffer_pages = Some(sizing.buffer_pages);
    }
}

/// The knobs the measurement starts from: the rules' choice, overridden by the knobs the
/// user gave explicitly.
pub fn starting_knobs(args: &DoctorArgs, recommendation: &Recommendation, cpus: usize) -> Knobs {
    Knobs {
        os_cache: recommendation.os_cache && !args.no_os_cache,
        order: args.order.unwrap_or(recommendation.order),
        num_workers: match args.num_workers {
            Some(n) if n > 0 => n as usize,
            Some(_) => cpus,
            None => recommendation.num_workers,
        },
        batches_ahead: args.batches_ahead.unwrap_or(3),
        max_memory: None,
        quasi_buffer_pages: None,
    }
}

/// The values the search may try from `start`: worker counts 1, the rules' and all CPUs;
/// queue depths 1, 3 and 6; the OS cache when the run started from the process cache (the
/// file larger than memory: the A/B shows what the process cache gains over the OS cache
/// as it is used today; never the other way: a file that fits is best kept once in the
/// page cache, shared by every process, which a short run in one process cannot show); the other
/// shuffling order only when neither a repeatable nor an exactly uniform order is required
/// and the file fits memory (larger than memory, the rules' order is what keeps the working
/// set small, which a short run cannot show either). A remote source tries neither: it
/// cannot be memory-mapped (the OS cache would be the process cache with a warning), and
/// QuasiRandom is what keeps its requests to one per page.
pub fn candidates(
    start: &Knobs,
    recommendation: &Recommendation,
    cpus: usize,
    needs: Needs,
) -> Candidates {
    let mut num_workers: Vec<usize> = [1, recommendation.num_workers, cpus]
        .into_iter()
        .filter(|&n| n != start.num_workers)
        .collect();
    num_workers.sort_unstable();
    num_workers.dedup();
    let batches_ahead = [1, 3, 6]
        .into_iter()
        .filter(|&b| b != start.batches_ahead)
        .collect();
    let fits = !recommendation.larger_than_memory;
    let orders = if fits && !recommendation.remote && !needs.repeatable && !needs.uniform {
        [OrderChoice::Random, OrderChoice::QuasiRandom]
            .into_iter()
            .filter(|&o| o != start.order)
            .collect()
    } else {
        Vec::new()
    };
    Candidates {
        num_workers,
        batches_ahead,
        try_other_cache: !start.os_cache && !recommendation.remote,
        orders,
    }
}

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
    if args.batch_size == 0 {
        return Err(CliError::Usage(
            "--batch-size must be at least 1".to_owned(),
        ));
    }
    if args.world_size == 0 || args.rank >= args.world_size {
        return Err(CliError::Usage(format!(
            "--rank {} must be below --world-size {}",
            args.rank, args.world_size
        )));
    }
    let dataset = crate::dataset_args::open(&args.file, &args.more)?;
    let reader = std::sync::Arc::clone(&dataset.reader);
    // The source is probed, then dropped: each measured run opens its own.
    let source = match &dataset.source {
        // Local shards have a source too, but are local files: nothing to probe.
        Some(remote) if dataset.is_remote() => SourceFacts::probe(remote, reader.page_size()),
        _ => SourceFacts::local(),
    };
    drop(dataset);
    let file = file_facts(&reader, &args.decoders, &args.transforms)?;
    // The decoders measured and recommended: the user's, and the doctor's fallbacks.
    let mut effective = args.clone();
    effective
        .decoders
        .extend(file.fallbacks.iter().map(|(spec, _)| spec.clone()));
    let args = &effective;
    let machine = MachineFacts::probe(&args.file);
    let needs = Needs {
        repeatable: args.repeatable,
        uniform: args.uniform,
    };
    let situation = Situation {
        file_bytes: file.bytes,
        memory: machine.memory,
        max_memory: args.cache.max_memory,
        world_size: args.world_size,
        affinity_cpus: machine.affinity_cpus,
        physical_cores: machine.physical_cores,
        needs,
        requested_order: args.order,
        seed: args.seed,
        remote: source.is_remote().then(|| source.kind.name()),
    };
    let mut recommendation = rules::recommend(&situation);
    // A remote source: enough pages in flight to cover the link (unless the user chose the
    // depth); the runs, the buffer sizing and the recommended command all use it.
    let mut prefetched = args.clone();
    if source.is_remote() && args.cache.prefetch_ahead.is_none() && file.samples > 0 {
        let bytes_per_batch = file.bytes as f64 / file.samples as f64 * args.batch_size as f64;
        if let Some((depth, fired)) = rules::remote_prefetch(
            source.latency_seconds,
            source.bandwidth_bytes_per_sec,
            file.page_size,
            bytes_per_batch / file.page_size.max(1) as f64,
        ) {
            recommendation.fired.push(fired);
            prefetched.cache.prefetch_ahead = Some(depth as u64);
        }
    }
    let args = &prefetched;
    let mut start = starting_knobs(args, &recommendation, machine.affinity_cpus);
    size_process_cache(args, &reader, &situation, &mut recommendation, &mut start);
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
        let seed = recommendation.seed.or(args.seed).unwrap_or(0);
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
            path: args.file.clone(),
            reason,
        });
    }
    Ok(())
}

/// Everything the doctor found, for printing.
struct Report<'a> {
    args: &'a DoctorArgs,
    file: &'a FileFacts,
    /// Where the bytes come from (kind; latency and bandwidth when remote).
    source: &'a SourceFacts,
    machine: &'a MachineFacts,
    recommendation: &'a Recommendation,
    start: Knobs,
    tuning: Option<&'a Tuning>,
    diagnosis: Option<&'a diagnose::Diagnosis>,
    /// The device rule's advice, when it fired ([`rules::normalize_on_device`]).
    device_advice: Option<&'a rules::Fired>,
}

impl Report<'_> {
    /// The settings to use: the best measured; the rules' start with `--no-measure`; none
    /// when measuring was asked for and no configuration could be measured.
    fn recommended(&self) -> Option<Knobs> {
        match self.tuning {
            None => Some(self.start),
            Some(t) => t.best_measurement.is_some().then_some(t.best),
        }
    }

    fn command(&self) -> Option<String> {
        let knobs = self.recommended()?;
        let mut command = format!(
            "ffcv bench {} --batch-size {} {}",
            self.args.file.display(),
            self.args.batch_size,
            knobs.flags()
        );
        if let Some(seed) = self.recommendation.seed.or(self.args.seed) {
            let _ = write!(command, " --seed {seed}");
        }
        command.push_str(&self.args.cache.flags());
        for (flag, on) in [
            (" --no-drop-last", self.args.no_drop_last),
            (" --recompile", self.args.recompile),
            (" --no-compile", self.args.no_compile),
        ] {
            if on {
                command.push_str(flag);
            }
        }
        if self.args.world_size > 1 {
            let _ = write!(
                command,
                " --world-size {} --rank {}",
                self.args.world_size, self.args.rank
            );
        }
        for decoder in &self.args.decoders {
            let _ = write!(command, " --decoder {decoder}");
        }
        for transform in &self.args.transforms {
            let _ = write!(command, " --transform {}", transform.text);
        }
        if self.args.device != ffcv::gpu::DeviceSpec::Cpu {
            let _ = write!(command, " --device {}", self.args.device);
        }
        Some(command)
    }

    fn to_json(&self) -> Value {
        json!({
            "file": self.args.file.display().to_string(),
            "facts": {
                "file_bytes": self.file.bytes,
                "samples": self.file.samples,
                "page_size": self.file.page_size,
                "max_memory_bytes": self.args.cache.max_memory,
                "source": self.source.to_json(),
                "machine": self.machine.to_json(),
                "batch_size": self.args.batch_size,
                "pipeline": self.file.pipeline,
                "jpeg": self.file.has_jpeg,
                "decoder_fallbacks": self.file.fallbacks.iter().map(|(spec, because)| json!({
                    "decoder": spec,
                    "because": because,
                })).collect::<Vec<_>>(),
                "distributed": self.args.world_size > 1,
                "world_size": self.args.world_size,
                "rank": self.args.rank,
            },
            "rules": self.recommendation.to_json(),
            "start": self.start.to_json(),
            "time_budget_seconds": self.args.time_budget,
            "trials": self.tuning.map(|t| t.trials.iter().map(tune::Trial::to_json).collect::<Vec<_>>()),
            "untried": self.tuning.map(|t| t.untried.iter().map(tune::Untried::to_json).collect::<Vec<_>>()),
            "skipped_trials": self.tuning.map(tune::Tuning::skipped),
            "tuned_for": self.tuning.and_then(|t| t.resource).map(diagnose::Resource::name),
            "diagnosis": self.diagnosis.map(diagnose::Diagnosis::to_json),
            "device_advice": self.device_advice.map(|f| json!({"id": f.id, "because": f.because})),
            "recommended": self.recommended().map(Knobs::to_json),
            "recommended_seed": self.recommendation.seed.or(self.args.seed),
            "command": self.command(),
        })
    }

    fn text(&self) -> String {
        let mut t = String::new();
        let m = self.machine;
        let f = self.file;
        let _ = writeln!(t, "ffcv doctor: {}\n\nfacts", self.args.file.display());
        let _ = writeln!(
            t,
            "  file          {} ({} samples, pages of {})",
            human_bytes(f.bytes),
            f.samples,
            human_bytes(f.page_size)
        );
        let memory = match m.memory {
            Some(mem) if mem.cgroup_binds() => format!(
                "{} limit (the cgroup's; the machine has {}), {} available",
                human_bytes(mem.total),
                human_bytes(mem.physical_total),
                human_bytes(mem.available)
            ),
            Some(mem) => format!(
                "{} total, {} available (the machine's; no lower cgroup limit)",
                human_bytes(mem.total),
                human_bytes(mem.available)
            ),
            None => "not visible".to_owned(),
        };
        let budget = self.args.cache.max_memory.map_or_else(String::new, |b| {
            format!("; --max-memory {}", human_bytes(b))
        });
        let _ = writeln!(t, "  memory        {memory}{budget}");
        let _ = writeln!(t, "  source        {}", self.source.describe());
        let storage = &m.storage;
        if self.source.is_remote() {
            // A URL is not on a local device: the source line above describes it.
            let _ = writeln!(t, "  storage       none local (a remote object)");
        } else {
            let _ = writeln!(
                t,
                "  storage       {} on device {}{} ({})",
                storage
                    .filesystem
                    .as_deref()
                    .unwrap_or("unknown filesystem"),
                storage.device,
                storage
                    .block_device
                    .as_deref()
                    .map_or_else(String::new, |b| format!(" = {b}")),
                match &storage.kind {
                    facts::StorageKind::Unknown(why) => format!("kind unknown: {why}"),
                    kind => kind.name().to_owned(),
                }
            );
        }
        let _ = writeln!(
            t,
            "  cpus          {} in the affinity mask, {} physical cores",
            m.affinity_cpus,
            m.physical_cores
                .map_or_else(|| "unknown".to_owned(), |c| c.to_string())
        );
        let _ = writeln!(t, "  gpus          {}", m.gpus);
        let _ = writeln!(t, "  batch size    {}", self.args.batch_size);
        let _ = writeln!(
            t,
            "  pipeline      {}{}",
            f.pipeline.join(", "),
            if f.has_jpeg { " (JPEG images)" } else { "" }
        );
        let _ = writeln!(
            t,
            "  distributed   {}",
            if self.args.world_size > 1 {
                format!("yes, rank {} of {}", self.args.rank, self.args.world_size)
            } else {
                "no".to_owned()
            }
        );
        let r = self.recommendation;
        let _ = writeln!(
            t,
            "\nstarting configuration (decision rules)\n  {}",
            self.start.flags()
        );
        for fired in &r.fired {
            let _ = writeln!(t, "  - {}: {}", fired.id, fired.because);
        }
        if let Some(tuning) = self.tuning {
            let _ = writeln!(
                t,
                "\nmeasurements (time budget {} s; each trial alternates up to {} rounds of the \
                 best so far (A) and the change (B); a change is kept only when B's median \
                 beats A's by more than the trial's spread, the larger max - min of either side)",
                self.args.time_budget,
                tune::ROUNDS
            );
            for trial in &tuning.trials {
                let _ = writeln!(t, "{}", trial_line(trial));
            }
            if let Some(resource) = tuning.resource {
                let _ = writeln!(
                    t,
                    "  each trial tried a knob that targets the scarce resource named at that \
                     point; named from the final best: {}",
                    resource.name()
                );
            }
            for untried in &tuning.untried {
                let _ = writeln!(
                    t,
                    "  not tried     {:<50} {}",
                    untried.knobs.flags(),
                    untried.because
                );
            }
        } else {
            let _ = writeln!(t, "\nmeasurements: none (--no-measure)");
        }
        if let Some(d) = self.diagnosis {
            let _ = writeln!(t, "\nscarce resource: {}", d.resource.name());
            for line in &d.evidence {
                let _ = writeln!(t, "  - {line}");
            }
            let _ = writeln!(t, "  => {}", d.resource.advice());
            if let Some(f) = self.device_advice {
                let _ = writeln!(t, "  => {} ({})", f.because, f.id);
            }
        } else if self.tuning.is_some() {
            let _ = writeln!(
                t,
                "\nscarce resource: not named (no measurement succeeded; see the errors above)"
            );
        }
        match (self.recommended(), self.command()) {
            (Some(knobs), Some(command)) => {
                let _ = writeln!(
                    t,
                    "\nrecommended settings\n  os_cache={} order={} num_workers={} batches_ahead={}{}{}{}\n  {}",
                    knobs.os_cache,
                    order_name(knobs.order),
                    knobs.num_workers,
                    knobs.batches_ahead,
                    knobs
                        .max_memory
                        .or(self.args.cache.max_memory)
                        .filter(|_| !knobs.os_cache)
                        .map_or_else(String::new, |b| format!(" max_memory={b}")),
                    knobs
                        .quasi_buffer_pages
                        .or(self.args.cache.quasi_buffer_pages.map(|p| p as usize))
                        .filter(|_| knobs.order == OrderChoice::QuasiRandom)
                        .map_or_else(String::new, |p| format!(" quasi_buffer_pages={p}")),
                    self.recommendation
                        .seed
                        .or(self.args.seed)
                        .map_or_else(String::new, |s| format!(" seed={s}")),
                    command
                );
            }
            _ => {
                let _ = writeln!(
                    t,
                    "\nrecommended settings: none (no configuration could be measured)"
                );
            }
        }
        t
    }
}

/// One trial of the search as a report line: the baseline's rate, or an A/B trial's medians,
/// rounds, gain, spread and verdict.
fn trial_line(trial: &tune::Trial) -> String {
    let rates = |rates: &[f64]| {
        rates
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut line = format!("  {:<13} {:<50}", trial.knob, trial.knobs.flags());
    match (&trial.verdict, &trial.error) {
        (None, None) => {
            if let Some(m) = trial.median_measurement() {
                let _ = write!(line, " {:.0} samples/s", m.samples_per_sec);
            }
        }
        (None, Some(e)) => {
            let _ = write!(line, " failed: {e}");
        }
        (Some(v), error) => {
            if let Some(resource) = trial.targets {
                let _ = write!(line, " (for {})", resource.name());
            }
            let _ = write!(
                line,
                " B {:.0} [{}] vs A {:.0} [{}]: gain {:+.0}, spread {:.0} ({:.0}% of A)",
                v.candidate_median,
                rates(&trial.rates()),
                v.reference_median,
                rates(&trial.reference_rates),
                v.gain,
                v.spread,
                100.0 * v.spread / v.reference_median.max(f64::MIN_POSITIVE)
            );
            let verdict = if trial.kept {
                "kept".to_owned()
            } else if let Some(e) = error {
                format!("not kept: failed: {e}")
            } else if v.rounds < tune::MIN_ROUNDS {
                format!(
                    "not kept: {} round(s), too few to know the spread",
                    v.rounds
                )
            } else {
                "not kept: within the spread".to_owned()
            };
            let _ = write!(line, " => {verdict}");
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: DoctorArgs,
    }

    fn args(extra: &[&str]) -> DoctorArgs {
        let mut argv = vec!["doctor", "f.beton"];
        argv.extend_from_slice(extra);
        Wrapper::parse_from(argv).args
    }

    fn recommendation(os_cache: bool, larger: bool) -> Recommendation {
        Recommendation {
            os_cache,
            order: if larger {
                OrderChoice::QuasiRandom
            } else {
                OrderChoice::Random
            },
            num_workers: 2,
            seed: None,
            larger_than_memory: larger,
            remote: false,
            fired: Vec::new(),
        }
    }

    #[test]
    fn explicit_knobs_override_the_rules_start() {
        let r = recommendation(true, false);
        let start = starting_knobs(&args(&[]), &r, 4);
        assert_eq!(
            start,
            Knobs {
                os_cache: true,
                order: OrderChoice::Random,
                num_workers: 2,
                batches_ahead: 3,
                max_memory: None,
                quasi_buffer_pages: None,
            }
        );
        let given = args(&[
            "--no-os-cache",
            "--order",
            "sequential",
            "--num-workers",
            "-1",
            "--batches-ahead",
            "5",
        ]);
        let start = starting_knobs(&given, &r, 4);
        assert_eq!(
            start,
            Knobs {
                os_cache: false,
                order: OrderChoice::Sequential,
                num_workers: 4,
                batches_ahead: 5,
                max_memory: None,
                quasi_buffer_pages: None,
            }
        );
    }

    #[test]
    fn a_file_larger_than_memory_is_measured_against_the_os_cache_but_no_other_order() {
        let r = recommendation(false, true);
        let start = starting_knobs(&args(&[]), &r, 4);
        let c = candidates(&start, &r, 4, Needs::default());
        assert!(c.try_other_cache);
        assert!(c.orders.is_empty());
        assert_eq!(c.num_workers, [1, 4]);
        assert_eq!(c.batches_ahead, [1, 6]);
    }

    #[test]
    fn a_file_that_fits_may_try_the_os_cache_and_another_order_unless_the_order_is_pinned() {
        let r = recommendation(true, false);
        let start = starting_knobs(&args(&[]), &r, 2);
        let c = candidates(&start, &r, 2, Needs::default());
        assert!(
            !c.try_other_cache,
            "the OS cache is never traded for the process cache"
        );
        assert_eq!(c.orders, [OrderChoice::QuasiRandom]);
        assert_eq!(c.num_workers, [1]);
        let from_process = starting_knobs(&args(&["--no-os-cache"]), &r, 2);
        assert!(candidates(&from_process, &r, 2, Needs::default()).try_other_cache);
        let pinned = Needs {
            repeatable: true,
            uniform: false,
        };
        assert!(candidates(&start, &r, 2, pinned).orders.is_empty());
    }

    #[test]
    fn a_remote_source_never_tries_the_os_cache_nor_another_order() {
        let mut r = recommendation(false, false);
        r.remote = true;
        r.order = OrderChoice::QuasiRandom;
        let start = starting_knobs(&args(&[]), &r, 4);
        assert!(!start.os_cache);
        let c = candidates(&start, &r, 4, Needs::default());
        assert!(!c.try_other_cache);
        assert!(c.orders.is_empty());
        assert_eq!(c.batches_ahead, [1, 6]);
    }

    #[test]
    fn loader_flags_parse_as_ffcv_bench_names_them() {
        let a = args(&[
            "--batch-size",
            "64",
            "--max-memory",
            "16MiB",
            "--world-size",
            "4",
            "--rank",
            "3",
            "--decoder",
            "image=center-crop:32x32",
            "--time-budget",
            "5",
            "--seed",
            "9",
            "--no-drop-last",
            "--recompile",
            "--no-compile",
            "--json",
        ]);
        assert_eq!(a.batch_size, 64);
        assert_eq!(a.cache.max_memory, Some(16 << 20));
        assert_eq!((a.world_size, a.rank), (4, 3));
        assert_eq!(a.decoders, ["image=center-crop:32x32"]);
        assert_eq!(a.time_budget, 5.0);
        assert_eq!(a.seed, Some(9));
        assert!(a.no_drop_last && a.recompile && a.no_compile && a.json);
    }
}
