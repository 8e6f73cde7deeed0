//! The report of `ffcv doctor`: the facts, the rules that fired, the measurements, the
//! scarce resource with its evidence and the recommended `ffcv bench` command, as text or
//! as one JSON document.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::args::DoctorArgs;
use super::diagnose;
use super::facts::{self, MachineFacts};
use super::file_facts::FileFacts;
use super::rules::{self, Recommendation, human_bytes, order_name};
use super::source::SourceFacts;
use super::tune::{self, Knobs, Tuning};
use crate::commands::order::OrderChoice;

/// Everything the doctor found, for printing.
pub struct Report<'a> {
    /// The arguments, the doctor's fallback decoders and prefetch depth included.
    pub args: &'a DoctorArgs,
    /// The facts about the file and its pipeline.
    pub file: &'a FileFacts,
    /// Where the bytes come from (kind; latency and bandwidth when remote).
    pub source: &'a SourceFacts,
    /// The facts about this machine.
    pub machine: &'a MachineFacts,
    /// The decision rules' choices and the rules that fired.
    pub recommendation: &'a Recommendation,
    /// The configuration the search started from.
    pub start: Knobs,
    /// The search's trials; `None` with `--no-measure`.
    pub tuning: Option<&'a Tuning>,
    /// The scarce resource named from the best measurement, when one was named.
    pub diagnosis: Option<&'a diagnose::Diagnosis>,
    /// The device rule's advice, when it fired ([`rules::normalize_on_device`]).
    pub device_advice: Option<&'a rules::Fired>,
}

impl Report<'_> {
    /// The settings to use: the best measured; the rules' start with `--no-measure`; none
    /// when measuring was asked for and no configuration could be measured.
    pub fn recommended(&self) -> Option<Knobs> {
        match self.tuning {
            None => Some(self.start),
            Some(t) => t.best_measurement.is_some().then_some(t.best),
        }
    }

    /// The `ffcv bench` command that runs the recommended settings, or `None` when nothing
    /// is recommended.
    pub fn command(&self) -> Option<String> {
        let knobs = self.recommended()?;
        let mut command = format!(
            "ffcv bench {} --batch-size {} {}",
            self.args.loader.file.display(),
            self.args.loader.batch_size,
            knobs.flags()
        );
        if let Some(seed) = self.recommendation.seed.or(self.args.loader.seed) {
            let _ = write!(command, " --seed {seed}");
        }
        command.push_str(&self.args.loader.cache.flags());
        for (flag, on) in [
            (" --no-drop-last", self.args.loader.no_drop_last),
            (" --recompile", self.args.loader.recompile),
            (" --no-compile", self.args.loader.no_compile),
        ] {
            if on {
                command.push_str(flag);
            }
        }
        if let Some((world_size, rank)) = self.args.loader.distributed() {
            let _ = write!(command, " --world-size {world_size} --rank {rank}");
        }
        for decoder in &self.args.loader.decoders {
            let _ = write!(command, " --decoder {}", decoder.text);
        }
        for transform in &self.args.loader.transforms {
            let _ = write!(command, " --transform {}", transform.text());
        }
        if self.args.loader.device != ffcv::gpu::DeviceSpec::Cpu {
            let _ = write!(command, " --device {}", self.args.loader.device);
        }
        Some(command)
    }

    /// The report as one JSON document (`--json`).
    pub fn to_json(&self) -> Value {
        json!({
            "file": self.args.loader.file.display().to_string(),
            "facts": {
                "file_bytes": self.file.bytes,
                "samples": self.file.samples,
                "page_size": self.file.page_size,
                "max_memory_bytes": self.args.loader.cache.max_memory,
                "source": self.source.to_json(),
                "machine": self.machine.to_json(),
                "batch_size": self.args.loader.batch_size,
                "pipeline": self.file.pipeline,
                "jpeg": self.file.has_jpeg,
                "decoder_fallbacks": self.file.fallbacks.iter().map(|(decoder, because)| json!({
                    "decoder": decoder.text,
                    "because": because,
                })).collect::<Vec<_>>(),
                "distributed": self.args.loader.distributed().is_some(),
                "world_size": self.args.world_size(),
                "rank": self.args.rank(),
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
            "recommended_seed": self.recommendation.seed.or(self.args.loader.seed),
            "command": self.command(),
        })
    }

    /// The report as text for a terminal.
    pub fn text(&self) -> String {
        let mut t = String::new();
        let m = self.machine;
        let f = self.file;
        let _ = writeln!(
            t,
            "ffcv doctor: {}\n\nfacts",
            self.args.loader.file.display()
        );
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
        let budget = self
            .args
            .loader
            .cache
            .max_memory
            .map_or_else(String::new, |b| {
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
        let _ = writeln!(t, "  batch size    {}", self.args.loader.batch_size);
        let _ = writeln!(
            t,
            "  pipeline      {}{}",
            f.pipeline.join(", "),
            if f.has_jpeg { " (JPEG images)" } else { "" }
        );
        let _ = writeln!(
            t,
            "  distributed   {}",
            if let Some((world_size, rank)) = self.args.loader.distributed() {
                format!("yes, rank {rank} of {world_size}")
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
                        .or(self.args.loader.cache.max_memory)
                        .filter(|_| !knobs.os_cache)
                        .map_or_else(String::new, |b| format!(" max_memory={b}")),
                    knobs
                        .quasi_buffer_pages
                        .or(self
                            .args
                            .loader
                            .cache
                            .quasi_buffer_pages
                            .map(|p| p as usize))
                        .filter(|_| knobs.order == OrderChoice::QuasiRandom)
                        .map_or_else(String::new, |p| format!(" quasi_buffer_pages={p}")),
                    self.recommendation
                        .seed
                        .or(self.args.loader.seed)
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
