//! The measured half of `ffcv doctor`: a bounded baseline, the scarce resource named from
//! its time breakdown, and A/B trials of only the knobs that target that resource, each
//! kept only when its gain exceeds the spread the trial measured.
//!
//! The search and the classification are pure: they take a `measure` callback, so the tests
//! drive them with recorded measurements and the command drives them with the loader.

use serde_json::{Value, json};

use super::rules::order_name;
use crate::commands::order::OrderChoice;

/// Rounds of each side an A/B trial runs when time allows (A, B, A, B, A, B).
pub const ROUNDS: usize = 3;

/// Fewer rounds of either side than this leave the spread unknown: such a trial keeps
/// nothing.
pub const MIN_ROUNDS: usize = 2;

/// RSS at or above this share of the memory budget is memory pressure.
pub const MEMORY_PRESSURE_SHARE: f64 = 0.9;

/// The knobs the search varies; batch size, seed and pipeline stay fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knobs {
    /// OS page cache (`true`) or the process cache.
    pub os_cache: bool,
    /// Traversal order.
    pub order: OrderChoice,
    /// Pipeline threads.
    pub num_workers: usize,
    /// Queue depth.
    pub batches_ahead: usize,
}

impl Knobs {
    /// The knobs as JSON (stable keys, the `ffcv bench` names).
    pub fn to_json(self) -> Value {
        json!({
            "os_cache": self.os_cache,
            "order": order_name(self.order),
            "num_workers": self.num_workers,
            "batches_ahead": self.batches_ahead,
        })
    }

    /// The `ffcv bench` flags that select these knobs.
    pub fn flags(&self) -> String {
        format!(
            "--order {} --num-workers {} --batches-ahead {}{}",
            order_name(self.order),
            self.num_workers,
            self.batches_ahead,
            if self.os_cache { "" } else { " --no-os-cache" }
        )
    }
}

/// What one bounded run measured. Times are seconds over the measured window (after warm-up).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Measurement {
    /// Samples delivered per second of wall time.
    pub samples_per_sec: f64,
    /// Wall time of the measured window.
    pub wall_seconds: f64,
    /// Time the producer waited for pages to arrive from storage.
    pub page_wait_seconds: f64,
    /// Wall time the producer spent running the pipeline stages on the worker pool (every
    /// worker takes chunks of the batch meanwhile).
    pub stage_seconds: f64,
    /// Time the producer waited for room in the queue of ready batches (the consumer is
    /// behind: it has not taken the batches already made).
    pub slot_wait_seconds: f64,
    /// Time the consumer waited in the iterator for the next batch (the loader is behind).
    pub consumer_wait_seconds: f64,
    /// Host time the producer spent in the slot stage (with a GPU stage: enqueueing the
    /// copies, and any wait for the device there); 0 without a slot stage.
    pub slot_stage_seconds: f64,
    /// Device time of the host-to-device copies (and on-device kernels) of the window's
    /// batches, from the GPU stage's CUDA-event timing: the timed batches' time scaled to
    /// every batch of the window. `None` without a GPU stage, or when no batch of the
    /// window was timed.
    pub h2d_seconds: Option<f64>,
    /// Bytes copied host to device in the window (0 without a GPU stage).
    pub h2d_bytes: u64,
    /// Batches went through a GPU stage.
    pub gpu_stage: bool,
    /// Peak resident set size of the process, when known.
    pub peak_rss_bytes: Option<u64>,
    /// Pipeline threads that ran.
    pub workers: usize,
    /// CPU seconds (user + system) the whole process used, when known.
    pub cpu_seconds: Option<f64>,
    /// Bytes the process cache read from storage (0 with the OS cache).
    pub storage_bytes_read: u64,
    /// The memory guard refused the configuration (the run failed for lack of memory).
    pub memory_guard_fired: bool,
}

impl Measurement {
    /// Fraction of the measured wall time waited on pages.
    pub fn page_wait_share(&self) -> f64 {
        share(self.page_wait_seconds, self.wall_seconds)
    }

    /// Fraction of the wall time the worker pool ran the stages (1.0 = always decoding).
    pub fn cpu_busy_share(&self) -> f64 {
        share(self.stage_seconds, self.wall_seconds)
    }

    /// CPUs the process kept busy on average (CPU seconds over wall seconds), when known.
    pub fn cpus_used(&self) -> Option<f64> {
        let cpu = self.cpu_seconds?;
        (self.wall_seconds > 0.0).then(|| cpu / self.wall_seconds)
    }

    /// Fraction of the wall time the producer waited for a free slot.
    pub fn slot_wait_share(&self) -> f64 {
        share(self.slot_wait_seconds, self.wall_seconds)
    }

    /// Fraction of the wall time spent copying to the GPU (0 without a GPU stage).
    pub fn h2d_share(&self) -> f64 {
        share(self.h2d_seconds.unwrap_or(0.0), self.wall_seconds)
    }

    /// Fraction of the wall time the producer spent in the slot stage.
    pub fn slot_stage_share(&self) -> f64 {
        share(self.slot_stage_seconds, self.wall_seconds)
    }

    /// Fraction of the wall time the consumer waited for batches.
    pub fn consumer_wait_share(&self) -> f64 {
        share(self.consumer_wait_seconds, self.wall_seconds)
    }

    /// How much of the wall time the GPU link was the limit: the copies' device time, or,
    /// when larger, the producer's time in the GPU stage (where it waits for the device
    /// when every stage slot's copy is still in flight). 0 without a GPU stage.
    pub fn gpu_link_share(&self) -> f64 {
        if self.gpu_stage || self.h2d_seconds.is_some() {
            self.h2d_share().max(self.slot_stage_share())
        } else {
            0.0
        }
    }

