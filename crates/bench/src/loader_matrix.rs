//! `loader/*` rows: the `ffcv::Loader` end to end, one bounded measurement per configuration
//! (one warm-up epoch, then [`EPOCHS`] timed epochs, median reported).
//!
//! The matrix on the CIFAR-like data set: OS cache on/off × Sequential/Random/QuasiRandom ×
//! 1 worker and every CPU × compiled/interpreted pipelines, plus `batches_ahead` 1 beside
//! the default 3; on the 128 KiB data set: both caches with Random on every CPU. The
//! consumer only drops each batch (as `ffcv bench` without `--touch`), so a row measures the
//! loader alone. The `tracing-overhead` row bounds the cost of the loader's instrumentation
//! with no subscriber installed against the run-to-run noise.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use beton_io::{DatasetWriter, FieldSpec, FieldType, FieldValue, RgbImage, from_fn};
use ffcv::image::{SyntheticImageSpec, synthetic_jpeg};

use ffcv::{Loader, Order};
use serde_json::json;

use crate::datasets::Dataset;
use crate::report::Row;
use crate::timing::Timing;

/// Timed epochs per row (after one warm-up epoch).
pub const EPOCHS: usize = 5;

/// One configuration of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// OS page cache (`true`) or the process cache.
    pub os_cache: bool,
    /// The traversal order.
    pub order: OrderName,
    /// `None` = every CPU (`num_workers = -1`).
    pub workers: Option<usize>,
    /// Compiled (`true`) or interpreted pipelines.
    pub compile: bool,
    /// Queue depth.
    pub batches_ahead: usize,
    /// Stage every batch on CUDA device 0 (a GPU row; skipped without a device).
    pub cuda: bool,
}

/// The built-in orders by their command-line names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderName {
    /// `sequential`.
    Sequential,
    /// `random`.
    Random,
    /// `quasi-random`.
    QuasiRandom,
}

impl OrderName {
    fn name(self) -> &'static str {
        match self {
            OrderName::Sequential => "sequential",
            OrderName::Random => "random",
            OrderName::QuasiRandom => "quasi-random",
        }
    }

    fn order(self) -> Order {
        match self {
            OrderName::Sequential => Order::Sequential,
            OrderName::Random => Order::Random,
            OrderName::QuasiRandom => Order::QuasiRandom,
        }
    }
}

impl Config {
    /// The row name: `loader/<dataset>/<os|proc>/<order>/<1t|all>/<jit|interp>[/ahead<N>]`
    /// (the default `batches_ahead` 3 is left out of the name).
    pub fn row_name(&self, label: &str) -> String {
        let mut name = format!(
            "loader/{label}/{}/{}/{}/{}",
            if self.os_cache { "os" } else { "proc" },
            self.order.name(),
            match self.workers {
                Some(n) => format!("{n}t"),
                None => "all".to_owned(),
            },
            if self.compile { "jit" } else { "interp" }
        );
        if self.batches_ahead != 3 {
            name.push_str(&format!("/ahead{}", self.batches_ahead));
        }
        if self.cuda {
            name.push_str("/cuda0");
        }
        name
    }
}

/// The configurations measured on the data set labelled `label`.
pub fn configs(label: &str) -> Vec<Config> {
    let mut configs = Vec::new();
    if label == "3k" {
        for os_cache in [true, false] {
            for order in [
                OrderName::Sequential,
                OrderName::Random,
                OrderName::QuasiRandom,
            ] {
                for workers in [Some(1), None] {
                    for compile in [true, false] {
                        configs.push(Config {
                            os_cache,
                            order,
                            workers,
                            compile,
                            batches_ahead: 3,
                            cuda: false,
                        });
                    }
                }
            }
        }
        configs.push(Config {
            os_cache: true,
            order: OrderName::Random,
            workers: None,
            compile: true,
            batches_ahead: 1,
            cuda: false,
        });
    } else if label == JPEG_LABEL {
        for workers in [Some(1), None] {
            configs.push(Config {
                os_cache: true,
                order: OrderName::Random,
                workers,
                compile: true,
                batches_ahead: 3,
                cuda: false,
            });
        }
        configs.push(Config {
            os_cache: false,
            order: OrderName::QuasiRandom,
            workers: None,
            compile: true,
            batches_ahead: 3,
            cuda: false,
        });
    } else {
        for os_cache in [true, false] {
            configs.push(Config {
                os_cache,
                order: OrderName::Random,
                workers: None,
                compile: true,
                batches_ahead: 3,
                cuda: false,
            });
        }
    }
    // The GPU row: the reference configuration with every output staged on the device.
    configs.push(Config {
        os_cache: true,
        order: OrderName::Random,
        workers: None,
        compile: true,
        batches_ahead: 3,
        cuda: true,
    });
    configs
}

