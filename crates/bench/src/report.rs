//! One benchmark row and the files a run writes (`target/bench/small.json`).

use std::collections::BTreeMap;

/// One bounded measurement of the `bench --small` matrix.
///
/// The keys of the JSON form are stable: scripts compare runs by `name`.
#[derive(Debug, Clone, Default)]
pub struct Row {
    /// Stable identifier, e.g. `reader/sequential/128k/1t` or `jit/fused`.
    pub name: String,
    /// Human-readable configuration (dataset, order, threads, ...).
    pub config: String,
    /// Samples processed per second (median over the timed repetitions).
    pub samples_per_sec: f64,
    /// Payload bytes processed per second.
    pub bytes_per_sec: f64,
    /// Throughput relative to the row's baseline (memcpy, interpreter, OS cache, ...), if any.
    pub ratio: Option<f64>,
    /// What `ratio` is relative to, e.g. `memcpy`.
    pub ratio_to: Option<String>,
    /// Further measured figures with stable keys (`read_amplification`, `compile_ms`, ...).
    pub extra: BTreeMap<String, serde_json::Value>,
}