    /// The measurement as JSON (stable keys).
    pub fn to_json(self) -> Value {
        json!({
            "samples_per_sec": self.samples_per_sec,
            "wall_seconds": self.wall_seconds,
            "page_wait_seconds": self.page_wait_seconds,
            "stage_seconds": self.stage_seconds,
            "slot_wait_seconds": self.slot_wait_seconds,
            "consumer_wait_seconds": self.consumer_wait_seconds,
            "slot_stage_seconds": self.slot_stage_seconds,
            "h2d_seconds": self.h2d_seconds,
            "h2d_bytes": self.h2d_bytes,
            "gpu_stage": self.gpu_stage,
            "peak_rss_bytes": self.peak_rss_bytes,
            "workers": self.workers,
            "cpu_seconds": self.cpu_seconds,
            "storage_bytes_read": self.storage_bytes_read,
            "memory_guard_fired": self.memory_guard_fired,
            "page_wait_share": self.page_wait_share(),
            "cpu_busy_share": self.cpu_busy_share(),
            "slot_wait_share": self.slot_wait_share(),
            "h2d_share": self.h2d_share(),
            "slot_stage_share": self.slot_stage_share(),
            "consumer_wait_share": self.consumer_wait_share(),
        })
    }
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 && part.is_finite() {
        (part / whole).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// The resource that limits the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// Waiting on page reads: the disk (or network filesystem) is the limit.
    Storage,
    /// Decoding with all workers busy: more cores or a cheaper pipeline would help.
    Cpu,
    /// RSS near the budget, the memory guard firing, or a file larger than the memory allowed.
    Memory,
    /// Slot waits: the producer waits for room in the queue because the consumer does not
    /// take batches as fast as they are made.
    Consumer,
    /// Host-to-device copies dominate: their device time (or the producer's wait in the GPU
    /// stage) is close to the time per batch.
    GpuLink,
}

impl Resource {
    /// A short stable name for the JSON report.
    pub fn name(self) -> &'static str {
        match self {
            Resource::Storage => "storage",
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
            Resource::Consumer => "consumer",
            Resource::GpuLink => "gpu-link",
        }
    }

    /// What to do about it, in one sentence.
    pub fn advice(self) -> &'static str {
        match self {
            Resource::Storage => {
                "reads wait on storage: keep the file in the OS cache if it fits, use QuasiRandom with the process cache, or move the file to faster storage"
            }
            Resource::Cpu => {
                "the workers are busy decoding: use every physical core, lighter decoders (smaller crops, raw images instead of JPEG), or move element-wise transforms to the GPU"
            }
            Resource::Memory => {
                "memory is short: use the process cache with QuasiRandom, lower --batches-ahead, or raise --max-memory if the machine has room"
            }
            Resource::Consumer => {
                "the loader waits on the consumer: the training step is the bottleneck, the loader has headroom"
            }
            Resource::GpuLink => {
                "host-to-device copies dominate: send smaller dtypes (uint8) and convert on the GPU, or raise --batches-ahead to overlap copies"
            }
        }
    }
}

/// The scarce resource and the evidence for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// The limiting resource.
    pub resource: Resource,
    /// The figures that show it, one sentence each.
    pub evidence: Vec<String>,
}

impl Diagnosis {
    /// The diagnosis as JSON (stable keys).
    pub fn to_json(&self) -> Value {
        json!({
            "scarce_resource": self.resource.name(),
            "advice": self.resource.advice(),
            "evidence": self.evidence,
        })
    }
}

/// What the classification knows besides the measurement.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MemoryContext {
    /// The memory the process may use (the `--max-memory` budget, else available RAM).
    pub limit_bytes: Option<u64>,
    /// The rules found the file larger than that limit.
    pub file_larger_than_limit: bool,
    /// The file's size.
    pub file_bytes: u64,
}

/// Names memory as the scarce resource when no run succeeded: the guard refused every
/// configuration, or the file is larger than the memory allowed. `None` otherwise (nothing
/// was measured, so anything else would be a guess).
pub fn diagnose_unmeasured(
    guard_fired: bool,
    needed_bytes: Option<u64>,
    memory: &MemoryContext,
) -> Option<Diagnosis> {
    let mut evidence = memory_reasons(guard_fired, None, memory);
    if let Some(needed) = needed_bytes {
        evidence.push(format!(
            "the smallest page schedule tried needs {}: raise --max-memory to at least that, or lower --batch-size (QuasiRandom keeps a window of 2 x batch-size pages open)",
            super::rules::human_bytes(needed)
        ));
    }
    if evidence.is_empty() {
        return None;
    }
    Some(Diagnosis {
        resource: Resource::Memory,
        evidence,
    })
}

/// The sentences that show memory pressure, empty when there is none.
fn memory_reasons(
    guard_fired: bool,
    rss_share: Option<f64>,
    memory: &MemoryContext,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if guard_fired {
        reasons.push("the memory guard refused a configuration".to_owned());
    }
    if rss_share.is_some_and(|s| s >= MEMORY_PRESSURE_SHARE) {
        reasons.push(format!(
            "peak RSS is at least {:.0}% of the memory limit",
            100.0 * MEMORY_PRESSURE_SHARE
        ));
    }
    if memory.file_larger_than_limit {
        reasons.push(format!(
            "the file ({}) is larger than the memory it may use ({})",
            super::rules::human_bytes(memory.file_bytes),
            memory
                .limit_bytes
                .map_or_else(|| "unknown".to_owned(), super::rules::human_bytes)
        ));
    }
    reasons
}

