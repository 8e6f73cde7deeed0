//! The searching half of `ffcv doctor`: A/B trials of only the knobs that target the scarce
//! resource, each kept only when its gain exceeds the spread the trial measured.
//!
//! Pure: it takes a `measure` callback, so the tests drive it with recorded measurements and
//! the command drives it with the loader.

use serde_json::{Value, json};

use super::diagnose::{Measurement, Resource};
use super::rules::order_name;
use crate::commands::order::OrderChoice;

/// Rounds of each side an A/B trial runs when time allows (A, B, A, B, A, B).
pub const ROUNDS: usize = 3;

/// Fewer rounds of either side than this leave the spread unknown: such a trial keeps
/// nothing.
pub const MIN_ROUNDS: usize = 2;

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
    /// The process cache's memory budget the doctor chose (`None`: the user's
    /// `--max-memory`, or the loader's default).
    pub max_memory: Option<u64>,
    /// QuasiRandom's buffer the doctor chose to fit that budget (`None`: the user's
    /// `--quasi-buffer-pages`, or the loader's default).
    pub quasi_buffer_pages: Option<usize>,
}

impl Knobs {
    /// The knobs as JSON (stable keys, the `ffcv bench` names).
    pub fn to_json(self) -> Value {
        json!({
            "os_cache": self.os_cache,
            "order": order_name(self.order),
            "num_workers": self.num_workers,
            "batches_ahead": self.batches_ahead,
            "max_memory": self.max_memory,
            "quasi_buffer_pages": self.quasi_buffer_pages,
        })
    }

    /// The `ffcv bench` flags that select these knobs.
    pub fn flags(&self) -> String {
        let mut flags = format!(
            "--order {} --num-workers {} --batches-ahead {}{}",
            order_name(self.order),
            self.num_workers,
            self.batches_ahead,
            if self.os_cache { "" } else { " --no-os-cache" }
        );
        if let Some(bytes) = self.max_memory {
            flags.push_str(&format!(" --max-memory {bytes}"));
        }
        if let Some(pages) = self.quasi_buffer_pages {
            flags.push_str(&format!(" --quasi-buffer-pages {pages}"));
        }
        flags
    }
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
mod tests;
