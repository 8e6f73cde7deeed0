//! The classifying half of `ffcv doctor`: what one bounded run measured and the scarce
//! resource named from it (memory, storage, CPU, the consumer or the GPU link), with the
//! figures as evidence.
//!
//! Pure: it takes measurements, so the tests drive it with recorded figures.

use serde_json::{Value, json};

/// RSS at or above this share of the memory budget is memory pressure.
pub const MEMORY_PRESSURE_SHARE: f64 = 0.9;

/// A window that read at least this share of the bytes it needed from storage got its
/// data from the disk (a warm cache reads about 0).
pub const FROM_STORAGE_SHARE: f64 = 0.5;

/// Major faults per delivered sample at or above this: the samples come from the disk
/// through faults on the map (the OS cache), whatever `read_bytes` says.
pub const MAJOR_FAULTS_PER_SAMPLE: f64 = 0.05;

/// Process CPU time under this share of the wall time of every CPU it may use: the CPUs
/// are idle enough that they are not the limit.
pub const CPU_IDLE_SHARE: f64 = 0.75;

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
    /// Peak resident set size of the process (`VmHWM`, mapped file pages included),
    /// when known.
    pub peak_rss_bytes: Option<u64>,
    /// Peak of the memory the process held that the kernel cannot drop (anonymous and
    /// shared pages, sampled during the window), when known: what memory pressure is
    /// judged by.
    pub peak_held_bytes: Option<u64>,
    /// Pipeline threads that ran.
    pub workers: usize,
    /// CPU seconds (user + system) the whole process used, when known.
    pub cpu_seconds: Option<f64>,
    /// Bytes the process cache read from storage (0 with the OS cache).
    pub storage_bytes_read: u64,
    /// The memory guard refused the configuration (the run failed for lack of memory).
    pub memory_guard_fired: bool,
    /// Bytes the process read from storage (`/proc/self/io` `read_bytes`: the process
    /// cache's reads and the OS cache's page faults alike), when known.
    pub read_bytes: Option<u64>,
    /// Major page faults of the process (faults that waited on storage), when known.
    pub major_faults: Option<u64>,
    /// Stored payload of the samples delivered (enabled fields): the bytes the window
    /// needed.
    pub payload_bytes: u64,
    /// CPUs the process may use.
    pub cpus: usize,
}

impl Measurement {
    /// Bytes read from storage per byte the window needed; `None` when either is unknown.
    pub fn read_amplification(&self) -> Option<f64> {
        let read = self.read_bytes?;
        (self.payload_bytes > 0).then(|| read as f64 / self.payload_bytes as f64)
    }

    /// Process CPU time over wall time times the CPUs it may use (0..1), when known.
    pub fn cpu_utilisation(&self) -> Option<f64> {
        let cpus = self.cpus_used()?;
        (self.cpus > 0).then(|| cpus / self.cpus as f64)
    }

    /// Major faults per delivered sample, when known.
    pub fn major_faults_per_sample(&self) -> Option<f64> {
        let faults = self.major_faults?;
        let samples = self.samples_per_sec * self.wall_seconds;
        (samples > 0.0).then(|| faults as f64 / samples)
    }

    /// The data came from the disk and the CPUs were idle: storage limits the run,
    /// whatever the stage timers say (a fault on the map is taken inside a stage and
    /// counts as its time).
    pub fn storage_bound(&self) -> bool {
        let from_storage = self
            .read_amplification()
            .is_some_and(|a| a >= FROM_STORAGE_SHARE)
            || self
                .major_faults_per_sample()
                .is_some_and(|f| f >= MAJOR_FAULTS_PER_SAMPLE);
        let idle = self.cpu_utilisation().is_some_and(|u| u < CPU_IDLE_SHARE);
        from_storage && idle && self.slot_wait_share() < 0.5
    }

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
            "peak_held_bytes": self.peak_held_bytes,
            "workers": self.workers,
            "cpu_seconds": self.cpu_seconds,
            "storage_bytes_read": self.storage_bytes_read,
            "memory_guard_fired": self.memory_guard_fired,
            "read_bytes": self.read_bytes,
            "major_faults": self.major_faults,
            "payload_bytes": self.payload_bytes,
            "cpus": self.cpus,
            "read_amplification": self.read_amplification(),
            "cpu_utilisation": self.cpu_utilisation(),
            "storage_bound": self.storage_bound(),
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
    /// Memory held near the budget, the memory guard firing, or a file larger than the memory allowed.
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
    /// The peak memory held as a share of the memory limit, when both were known: memory
    /// is named when it reaches [`MEMORY_PRESSURE_SHARE`].
    pub memory_held_share: Option<f64>,
}