/// Names the scarce resource of a measurement.
///
/// Memory first (it decides what may run at all: the guard fired, RSS at
/// [`MEMORY_PRESSURE_SHARE`] of the limit, or a file larger than the limit); otherwise the
/// largest of four shares: wall time waiting on pages (storage), wall time the producer
/// waited for queue room (consumer), wall time copying to the GPU ([`Measurement::gpu_link_share`]:
/// the copies' device time, or the producer's time in the GPU stage), and the workers'
/// busy share of their capacity (CPU).
pub fn diagnose(measurement: &Measurement, memory: &MemoryContext) -> Diagnosis {
    let mut evidence = Vec::new();
    let m = measurement;
    evidence.push(format!(
        "{:.0} samples/s over {:.2} s with {} workers",
        m.samples_per_sec, m.wall_seconds, m.workers
    ));
    evidence.push(format!(
        "waiting on page reads: {:.3} s ({:.0}% of wall time)",
        m.page_wait_seconds,
        100.0 * m.page_wait_share()
    ));
    evidence.push(format!(
        "pipeline stages on {} workers: {:.3} s ({:.0}% of wall time)",
        m.workers,
        m.stage_seconds,
        100.0 * m.cpu_busy_share()
    ));
    if let Some(cpus) = m.cpus_used() {
        evidence.push(format!(
            "process CPU use: {cpus:.2} CPUs on average over the window"
        ));
    }
    if m.storage_bytes_read > 0 {
        evidence.push(format!(
            "process cache read {} from storage",
            super::rules::human_bytes(m.storage_bytes_read)
        ));
    }
    evidence.push(format!(
        "producer waited for the consumer (queue full): {:.3} s ({:.0}% of wall time); consumer waited for batches: {:.3} s ({:.0}% of wall time)",
        m.slot_wait_seconds,
        100.0 * m.slot_wait_share(),
        m.consumer_wait_seconds,
        100.0 * m.consumer_wait_share()
    ));
    match m.h2d_seconds {
        Some(h2d) => {
            let rate = if h2d > 0.0 {
                format!(", {:.2} GB/s", m.h2d_bytes as f64 / h2d / 1e9)
            } else {
                String::new()
            };
            evidence.push(format!(
                "host-to-device copies: {h2d:.3} s of device time for {}{rate} ({:.0}% of wall time); producer in the GPU stage {:.3} s ({:.0}%)",
                super::rules::human_bytes(m.h2d_bytes),
                100.0 * m.h2d_share(),
                m.slot_stage_seconds,
                100.0 * m.slot_stage_share()
            ));
        }
        None if m.gpu_stage => evidence.push(format!(
            "GPU stage present, but no batch of the window had its copy timed (the first batch of each stage slot is not): producer in the GPU stage {:.3} s ({:.0}% of wall time); measure a longer window",
            m.slot_stage_seconds,
            100.0 * m.slot_stage_share()
        )),
        None => evidence.push("no GPU stage".to_owned()),
    }
    let rss_share = match (m.peak_rss_bytes, memory.limit_bytes) {
        (Some(rss), Some(limit)) if limit > 0 => Some(rss as f64 / limit as f64),
        _ => None,
    };
    if let Some(rss) = m.peak_rss_bytes {
        evidence.push(match (memory.limit_bytes, rss_share) {
            (Some(limit), Some(s)) => format!(
                "peak RSS {} ({:.0}% of the {} memory limit)",
                super::rules::human_bytes(rss),
                100.0 * s,
                super::rules::human_bytes(limit)
            ),
            _ => format!("peak RSS {}", super::rules::human_bytes(rss)),
        });
    }

    let memory_reasons = memory_reasons(m.memory_guard_fired, rss_share, memory);
    if !memory_reasons.is_empty() {
        evidence.extend(memory_reasons);
        return Diagnosis {
            resource: Resource::Memory,
            evidence,
        };
    }

    let candidates = [
        (Resource::Storage, m.page_wait_share()),
        (Resource::Consumer, m.slot_wait_share()),
        (Resource::GpuLink, m.gpu_link_share()),
        (Resource::Cpu, m.cpu_busy_share()),
    ];
    // Ties go to the earlier entry: a wait is a more specific finding than busy workers.
    let (resource, _) =
        candidates
            .iter()
            .copied()
            .fold((Resource::Cpu, f64::NEG_INFINITY), |best, next| {
                if next.1 > best.1 { next } else { best }
            });
    Diagnosis { resource, evidence }
}

/// Why a measurement run failed, with what the loader's typed error said about memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunError {
    /// The error, as one line.
    pub message: String,
    /// `Some(needed)` when the memory guard refused the configuration: the bytes of page
    /// slots its schedule needs (`page_cache::Error::MemoryBudget { needed, .. }`).
    pub memory_budget_needed: Option<u64>,
}

impl RunError {
    /// An error that is not the memory guard.
    pub fn other(message: impl Into<String>) -> RunError {
        RunError {
            message: message.into(),
            memory_budget_needed: None,
        }
    }

    /// The error the loader returned, classified by its variant (not its text).
    pub fn from_loader(error: &ffcv::Error) -> RunError {
        let memory_budget_needed = match error {
            ffcv::Error::Cache(ffcv::page_cache::Error::MemoryBudget { needed, .. }) => {
                Some(*needed)
            }
            _ => None,
        };
        RunError {
            message: error.to_string(),
            memory_budget_needed,
        }
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What one A/B trial found: the medians of each side, the gain of the candidate and the
/// spread the trial measured, and whether the change is kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// Median samples/s of the reference (the best configuration so far), over its rounds.
    pub reference_median: f64,
    /// Median samples/s of the candidate over its rounds.
    pub candidate_median: f64,
    /// `candidate_median - reference_median`.
    pub gain: f64,
    /// The run-to-run spread the trial saw: the larger of the two sides' ranges
    /// (max - min) of samples/s. A difference of medians within it is noise.
    pub spread: f64,
    /// Rounds of the side with fewer.
    pub rounds: usize,
    /// The change is kept: at least [`MIN_ROUNDS`] of each side, and a gain above the spread.
    pub kept: bool,
}

/// Judges an A/B trial from its rates (samples/s of each round of each side): keep the
/// candidate only when both sides ran at least [`MIN_ROUNDS`] rounds and the candidate's
/// median beats the reference's by more than the spread measured in the trial.
pub fn judge(reference: &[f64], candidate: &[f64]) -> Verdict {
    let range = |rates: &[f64]| {
        let max = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        if rates.is_empty() { 0.0 } else { max - min }
    };
    let reference_median = median(reference);
    let candidate_median = median(candidate);
    let gain = candidate_median - reference_median;
    let spread = range(reference).max(range(candidate));
    let rounds = reference.len().min(candidate.len());
    Verdict {
        reference_median,
        candidate_median,
        gain,
        spread,
        rounds,
        kept: rounds >= MIN_ROUNDS && gain > spread,
    }
}

/// The median (the mean of the middle two for an even count); 0 for no values.
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// One trial of the search: the baseline (one run of the starting configuration), or an
/// A/B trial of one knob change against the best configuration so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    /// The knob that was changed (`baseline` for the first run).
    pub knob: &'static str,
    /// The configuration tried (the candidate, B).
    pub knobs: Knobs,
    /// The configuration it was measured against (A; the same as `knobs` for the baseline).
    pub reference: Knobs,
    /// The scarce resource the change targets (`None` for the baseline).
    pub targets: Option<Resource>,
    /// Rates of the reference's rounds, in order (empty for the baseline).
    pub reference_rates: Vec<f64>,
    /// Every measurement of the candidate, in round order.
    pub measurements: Vec<Measurement>,
    /// The first run that failed, if one did (the trial stops there).
    pub error: Option<RunError>,
    /// The A/B judgement (`None` for the baseline).
    pub verdict: Option<Verdict>,
    /// Whether the change was kept (for the baseline: whether it ran).
    pub kept: bool,
}

