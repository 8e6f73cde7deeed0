//! The doctor's facts about where the file's bytes come from: the source's kind and, for a
//! remote object, its request latency and bandwidth measured by a few reads.
//!
//! Latency is the median of [`LATENCY_PROBES`] small range reads of the header (the bytes
//! every open reads, so they exist in any valid file); bandwidth is whole pages read at
//! once, [`BANDWIDTH_PAGES`] of them spread over the file, as the process cache reads them:
//! their bytes over the wall time of the batch of reads. Local files are not probed: the
//! storage facts and the measured runs describe them.

use std::sync::Arc;
use std::time::Instant;

use ffcv::page_cache::{PageSource, SourceKind};
use serde_json::{Value, json};

use super::rules::human_bytes;

/// Small reads timed for the latency (their median is reported).
pub const LATENCY_PROBES: usize = 5;
/// Bytes each latency read asks for.
pub const LATENCY_PROBE_BYTES: u64 = 64;
/// Whole pages read at once for the bandwidth.
pub const BANDWIDTH_PAGES: u64 = 8;
/// The most bytes one bandwidth read asks for, whatever the page size the file declares.
pub const MAX_PROBE_PAGE_BYTES: u64 = 16 << 20;

/// What the doctor knows about the file's source.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceFacts {
    /// `local`, `s3` or `http`.
    pub kind: SourceKind,
    /// Median latency of the small reads, in seconds (`None`: local, or the probe failed).
    pub latency_seconds: Option<f64>,
    /// Bytes per second of the whole-page reads (`None`: local, or the probe failed).
    pub bandwidth_bytes_per_sec: Option<f64>,
    /// Requests the probe made.
    pub requests: u64,
    /// Bytes the bandwidth reads received.
    pub bandwidth_bytes: u64,
    /// Why the probe gave no figures, when it failed.
    pub error: Option<String>,
}

impl SourceFacts {
    /// The facts of a local file: nothing probed.
    pub fn local() -> SourceFacts {
        SourceFacts {
            kind: SourceKind::Local,
            latency_seconds: None,
            bandwidth_bytes_per_sec: None,
            requests: 0,
            bandwidth_bytes: 0,
            error: None,
        }
    }

    /// Probes `source`, whose file has pages of `page_size` bytes.
    pub fn probe(source: &Arc<dyn PageSource>, page_size: u64) -> SourceFacts {
        let mut facts = SourceFacts {
            kind: source.kind(),
            ..SourceFacts::local()
        };
        if let Err(err) = probe_into(source.as_ref(), page_size, &mut facts) {
            facts.error = Some(err);
        }
        facts
    }

    /// Whether the source is remote.
    pub fn is_remote(&self) -> bool {
        self.kind.is_remote()
    }

    /// The facts as JSON (stable keys).
    pub fn to_json(&self) -> Value {
        json!({
            "kind": self.kind.name(),
            "remote": self.is_remote(),
            "request_latency_seconds": self.latency_seconds,
            "bandwidth_bytes_per_sec": self.bandwidth_bytes_per_sec,
            "probe_requests": self.requests,
            "probe_bytes": self.bandwidth_bytes,
            "probe_error": self.error,
        })
    }

    /// One line for the text report.
    pub fn describe(&self) -> String {
        if !self.is_remote() {
            return "local file".to_owned();
        }
        let mut line = format!("{} object", self.kind.name());
        if let Some(latency) = self.latency_seconds {
            line.push_str(&format!(
                ", request latency {:.2} ms (median of {LATENCY_PROBES})",
                latency * 1e3
            ));
        }
        if let Some(bandwidth) = self.bandwidth_bytes_per_sec {
            line.push_str(&format!(
                ", bandwidth {}/s ({} in whole pages)",
                human_bytes(bandwidth as u64),
                human_bytes(self.bandwidth_bytes)
            ));
        }
        if let Some(error) = &self.error {
            line.push_str(&format!(", not measured: {error}"));
        }
        line
    }
}

fn probe_into(
    source: &dyn PageSource,
    page_size: u64,
    facts: &mut SourceFacts,
) -> Result<(), String> {
    let len = source.len();
    if len == 0 {
        return Err("the object is empty".to_owned());
    }
    let small = LATENCY_PROBE_BYTES.min(len);
    let mut latencies = Vec::with_capacity(LATENCY_PROBES);
    for _ in 0..LATENCY_PROBES {
        let started = Instant::now();
        source
            .read_range(0, small)
            .map_err(|e| format!("reading bytes 0..{small}: {e}"))?;
        latencies.push(started.elapsed().as_secs_f64());
        facts.requests += 1;
    }
    latencies.sort_by(f64::total_cmp);
    facts.latency_seconds = Some(latencies[latencies.len() / 2]);

    let page = page_size.clamp(1, MAX_PROBE_PAGE_BYTES);
    let pages_in_file = len.div_ceil(page);
    let count = BANDWIDTH_PAGES.min(pages_in_file);
    // Pages spread evenly over the file, so one region's caching does not stand for all.
    let ranges: Vec<(u64, u64)> = (0..count)
        .map(|i| {
            let start = i * pages_in_file / count * page;
            (start, (start + page).min(len))
        })
        .collect();
    let started = Instant::now();
    let results: Vec<Result<u64, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = ranges
            .iter()
            .map(|&(start, end)| {
                scope.spawn(move || {
                    source
                        .read_range(start, end)
                        .map(|bytes| bytes.len() as u64)
                        .map_err(|e| format!("reading bytes {start}..{end}: {e}"))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a probe thread panicked".to_owned()))
            })
            .collect()
    });
    let wall = started.elapsed().as_secs_f64();
    for result in results {
        facts.bandwidth_bytes += result?;
        facts.requests += 1;
    }
    facts.bandwidth_bytes_per_sec =
        Some(facts.bandwidth_bytes as f64 / wall.max(f64::MIN_POSITIVE));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_file_is_probed_for_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 10_000]).unwrap();
        let source: Arc<dyn PageSource> =
            Arc::new(ffcv::page_cache::LocalSource::open(&path).unwrap());
        // Probing works on any source; for a local one the doctor does not call it.
        let facts = SourceFacts::probe(&source, 4096);
        assert_eq!(facts.kind, SourceKind::Local);
        assert_eq!(facts.requests, LATENCY_PROBES as u64 + 3);
        assert_eq!(facts.bandwidth_bytes, 10_000, "3 pages, the last one short");
        assert!(facts.latency_seconds.is_some_and(|l| l >= 0.0));
        assert!(facts.bandwidth_bytes_per_sec.is_some_and(|b| b > 0.0));
        assert_eq!(facts.error, None);
        assert_eq!(SourceFacts::local().describe(), "local file");
        assert_eq!(SourceFacts::local().to_json()["kind"], "local");
    }
}