impl Diagnosis {
    /// The diagnosis as JSON (stable keys).
    pub fn to_json(&self) -> Value {
        json!({
            "scarce_resource": self.resource.name(),
            "advice": self.resource.advice(),
            "evidence": self.evidence,
            "memory_held_share": self.memory_held_share,
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
        memory_held_share: None,
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
            "the memory held peaked at {:.0}% of the memory limit or more",
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
/// Memory first (it decides what may run at all: the guard fired, or RSS at
/// [`MEMORY_PRESSURE_SHARE`] of the limit; a file larger than the limit is only evidence
/// here, since it already chose the configuration measured); then storage when the
/// kernel's counters show the data came from the disk while the CPUs idled
/// ([`Measurement::storage_bound`]: a fault on the OS cache's map is taken inside a
/// pipeline stage, so the stage timers alone would name the CPU); otherwise the largest of
/// four shares: wall time waiting on pages (storage), wall time the producer waited for
/// queue room (consumer), wall time copying to the GPU ([`Measurement::gpu_link_share`]:
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
        evidence.push(match m.cpu_utilisation() {
            Some(u) => format!(
                "process CPU use: {cpus:.2} CPUs on average over the window, {:.0}% of the {} it may use (CPU utilisation)",
                100.0 * u,
                m.cpus
            ),
            None => format!("process CPU use: {cpus:.2} CPUs on average over the window"),
        });
    }
    match (m.read_bytes, m.read_amplification()) {
        (Some(read), Some(amp)) => evidence.push(format!(
            "read from storage: {} for {} of samples (read amplification {amp:.2})",
            super::rules::human_bytes(read),
            super::rules::human_bytes(m.payload_bytes)
        )),
        (Some(read), None) => evidence.push(format!(
            "read from storage: {}",
            super::rules::human_bytes(read)
        )),
        _ => {}
    }
    if let Some(faults) = m.major_faults {
        evidence.push(format!(
            "major page faults: {faults} ({:.3} per sample)",
            m.major_faults_per_sample().unwrap_or(0.0)
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
    // Mapped file pages are the kernel's cache, dropped under pressure: memory pressure
    // is judged by the memory the process holds (anonymous and shared pages).
    let rss_share = match (m.peak_held_bytes, memory.limit_bytes) {
        (Some(held), Some(limit)) if limit > 0 => Some(held as f64 / limit as f64),
        _ => None,
    };
    if let Some(held) = m.peak_held_bytes {
        evidence.push(match (memory.limit_bytes, rss_share) {
            (Some(limit), Some(s)) => format!(
                "peak memory held {} ({:.0}% of the {} memory limit; anonymous and shared pages)",
                super::rules::human_bytes(held),
                100.0 * s,
                super::rules::human_bytes(limit)
            ),
            _ => format!(
                "peak memory held {} (anonymous and shared pages)",
                super::rules::human_bytes(held)
            ),
        });
    }
    if let Some(rss) = m.peak_rss_bytes {
        evidence.push(format!(
            "peak RSS {} (mapped file pages included)",
            super::rules::human_bytes(rss)
        ));
    }

    // A file larger than the memory is why the run started from the process cache with
    // QuasiRandom; once that runs, it is evidence, and what limits the run is measured.
    let measured_memory = MemoryContext {
        file_larger_than_limit: false,
        ..*memory
    };
    if memory.file_larger_than_limit {
        evidence.extend(memory_reasons(false, None, memory));
    }
    let memory_reasons = memory_reasons(m.memory_guard_fired, rss_share, &measured_memory);
    if !memory_reasons.is_empty() {
        evidence.extend(memory_reasons);
        return Diagnosis {
            resource: Resource::Memory,
            evidence,
            memory_held_share: rss_share,
        };
    }

    if m.storage_bound() {
        evidence.push(format!(
            "the data came from storage while the CPUs were {:.0}% used: storage-bound",
            100.0 * m.cpu_utilisation().unwrap_or(0.0)
        ));
        return Diagnosis {
            resource: Resource::Storage,
            evidence,
            memory_held_share: rss_share,
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
    Diagnosis {
        resource,
        evidence,
        memory_held_share: rss_share,
    }
}

#[cfg(test)]
mod tests;