impl Trial {
    /// Whether a run of the trial failed because the memory guard refused it.
    pub fn memory_guard_fired(&self) -> bool {
        self.error
            .as_ref()
            .is_some_and(|e| e.memory_budget_needed.is_some())
            || self.measurements.iter().any(|m| m.memory_guard_fired)
    }

    /// The candidate's measurement with the median rate (the one the report shows).
    pub fn median_measurement(&self) -> Option<&Measurement> {
        let mut sorted: Vec<&Measurement> = self.measurements.iter().collect();
        sorted.sort_by(|a, b| a.samples_per_sec.total_cmp(&b.samples_per_sec));
        sorted.get(sorted.len().saturating_sub(1) / 2).copied()
    }

    /// The candidate's rates, in round order.
    pub fn rates(&self) -> Vec<f64> {
        self.measurements
            .iter()
            .map(|m| m.samples_per_sec)
            .collect()
    }

    /// The trial as JSON (stable keys).
    pub fn to_json(&self) -> Value {
        json!({
            "knob": self.knob,
            "knobs": self.knobs.to_json(),
            "reference": self.reference.to_json(),
            "targets": self.targets.map(Resource::name),
            "rates": self.rates(),
            "reference_rates": self.reference_rates,
            "measurement": self.median_measurement().map(|m| m.to_json()),
            "error": self.error.as_ref().map(|e| e.message.clone()),
            "verdict": self.verdict.map(|v| json!({
                "reference_median": v.reference_median,
                "candidate_median": v.candidate_median,
                "gain": v.gain,
                "spread": v.spread,
                "rounds": v.rounds,
            })),
            "kept": self.kept,
        })
    }
}

/// A planned change that was not tried, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Untried {
    /// The knob.
    pub knob: &'static str,
    /// The configuration it would have measured.
    pub knobs: Knobs,
    /// Why not: it does not target the scarce resource, or the time budget was spent.
    pub because: String,
}

impl Untried {
    /// As JSON (stable keys).
    pub fn to_json(&self) -> Value {
        json!({
            "knob": self.knob,
            "knobs": self.knobs.to_json(),
            "because": self.because,
        })
    }
}

/// The values each knob may take in the search, besides the current one.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Candidates {
    /// Worker counts to try.
    pub num_workers: Vec<usize>,
    /// Queue depths to try.
    pub batches_ahead: Vec<usize>,
    /// Whether the other cache may be tried (not when the file does not fit memory).
    pub try_other_cache: bool,
    /// Orders to try (empty when the order is fixed by what the run needs).
    pub orders: Vec<OrderChoice>,
}

/// The outcome of the search.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuning {
    /// The baseline, then every A/B trial, in order.
    pub trials: Vec<Trial>,
    /// The best configuration found.
    pub best: Knobs,
    /// A measurement of it (`None` if even the baseline failed).
    pub best_measurement: Option<Measurement>,
    /// The scarce resource named from the best configuration's measurement, which chose
    /// the knobs tried.
    pub resource: Option<Resource>,
    /// Planned changes that were not tried, and why.
    pub untried: Vec<Untried>,
}

impl Tuning {
    /// Planned changes skipped because the time budget was spent.
    pub fn skipped(&self) -> usize {
        self.untried
            .iter()
            .filter(|u| u.because.starts_with("time budget"))
            .count()
    }
}

/// One planned change of one knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Pipeline threads.
    Workers(usize),
    /// Queue depth.
    Ahead(usize),
    /// The other cache.
    OtherCache,
    /// Another order.
    Order(OrderChoice),
}

impl Change {
    /// The knob's name, as the report and `ffcv bench` spell it.
    pub fn knob(self) -> &'static str {
        match self {
            Change::Workers(_) => "num_workers",
            Change::Ahead(_) => "batches_ahead",
            Change::OtherCache => "os_cache",
            Change::Order(_) => "order",
        }
    }

    /// The scarce resources this knob acts on. Workers add or remove decoding capacity
    /// (CPU); the queue depth overlaps page reads and host-to-device copies with decoding
    /// (storage, GPU link); the cache and the order decide which pages are read and when
    /// (storage). No knob here makes memory or the consumer less scarce by going faster:
    /// when they are named, nothing is tuned.
    pub fn targets(self) -> &'static [Resource] {
        match self {
            Change::Workers(_) => &[Resource::Cpu],
            Change::Ahead(_) => &[Resource::Storage, Resource::GpuLink],
            Change::OtherCache | Change::Order(_) => &[Resource::Storage],
        }
    }

    /// `knobs` with this change.
    pub fn apply(self, knobs: Knobs) -> Knobs {
        match self {
            Change::Workers(num_workers) => Knobs {
                num_workers,
                ..knobs
            },
            Change::Ahead(batches_ahead) => Knobs {
                batches_ahead,
                ..knobs
            },
            Change::OtherCache => Knobs {
                os_cache: !knobs.os_cache,
                ..knobs
            },
            Change::Order(order) => Knobs { order, ..knobs },
        }
    }
}