/// The name of the tracing-overhead row of data set `label`.
pub fn tracing_row_name(label: &str) -> String {
    format!("loader/{label}/tracing-overhead")
}

/// Every row name this suite can produce for data set `label`.
pub fn row_names(label: &str) -> Vec<String> {
    let mut names: Vec<String> = configs(label).iter().map(|c| c.row_name(label)).collect();
    if label == "3k" {
        names.push(tracing_row_name(label));
    }
    names
}

/// Batch size of the rows on data set `label` (FFCV's benchmark sizes).
pub fn batch_size(label: &str) -> usize {
    match label {
        "3k" => 512,
        JPEG_LABEL => 128,
        _ => 64,
    }
}

/// Label of the JPEG data set.
pub const JPEG_LABEL: &str = "jpeg";
/// JPEG images in the data set: 160 to 256 pixels a side, quality 90.
pub const JPEG_SAMPLES: u64 = 2000;
/// The JPEG rows' decoder: FFCV's RandomResizedCrop to 64x64.
pub const JPEG_DECODER: &str = "random-resized-crop:64x64";

/// The JPEG data set under `dir`: `JPEG_SAMPLES` synthetic JPEGs (`image`) with a label,
/// written once and reused while its recorded parameters match.
pub fn ensure_jpeg(dir: &Path, progress: &dyn Fn(&str)) -> Result<Dataset, String> {
    let path = dir.join("loader-jpeg.beton");
    let params_path = dir.join("loader-jpeg.params");
    let params = format!(
        "revision 1\nffcv::image::synthetic_jpeg seed 11, {JPEG_SAMPLES} images of 160..=256 px, quality 90, label = index % 10\n"
    );
    let reusable = std::fs::read_to_string(&params_path).is_ok_and(|old| old == params)
        && beton_io::Reader::open(&path).is_ok_and(|r| r.num_samples() == JPEG_SAMPLES);
    if !reusable {
        progress(&format!(
            "writing {} ({JPEG_SAMPLES} JPEGs)",
            path.display()
        ));
        std::fs::create_dir_all(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        let _ = std::fs::remove_file(&params_path);
        let fields = vec![
            FieldSpec::new("image", FieldType::RgbImage),
            FieldSpec::new("label", FieldType::Int),
        ];
        DatasetWriter::new(&path, fields)
            .and_then(|writer| {
                writer.write(&from_fn(JPEG_SAMPLES, |i| {
                    let (bytes, width, height) =
                        synthetic_jpeg(11, i, SyntheticImageSpec::default(), 90)
                            .map_err(|err| -> beton_io::SourceError { Box::new(err) })?;
                    Ok(vec![
                        FieldValue::RgbImage(RgbImage::Jpeg {
                            width: width as u16,
                            height: height as u16,
                            bytes,
                        }),
                        FieldValue::Int(i as i64 % 10),
                    ])
                }))
            })
            .map_err(|err| err.to_string())?;
        std::fs::write(&params_path, &params)
            .map_err(|err| format!("cannot write {}: {err}", params_path.display()))?;
    }
    Ok(Dataset {
        path,
        label: JPEG_LABEL.to_owned(),
        field: "image".to_owned(),
        sample_description: format!("JPEG 160-256 px, {JPEG_DECODER}"),
    })
}

/// The figures of one configuration.
#[derive(Debug, Clone)]
struct Measured {
    epochs: Timing,
    samples_per_epoch: u64,
    payload_per_epoch: u64,
    storage_per_epoch: u64,
    file_read_per_epoch: u64,
    /// What the process cache read in the warm-up epoch (slots empty at its start).
    file_read_first_epoch: u64,
    payload_first_epoch: u64,
    latencies_ms: Vec<f64>,
    wait_pages: f64,
    decode: f64,
    wait_slot: f64,
    peak_rss: Option<u64>,
    workers: usize,
}

fn measure(dataset: &Dataset, config: &Config) -> Result<Measured, String> {
    let builder = Loader::builder(&dataset.path)
        .batch_size(batch_size(&dataset.label))
        .num_workers(config.workers.map_or(-1, |n| n as i64))
        .os_cache(config.os_cache)
        .order(config.order.order())
        .seed(0)
        .compile(config.compile)
        .batches_ahead(config.batches_ahead);
    let builder = if dataset.label == JPEG_LABEL {
        let decoder = JPEG_DECODER
            .parse()
            .map_err(|err| format!("{JPEG_DECODER}: {err}"))?;
        builder.decoder("image", decoder)
    } else {
        builder
    };
    let builder = if config.cuda {
        builder.device(ffcv::gpu::DeviceSpec::Cuda(0))
    } else {
        builder
    };
    let mut loader = builder.build().map_err(|err| err.to_string())?;
    // The warm-up epoch starts with empty slots, so its reads are the order's own cost;
    // later epochs may find pages still held from the epoch before (`retain_pages`).
    run_epoch(&mut loader, &mut Vec::new())?;
    let first = loader.stats();
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = loader.stats();
    let io_before = storage_read_bytes();
    let mut seconds = Vec::with_capacity(EPOCHS);
    let mut latencies_ms = Vec::new();
    for _ in 0..EPOCHS {
        let started = Instant::now();
        run_epoch(&mut loader, &mut latencies_ms)?;
        seconds.push(started.elapsed().as_secs_f64());
    }
    let after = loader.stats();
    let per_epoch = |a: u64, b: u64| (b - a) / EPOCHS as u64;
    // What the kernel fetched from the device for this process (0 when the file is in the
    // page cache), and what the process cache read from the file (0 with the OS cache,
    // whose page faults no counter sees).
    let storage = match (io_before, storage_read_bytes()) {
        (Some(a), Some(b)) => b.saturating_sub(a) / EPOCHS as u64,
        _ => 0,
    };
    let file_read = per_epoch(before.storage_bytes_read, after.storage_bytes_read);
    seconds.sort_by(f64::total_cmp);
    latencies_ms.sort_by(f64::total_cmp);
    Ok(Measured {
        epochs: Timing { seconds },
        samples_per_epoch: per_epoch(before.samples, after.samples),
        payload_per_epoch: per_epoch(before.payload_bytes, after.payload_bytes),
        storage_per_epoch: storage,
        file_read_per_epoch: file_read,
        file_read_first_epoch: first.storage_bytes_read,
        payload_first_epoch: first.payload_bytes,
        latencies_ms,
        wait_pages: (after.wait_pages - before.wait_pages).as_secs_f64() / EPOCHS as f64,
        decode: (after.decode - before.decode).as_secs_f64() / EPOCHS as f64,
        wait_slot: (after.wait_slot - before.wait_slot).as_secs_f64() / EPOCHS as f64,
        peak_rss: peak_rss_bytes(),
        workers: loader.num_workers(),
    })
}

/// One epoch; each batch's wait (the consumer's view of latency) goes to `latencies_ms`.
fn run_epoch(loader: &mut Loader, latencies_ms: &mut Vec<f64>) -> Result<(), String> {
    let mut epoch = loader.iter();
    loop {
        let asked = Instant::now();
        let Some(batch) = epoch.next() else {
            return Ok(());
        };
        let batch = batch.map_err(|err| err.to_string())?;
        latencies_ms.push(asked.elapsed().as_secs_f64() * 1e3);
        black_box(batch.len());
    }
}

/// The `q` quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()?
        .checked_mul(1024)
}