/// The changes the candidates allow, in the order the search considers them.
pub fn plan(candidates: &Candidates) -> Vec<Change> {
    let mut plan: Vec<Change> = Vec::new();
    plan.extend(candidates.num_workers.iter().map(|&n| Change::Workers(n)));
    plan.extend(candidates.batches_ahead.iter().map(|&b| Change::Ahead(b)));
    if candidates.try_other_cache {
        plan.push(Change::OtherCache);
    }
    plan.extend(candidates.orders.iter().map(|&o| Change::Order(o)));
    plan
}

/// The most runs a search over `candidates` can make: the baseline, and [`ROUNDS`] runs of
/// each side for every change that targets the resource with the most changes. The time
/// budget is cut into this many slices.
pub fn planned_runs(candidates: &Candidates) -> usize {
    let plan = plan(candidates);
    let most = [Resource::Cpu, Resource::Storage, Resource::GpuLink]
        .into_iter()
        .map(|r| plan.iter().filter(|c| c.targets().contains(&r)).count())
        .max()
        .unwrap_or(0);
    1 + 2 * ROUNDS * most.max(1)
}

/// The search: measures `start` once and names its scarce resource (`classify`), then tries
/// only the changes that target that resource, each as an A/B trial against the best
/// configuration so far: up to [`ROUNDS`] alternating rounds of reference and candidate
/// while `time_left` allows. A change is kept only when [`judge`] finds its gain above the
/// spread the trial measured; after a kept change the resource is named again from the new
/// best's measurement. `time_left` is asked before every run.
pub fn tune(
    start: Knobs,
    candidates: &Candidates,
    classify: &dyn Fn(&Measurement) -> Resource,
    time_left: &mut dyn FnMut() -> bool,
    measure: &mut dyn FnMut(&Knobs) -> Result<Measurement, RunError>,
) -> Tuning {
    let mut pending = plan(candidates);
    let mut trials = Vec::new();
    let mut untried = Vec::new();
    let skip_all =
        |pending: &mut Vec<Change>, untried: &mut Vec<Untried>, best: Knobs, why: &str| {
            for change in pending.drain(..) {
                untried.push(Untried {
                    knob: change.knob(),
                    knobs: change.apply(best),
                    because: why.to_owned(),
                });
            }
        };
    if !time_left() {
        skip_all(&mut pending, &mut untried, start, "time budget spent");
        return Tuning {
            trials,
            best: start,
            best_measurement: None,
            resource: None,
            untried,
        };
    }
    let baseline = measure(&start);
    let mut best = start;
    let mut best_measurement = baseline.as_ref().ok().copied();
    trials.push(Trial {
        knob: "baseline",
        knobs: start,
        reference: start,
        targets: None,
        reference_rates: Vec::new(),
        measurements: baseline.iter().copied().collect(),
        error: baseline.err(),
        verdict: None,
        kept: best_measurement.is_some(),
    });
    let Some(first) = best_measurement else {
        skip_all(
            &mut pending,
            &mut untried,
            start,
            "the baseline could not be measured",
        );
        return Tuning {
            trials,
            best,
            best_measurement,
            resource: None,
            untried,
        };
    };
    let mut resource = classify(&first);
    let mut out_of_time = false;
    loop {
        // A change to the value the best already has is nothing to try.
        pending.retain(|change| change.apply(best) != best);
        let Some(index) = pending
            .iter()
            .position(|change| change.targets().contains(&resource))
        else {
            break;
        };
        let change = pending.remove(index);
        let candidate = change.apply(best);
        let mut reference_rates = Vec::new();
        let mut reference_last = None;
        let mut measurements = Vec::new();
        let mut error = None;
        'rounds: for _ in 0..ROUNDS {
            for (side, knobs) in [(0, best), (1, candidate)] {
                if !time_left() {
                    break 'rounds;
                }
                match measure(&knobs) {
                    Ok(m) if side == 0 => {
                        reference_rates.push(m.samples_per_sec);
                        reference_last = Some(m);
                    }
                    Ok(m) => measurements.push(m),
                    Err(e) => {
                        error = Some(e);
                        break 'rounds;
                    }
                }
            }
        }
        if reference_rates.is_empty() && measurements.is_empty() && error.is_none() {
            // Not a single run fit in the budget: this and the later changes are skipped.
            pending.insert(0, change);
            out_of_time = true;
            break;
        }
        let rates: Vec<f64> = measurements.iter().map(|m| m.samples_per_sec).collect();
        let verdict = judge(&reference_rates, &rates);
        let kept = verdict.kept && error.is_none();
        let trial = Trial {
            knob: change.knob(),
            knobs: candidate,
            reference: best,
            targets: Some(resource),
            reference_rates,
            measurements,
            error,
            verdict: Some(verdict),
            kept,
        };
        if kept {
            best = candidate;
            best_measurement = trial.median_measurement().copied();
            if let Some(m) = &best_measurement {
                resource = classify(m);
            }
        } else if let Some(m) = reference_last {
            // The newest look at the best configuration.
            best_measurement = Some(m);
        }
        trials.push(trial);
    }
    for change in pending {
        let because = if out_of_time && change.targets().contains(&resource) {
            "time budget spent".to_owned()
        } else {
            let names: Vec<&str> = change.targets().iter().map(|r| r.name()).collect();
            format!(
                "targets {}, not the scarce resource ({})",
                names.join(" and "),
                resource.name()
            )
        };
        untried.push(Untried {
            knob: change.knob(),
            knobs: change.apply(best),
            because,
        });
    }
    Tuning {
        trials,
        best,
        best_measurement,
        resource: Some(resource),
        untried,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measurement(rate: f64) -> Measurement {
        Measurement {
            samples_per_sec: rate,
            wall_seconds: 1.0,
            workers: 2,
            ..Measurement::default()
        }
    }

    fn start() -> Knobs {
        Knobs {
            os_cache: true,
            order: OrderChoice::Random,
            num_workers: 2,
            batches_ahead: 3,
        }
    }

    #[test]
    fn page_waits_name_storage() {
        let m = Measurement {
            page_wait_seconds: 0.6,
            stage_seconds: 0.4,
            ..measurement(100.0)
        };
        let d = diagnose(&m, &MemoryContext::default());
        assert_eq!(d.resource, Resource::Storage);
        assert!(d.evidence.iter().any(|e| e.contains("60% of wall time")));
        assert!(d.evidence.iter().any(|e| e == "no GPU stage"));
    }

    #[test]
    fn busy_workers_name_the_cpu() {
        let m = Measurement {
            stage_seconds: 0.95,
            page_wait_seconds: 0.01,
            slot_wait_seconds: 0.02,
            cpu_seconds: Some(1.9),
            ..measurement(100.0)
        };
        let d = diagnose(&m, &MemoryContext::default());
        assert_eq!(d.resource, Resource::Cpu);
        assert!(
            d.evidence
                .iter()
                .any(|e| e == "pipeline stages on 2 workers: 0.950 s (95% of wall time)")
        );
        assert!(d.evidence.iter().any(|e| e.contains("1.90 CPUs")));
    }

    #[test]
    fn slot_waits_name_the_consumer() {
        let m = Measurement {
            slot_wait_seconds: 0.7,
            stage_seconds: 0.5,
            ..measurement(100.0)
        };
        assert_eq!(
            diagnose(&m, &MemoryContext::default()).resource,
            Resource::Consumer
        );
    }

    #[test]
    fn copies_name_the_gpu_link() {
        let m = Measurement {
            h2d_seconds: Some(0.8),
            stage_seconds: 0.4,
            ..measurement(100.0)
        };
        let d = diagnose(&m, &MemoryContext::default());
        assert_eq!(d.resource, Resource::GpuLink);
        assert!(!d.evidence.iter().any(|e| e == "no GPU stage"));
        let unreported = Measurement {
            gpu_stage: true,
            ..measurement(100.0)
        };
        let d = diagnose(&unreported, &MemoryContext::default());
        assert!(
            d.evidence
                .iter()
                .any(|e| e.starts_with("GPU stage present"))
        );
    }

    #[test]
    fn a_consumer_that_holds_the_producer_back_is_named() {
        // The producer made batches faster than they were taken: it waited on the queue,
        // while the consumer hardly ever waited for a batch.
        let m = Measurement {
            slot_wait_seconds: 0.8,
            consumer_wait_seconds: 0.01,
            stage_seconds: 0.15,
            ..measurement(100.0)
        };
        let d = diagnose(&m, &MemoryContext::default());
        assert_eq!(d.resource, Resource::Consumer);
        assert!(
            d.evidence.iter().any(|e| e
                == "producer waited for the consumer (queue full): 0.800 s (80% of wall time); \
                    consumer waited for batches: 0.010 s (1% of wall time)"),
            "{:?}",
            d.evidence
        );
        // The other way round, the loader is behind: the consumer waits, the workers are
        // busy, and the CPU is named.
        let behind = Measurement {
            slot_wait_seconds: 0.001,
            consumer_wait_seconds: 0.9,
            stage_seconds: 0.85,
            ..measurement(100.0)
        };
        assert_eq!(
            diagnose(&behind, &MemoryContext::default()).resource,
            Resource::Cpu
        );
    }

    #[test]
    fn copy_time_close_to_the_batch_time_names_the_gpu_link() {
        // 0.85 s of device copy time in a 1 s window: the link is busy 85% of each batch.
        let m = Measurement {
            gpu_stage: true,
            h2d_seconds: Some(0.85),
            h2d_bytes: 8_500_000_000,
            slot_stage_seconds: 0.05,
            stage_seconds: 0.5,
            consumer_wait_seconds: 0.6,
            ..measurement(100.0)
        };
        let d = diagnose(&m, &MemoryContext::default());
        assert_eq!(d.resource, Resource::GpuLink);
        let copies = d
            .evidence
            .iter()
            .find(|e| e.starts_with("host-to-device copies"))
            .unwrap();
        assert!(copies.contains("0.850 s of device time"), "{copies}");
        assert!(copies.contains("10.00 GB/s"), "{copies}");
        assert!(copies.contains("(85% of wall time)"), "{copies}");
        // The copy time is known: no caveat.
        assert!(
            !d.evidence
                .iter()
                .any(|e| e.starts_with("GPU stage present"))
        );

        // Cheap copies with busy workers: the GPU is there but the CPU is the limit.
        let cheap = Measurement {
            h2d_seconds: Some(0.1),
            stage_seconds: 0.9,
            ..m
        };
        assert_eq!(
            diagnose(&cheap, &MemoryContext::default()).resource,
            Resource::Cpu
        );
    }

    #[test]
    fn a_producer_stuck_in_the_gpu_stage_names_the_gpu_link() {
        // No batch of the window was timed, but the producer spent most of it waiting in
        // the GPU stage for the device.
        let m = Measurement {
            gpu_stage: true,
            h2d_seconds: None,
            slot_stage_seconds: 0.7,
            stage_seconds: 0.2,
            ..measurement(100.0)
        };
        let d = diagnose(&m, &MemoryContext::default());
        assert_eq!(d.resource, Resource::GpuLink);
        assert!(
            d.evidence.iter().any(|e| e
                .starts_with("GPU stage present, but no batch of the window")
                && e.contains("0.700 s (70% of wall time)")),
            "{:?}",
            d.evidence
        );
        // A custom slot stage (no GPU) taking the time is not the GPU link.
        let custom = Measurement {
            gpu_stage: false,
            ..m
        };
        let d = diagnose(&custom, &MemoryContext::default());
        assert_eq!(d.resource, Resource::Cpu);
        assert!(d.evidence.iter().any(|e| e == "no GPU stage"));
    }

    #[test]
    fn memory_pressure_wins_over_any_wait() {
        let busy = Measurement {
            page_wait_seconds: 0.9,
            peak_rss_bytes: Some(95),
            ..measurement(100.0)
        };
        let near_budget = MemoryContext {
            limit_bytes: Some(100),
            ..MemoryContext::default()
        };
        assert_eq!(diagnose(&busy, &near_budget).resource, Resource::Memory);
        let roomy = MemoryContext {
            limit_bytes: Some(1000),
            ..MemoryContext::default()
        };
        assert_eq!(diagnose(&busy, &roomy).resource, Resource::Storage);
        let guard = Measurement {
            memory_guard_fired: true,
            ..measurement(0.0)
        };
        let d = diagnose(&guard, &MemoryContext::default());
        assert_eq!(d.resource, Resource::Memory);
        assert!(d.evidence.iter().any(|e| e.contains("memory guard")));
        let declared = MemoryContext {
            limit_bytes: Some(1 << 20),
            file_larger_than_limit: true,
            file_bytes: 3 << 20,
        };
        let d = diagnose(&measurement(100.0), &declared);
        assert_eq!(d.resource, Resource::Memory);
        assert!(
            d.evidence
                .iter()
                .any(|e| e.contains("3.0 MiB") && e.contains("1.0 MiB"))
        );
    }

    #[test]
    fn without_a_measurement_only_memory_can_be_named() {
        let fits = MemoryContext {
            limit_bytes: Some(1 << 30),
            file_larger_than_limit: false,
            file_bytes: 1 << 20,
        };
        assert_eq!(diagnose_unmeasured(false, None, &fits), None);
        let d = diagnose_unmeasured(true, None, &fits).unwrap();
        assert_eq!(d.resource, Resource::Memory);
        assert_eq!(d.evidence, ["the memory guard refused a configuration"]);
        let d = diagnose_unmeasured(true, Some(160 << 20), &fits).unwrap();
        assert!(d.evidence[1].starts_with("the smallest page schedule tried needs 160.0 MiB"));
    }

    #[test]
    fn a_memory_budget_error_is_recognised_by_its_variant_not_its_text() {
        let guard = ffcv::Error::Cache(ffcv::page_cache::Error::MemoryBudget {
            path: "f.beton".into(),
            needed: 167_772_160,
            budget: 1 << 20,
            num_slots: 20,
            page_size: 8 << 20,
        });
        let e = RunError::from_loader(&guard);
        assert_eq!(e.memory_budget_needed, Some(167_772_160));
        assert!(e.message.contains("167772160 bytes of page slots"));
        // An error whose text talks about memory is not the guard.
        let other = ffcv::Error::Config {
            path: "f.beton".into(),
            reason: "not enough memory for the batch".into(),
        };
        assert_eq!(RunError::from_loader(&other).memory_budget_needed, None);
    }

    #[test]
    fn a_gain_inside_the_spread_is_rejected_and_one_beyond_it_kept() {
        // The case: 2,457 vs 2,099 samples/s is inside a +-30% noise.
        let v = judge(&[2099.0, 2700.0, 2300.0], &[2457.0, 2150.0, 2600.0]);
        assert_eq!(v.reference_median, 2300.0);
        assert_eq!(v.candidate_median, 2457.0);
        assert_eq!(v.gain, 157.0);
        assert_eq!(v.spread, 601.0);
        assert!(!v.kept);
        // A clear win: every candidate round above every reference round.
        let v = judge(&[100.0, 104.0, 102.0], &[150.0, 148.0, 153.0]);
        assert_eq!((v.gain, v.spread, v.rounds), (48.0, 5.0, 3));
        assert!(v.kept);
        // A loss is never kept, however steady.
        assert!(!judge(&[100.0, 100.0], &[90.0, 90.0]).kept);
        // Equal gain and spread is not enough.
        assert!(!judge(&[100.0, 110.0], &[110.0, 120.0]).kept);
    }

    #[test]
    fn one_round_of_each_side_keeps_nothing_however_large_the_gain() {
        let v = judge(&[100.0], &[1000.0]);
        assert_eq!(v.rounds, 1);
        assert_eq!(v.spread, 0.0);
        assert!(!v.kept);
        assert!(!judge(&[], &[]).kept);
    }

    #[test]
    fn knobs_target_the_resources_they_act_on() {
        assert_eq!(Change::Workers(4).targets(), [Resource::Cpu]);
        assert_eq!(
            Change::Ahead(1).targets(),
            [Resource::Storage, Resource::GpuLink]
        );
        assert_eq!(Change::OtherCache.targets(), [Resource::Storage]);
        assert_eq!(
            Change::Order(OrderChoice::QuasiRandom).targets(),
            [Resource::Storage]
        );
        for change in [
            Change::Workers(1),
            Change::Ahead(6),
            Change::OtherCache,
            Change::Order(OrderChoice::Random),
        ] {
            assert!(!change.targets().contains(&Resource::Memory));
            assert!(!change.targets().contains(&Resource::Consumer));
        }
    }

    fn all_candidates() -> Candidates {
        Candidates {
            num_workers: vec![1, 4],
            batches_ahead: vec![1, 6],
            try_other_cache: true,
            orders: vec![OrderChoice::QuasiRandom],
        }
    }

    /// A recorded machine: each configuration's rates, handed out in turn.
    struct Recorded {
        rates: Vec<(Knobs, Vec<f64>)>,
        measured: Vec<Knobs>,
    }

    impl Recorded {
        fn measure(&mut self, knobs: &Knobs) -> Result<Measurement, RunError> {
            self.measured.push(*knobs);
            let (_, rates) = self
                .rates
                .iter_mut()
                .find(|(k, _)| k == knobs)
                .unwrap_or_else(|| panic!("unrecorded configuration {knobs:?}"));
            Ok(measurement(rates.remove(0)))
        }
    }

    #[test]
    fn a_knob_not_targeting_the_scarce_resource_is_never_tried() {
        // The CPU is scarce: only worker counts are tried. The batches_ahead 1
        // "win" is never measured at all.
        let start = start();
        let more = Knobs {
            num_workers: 4,
            ..start
        };
        let fewer = Knobs {
            num_workers: 1,
            ..start
        };
        let mut machine = Recorded {
            rates: vec![
                (
                    start,
                    vec![2099.0, 2300.0, 2200.0, 2250.0, 2150.0, 2210.0, 2190.0],
                ),
                (fewer, vec![1200.0, 1250.0, 1190.0]),
                (more, vec![2457.0, 2100.0, 2350.0]),
            ],
            measured: Vec::new(),
        };
        let t = tune(
            start,
            &all_candidates(),
            &|_| Resource::Cpu,
            &mut || true,
            &mut |k| machine.measure(k),
        );
        assert!(
            machine
                .measured
                .iter()
                .all(|k| k.batches_ahead == 3 && k.os_cache)
        );
        assert!(
            machine
                .measured
                .iter()
                .all(|k| k.order == OrderChoice::Random)
        );
        let summary: Vec<(&str, usize, bool)> = t
            .trials
            .iter()
            .map(|t| (t.knob, t.knobs.num_workers, t.kept))
            .collect();
        assert_eq!(
            summary,
            [
                ("baseline", 2, true),
                ("num_workers", 1, false),
                ("num_workers", 4, false)
            ]
        );
        // 4 workers: median 2350 against 2190 (rounds 2150, 2210, 2190), a gain of 160
        // inside the spread of 357 (2457 - 2100): not kept.
        let v = t.trials[2].verdict.unwrap();
        assert_eq!((v.reference_median, v.candidate_median), (2190.0, 2350.0));
        assert_eq!(v.spread, 357.0);
        assert_eq!(t.best, start);
        assert_eq!(t.resource, Some(Resource::Cpu));
        let untried: Vec<(&str, &str)> = t
            .untried
            .iter()
            .map(|u| (u.knob, u.because.as_str()))
            .collect();
        assert_eq!(
            untried,
            [
                (
                    "batches_ahead",
                    "targets storage and gpu-link, not the scarce resource (cpu)"
                ),
                (
                    "batches_ahead",
                    "targets storage and gpu-link, not the scarce resource (cpu)"
                ),
                ("os_cache", "targets storage, not the scarce resource (cpu)"),
                ("order", "targets storage, not the scarce resource (cpu)"),
            ]
        );
    }

    #[test]
    fn rounds_alternate_reference_and_candidate_and_a_clear_win_is_kept() {
        let start = start();
        let more = Knobs {
            num_workers: 4,
            ..start
        };
        let candidates = Candidates {
            num_workers: vec![4],
            ..Candidates::default()
        };
        let mut machine = Recorded {
            rates: vec![
                (start, vec![100.0, 101.0, 99.0, 102.0]),
                (more, vec![180.0, 178.0, 183.0]),
            ],
            measured: Vec::new(),
        };
        let t = tune(
            start,
            &candidates,
            &|m| {
                if m.samples_per_sec > 150.0 {
                    Resource::Consumer
                } else {
                    Resource::Cpu
                }
            },
            &mut || true,
            &mut |k| machine.measure(k),
        );
        assert_eq!(
            machine.measured,
            [start, start, more, start, more, start, more]
        );
        assert_eq!(t.trials[1].reference_rates, [101.0, 99.0, 102.0]);
        assert_eq!(t.trials[1].rates(), [180.0, 178.0, 183.0]);
        assert!(t.trials[1].kept);
        assert_eq!(t.best, more);
        assert_eq!(t.best_measurement.unwrap().samples_per_sec, 180.0);
        // Named again from the new best: the consumer, which no knob targets.
        assert_eq!(t.resource, Some(Resource::Consumer));
    }

    #[test]
    fn the_time_budget_cuts_rounds_and_a_trial_without_two_of_each_keeps_nothing() {
        let start = start();
        let fewer = Knobs {
            num_workers: 1,
            ..start
        };
        let mut machine = Recorded {
            rates: vec![(start, vec![100.0, 100.0]), (fewer, vec![500.0])],
            measured: Vec::new(),
        };
        // Three runs fit: the baseline, then one round of A and B.
        let mut runs_left = 3;
        let mut time_left = || {
            runs_left -= 1;
            runs_left >= 0
        };
        let t = tune(
            start,
            &all_candidates(),
            &|_| Resource::Cpu,
            &mut time_left,
            &mut |k| machine.measure(k),
        );
        assert_eq!(machine.measured.len(), 3);
        assert_eq!(t.trials.len(), 2);
        assert_eq!(t.trials[1].knobs.num_workers, 1);
        assert!(!t.trials[1].kept, "one round of each is not evidence");
        assert_eq!(t.best, start);
        // The other worker count found no time at all.
        assert_eq!(t.skipped(), 1);
        let none = tune(
            start,
            &all_candidates(),
            &|_| Resource::Cpu,
            &mut || false,
            &mut |_| unreachable!(),
        );
        assert!(none.trials.is_empty());
        assert_eq!(none.skipped(), 6);
        assert_eq!(none.best, start);
    }

    #[test]
    fn a_failed_baseline_tries_nothing() {
        let t = tune(
            start(),
            &all_candidates(),
            &|_| Resource::Cpu,
            &mut || true,
            &mut |_| Err(RunError::other("no such field")),
        );
        assert_eq!(t.trials.len(), 1);
        assert!(!t.trials[0].kept);
        assert_eq!(t.best_measurement, None);
        assert_eq!(t.resource, None);
        assert!(
            t.untried
                .iter()
                .all(|u| u.because == "the baseline could not be measured")
        );
    }

    #[test]
    fn a_failing_candidate_is_not_kept_and_its_error_recorded() {
        let start = start();
        let candidates = Candidates {
            try_other_cache: true,
            ..Candidates::default()
        };
        let t = tune(
            start,
            &candidates,
            &|_| Resource::Storage,
            &mut || true,
            &mut |k| {
                if k.os_cache {
                    Ok(measurement(100.0))
                } else {
                    Err(RunError {
                        message: "budget".into(),
                        memory_budget_needed: Some(64),
                    })
                }
            },
        );
        assert_eq!(t.trials[1].knob, "os_cache");
        assert!(!t.trials[1].kept);
        assert!(t.trials[1].memory_guard_fired());
        assert_eq!(t.best, start);
    }

    #[test]
    fn the_budget_is_sliced_for_the_resource_with_the_most_changes() {
        // Storage: batches_ahead 1 and 6, the cache, one order = 4 changes, 3 rounds of 2.
        assert_eq!(planned_runs(&all_candidates()), 1 + 2 * 3 * 4);
        assert_eq!(planned_runs(&Candidates::default()), 1 + 2 * 3);
    }
}