/// `read_bytes` of `/proc/self/io`: bytes this process caused to be fetched from storage.
fn storage_read_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    let line = io.lines().find(|line| line.starts_with("read_bytes:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn row_of(dataset: &Dataset, config: &Config, m: &Measured) -> Row {
    let median = m.epochs.median();
    let mut row = Row {
        name: config.row_name(&dataset.label),
        config: format!(
            "{}, batch {}, {} cache, {}, {} workers, {}, batches_ahead {}",
            dataset.sample_description,
            batch_size(&dataset.label),
            if config.os_cache { "OS" } else { "process" },
            config.order.name(),
            m.workers,
            if config.compile {
                "compiled"
            } else {
                "interpreted"
            },
            config.batches_ahead
        ) + if config.cuda {
            ", staged on cuda:0"
        } else {
            ""
        },
        samples_per_sec: m.samples_per_epoch as f64 / median,
        bytes_per_sec: m.payload_per_epoch as f64 / median,
        ..Row::default()
    };
    // Bytes fetched per payload byte: the process cache's reads from the file, or for the
    // OS cache the device reads (page faults served from RAM are free and not counted).
    let fetched = if config.os_cache {
        m.storage_per_epoch
    } else {
        m.file_read_per_epoch
    };
    let amplification =
        (m.payload_per_epoch > 0).then(|| fetched as f64 / m.payload_per_epoch as f64);
    // The process cache's read amplification is the first epoch's: later ones may
    // read less (pages kept in their slots), which says nothing about the order.
    let (amplification, retained_amplification) = if config.os_cache {
        (amplification, None)
    } else {
        (
            (m.payload_first_epoch > 0)
                .then(|| m.file_read_first_epoch as f64 / m.payload_first_epoch as f64),
            amplification,
        )
    };
    let extra = [
        ("dataset", json!(dataset.label)),
        ("epoch_seconds", m.epochs.summary()),
        (
            "batch_latency_ms",
            json!({
                "p50": quantile(&m.latencies_ms, 0.5),
                "p99": quantile(&m.latencies_ms, 0.99),
            }),
        ),
        ("peak_rss_bytes", json!(m.peak_rss)),
        ("storage_bytes_read", json!(m.storage_per_epoch)),
        ("file_bytes_read", json!(m.file_read_per_epoch)),
        ("read_amplification", json!(amplification)),
        (
            "read_amplification_later_epochs",
            json!(retained_amplification),
        ),
        (
            "time_breakdown_seconds",
            json!({
                "wait_pages": m.wait_pages,
                "decode": m.decode,
                "wait_slot": m.wait_slot,
                "epoch": median,
            }),
        ),
        ("num_workers", json!(m.workers)),
        ("epochs", json!(EPOCHS)),
    ];
    for (key, value) in extra {
        row.extra.insert(key.to_owned(), value);
    }
    row
}

/// Nanoseconds to create and enter one `debug_span!` with no subscriber installed (the
/// bench installs none), over `iterations` spans.
pub fn disabled_span_ns(iterations: u32) -> f64 {
    let started = Instant::now();
    for i in 0..iterations {
        let span = tracing::debug_span!("bench_probe", i);
        let _entered = span.enter();
        black_box(&span);
    }
    started.elapsed().as_secs_f64() * 1e9 / f64::from(iterations.max(1))
}

/// The tracing-overhead row: the instrumentation points a fully instrumented epoch would
/// pass (a page-load span per page read, and stage, slot-wait and consumer-wait spans per
/// batch), times the measured cost of a disabled span, against the epoch time and its noise
/// (spread of the timed epochs of the reference row).
fn tracing_row(dataset: &Dataset, reference: &Row, m: &Measured, page_size: u64) -> Row {
    let span_ns = disabled_span_ns(1_000_000);
    let batches = m.latencies_ms.len() as f64 / EPOCHS as f64;
    let pages = (m.payload_per_epoch as f64 / page_size as f64).ceil();
    let spans_per_epoch = 3.0 * batches + pages;
    let median = m.epochs.median();
    let overhead = spans_per_epoch * span_ns * 1e-9 / median;
    let spread =
        m.epochs.seconds.last().unwrap_or(&median) - m.epochs.seconds.first().unwrap_or(&median);
    let noise = spread / median;
    let mut row = Row {
        name: tracing_row_name(&dataset.label),
        config: format!(
            "{} spans/epoch x {span_ns:.1} ns (disabled span, no subscriber) vs {median:.4} s epochs of {}",
            spans_per_epoch as u64, reference.name
        ),
        samples_per_sec: reference.samples_per_sec,
        bytes_per_sec: reference.bytes_per_sec,
        ratio: Some(1.0 - overhead),
        ratio_to: Some("uninstrumented bound".to_owned()),
        ..Row::default()
    };
    for (key, value) in [
        ("dataset", json!(dataset.label)),
        ("disabled_span_ns", json!(span_ns)),
        ("spans_per_epoch", json!(spans_per_epoch)),
        ("overhead_fraction", json!(overhead)),
        ("noise_fraction", json!(noise)),
        ("below_noise", json!(overhead < noise)),
    ] {
        row.extra.insert(key.to_owned(), value);
    }
    row
}

/// Measures the rows for `dataset` whose names pass `keep`. A configuration that fails
/// (e.g. the memory guard) gives no row; its error goes to `progress`.
pub fn rows(
    dataset: &Dataset,
    keep: &dyn Fn(&str) -> bool,
    progress: &dyn Fn(&str),
) -> Result<Vec<Row>, String> {
    let page_size = beton_io::Reader::open(&dataset.path)
        .map_err(|err| err.to_string())?
        .page_size();
    let mut rows = Vec::new();
    let reference = Config {
        os_cache: true,
        order: OrderName::Random,
        workers: None,
        compile: true,
        batches_ahead: 3,
        cuda: false,
    };
    let want_tracing = dataset.label == "3k" && keep(&tracing_row_name(&dataset.label));
    for config in configs(&dataset.label) {
        let name = config.row_name(&dataset.label);
        let is_reference = config == reference && want_tracing;
        if !keep(&name) && !is_reference {
            continue;
        }
        progress(&format!("measuring {name}"));
        match measure(dataset, &config) {
            Ok(m) => {
                let row = row_of(dataset, &config, &m);
                if is_reference {
                    rows.push(tracing_row(dataset, &row, &m, page_size));
                }
                if keep(&name) {
                    rows.push(row);
                }
            }
            Err(err) if config.cuda && err.contains("no CUDA driver") => {
                progress(&format!("{name}: skipped: no CUDA device"));
            }
            Err(err) => progress(&format!("{name}: skipped: {err}")),
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cifar_matrix_covers_every_cache_order_worker_and_compiler_choice() {
        let names = row_names("3k");
        assert_eq!(names.len(), 2 * 3 * 2 * 2 + 1 + 1 + 1);
        for name in [
            "loader/3k/os/sequential/1t/jit",
            "loader/3k/proc/quasi-random/all/interp",
            "loader/3k/os/random/all/jit/ahead1",
            "loader/3k/tracing-overhead",
            "loader/3k/os/random/all/jit/cuda0",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing");
        }
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        assert_eq!(
            row_names("128k"),
            [
                "loader/128k/os/random/all/jit",
                "loader/128k/proc/random/all/jit",
                "loader/128k/os/random/all/jit/cuda0"
            ]
        );
    }

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&values, 0.5), Some(50.0));
        assert_eq!(quantile(&values, 0.99), Some(99.0));
        assert_eq!(quantile(&values, 1.0), Some(100.0));
        assert_eq!(quantile(&[7.0], 0.99), Some(7.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn a_row_reports_every_figure_under_its_stable_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.beton");
        std::fs::copy(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../tests/fixtures/ffcv-1.0.2/scalars.beton"
            ),
            &path,
        )
        .unwrap();
        let dataset = Dataset {
            path,
            label: "scalars".to_owned(),
            field: "value".to_owned(),
            sample_description: "int + float".to_owned(),
        };
        let config = Config {
            os_cache: false,
            order: OrderName::Random,
            workers: Some(1),
            compile: true,
            batches_ahead: 1,
            cuda: false,
        };
        let m = measure(&dataset, &config).unwrap();
        // 100 samples, batch 64, drop_last: one batch of 64 per epoch.
        assert_eq!(m.samples_per_epoch, 64);
        assert_eq!(m.latencies_ms.len(), EPOCHS);
        assert_eq!(m.workers, 1);
        // Each sample's payload is its two scalars (8 bytes each).
        assert_eq!(m.payload_per_epoch, 64 * 16);
        let row = row_of(&dataset, &config, &m).to_json();
        assert_eq!(row["name"], "loader/scalars/proc/random/1t/jit/ahead1");
        for key in [
            "epoch_seconds",
            "batch_latency_ms",
            "peak_rss_bytes",
            "storage_bytes_read",
            "file_bytes_read",
            "read_amplification",
            "time_breakdown_seconds",
        ] {
            assert!(!row[key].is_null(), "{key} missing in {row}");
        }
        assert_eq!(row["dataset"], "scalars");
        assert!(row["samples_per_sec"].as_f64().unwrap() > 0.0);
    }
}
