//! `_native.ingest`: `ffcv_ingest`'s conversions (WebDataset, Parquet, Arrow IPC,
//! TFRecord into `.beton`), the code behind `ffcv write`, for `ffcv_rs.writer`'s
//! `write_webdataset`, `write_parquet`, `write_arrow` and `write_tfrecord`.
//!
//! The conversion runs on a thread of its own with the GIL released; the calling thread
//! waits for it in short slices, calling the Python progress function with the counts
//! the conversion reports and looking for Ctrl-C between them. A conversion cannot be
//! stopped halfway (its writer threads own the output), so a Ctrl-C is raised once it
//! has ended, and its local files are removed then. Errors become `ffcv_rs.errors` classes:
//! options that do not fit are `ConfigError` (a `ValueError`), an input that cannot be
//! read or a record that cannot be converted `InputError` with the input's `path` and the
//! `record` (a WebDataset key or a row number).

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use ffcv_ingest::{
    Error, Format, ImageOptions, Job, Observer, RecordId, Report, Shards, Target, WriteModeName,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors;

/// How often the waiting thread shows progress and looks for Ctrl-C.
const POLL: Duration = Duration::from_millis(50);

/// What the conversion has told so far: its lines, the current count, and whether it
/// ended.
#[derive(Default)]
struct Told {
    lines: Vec<String>,
    /// `(unit, total, done)` of the count running now.
    count: Option<(String, u64, u64)>,
    ended: bool,
}

/// The observer of a conversion run for Python: keeps what it is told for the waiting
/// thread, which alone calls Python.
#[derive(Default)]
struct Collector {
    told: Mutex<Told>,
    changed: Condvar,
}

impl Collector {
    fn tell(&self, f: impl FnOnce(&mut Told)) {
        f(&mut self.told.lock().unwrap_or_else(|p| p.into_inner()));
        self.changed.notify_all();
    }
}

impl Observer for Collector {
    fn line(&self, text: &str) {
        self.tell(|t| t.lines.push(text.to_owned()));
    }

    fn start(&self, total: u64, unit: &str) {
        self.tell(|t| t.count = Some((unit.to_owned(), total, 0)));
    }

    fn progress(&self, done: u64) {
        self.tell(|t| {
            // Threads report out of order; the count only moves forward.
            if let Some((_, _, d)) = &mut t.count {
                *d = (*d).max(done);
            }
        });
    }
}

/// The format named `name` (`webdataset` is handled apart).
fn table_format(name: &str) -> Option<Format> {
    match name {
        "parquet" => Some(Format::Parquet),
        "arrow" => Some(Format::Arrow),
        "tfrecord" => Some(Format::TfRecord),
        _ => None,
    }
}

/// The conversion's error as the matching `ffcv_rs.errors` exception, same message.
fn to_py(py: Python<'_>, err: Error) -> PyErr {
    let message = err.to_string();
    if let Some(record) = err.record() {
        let id = match &record.record {
            RecordId::Key(key) => key.clone().into_pyobject(py).map(|k| k.into_any().unbind()),
            RecordId::Row(row) => row.into_pyobject(py).map(|r| r.into_any().unbind()),
        };
        return input_error(py, message, Some(record.input.clone()), id.ok());
    }
    match err {
        Error::Usage(_) => errors::config(py, message),
        Error::WebDataset { path, .. } | Error::Input { path, .. } => {
            input_error(py, message, Some(path.display().to_string()), None)
        }
        Error::Remote { url, .. } => input_error(py, message, Some(url), None),
        Error::Beton(e) => errors::from_format(py, e),
        _ => errors::make(py, errors::Kind::Base, message, None, None),
    }
}

/// An `ffcv_rs.errors.InputError` with `path` and `record`.
fn input_error(
    py: Python<'_>,
    message: String,
    path: Option<String>,
    record: Option<Py<PyAny>>,
) -> PyErr {
    let built = (|| -> PyResult<PyErr> {
        let class = py.import("ffcv_rs.errors")?.getattr("InputError")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("path", path)?;
        kwargs.set_item("record", record)?;
        Ok(PyErr::from_value(
            class.call((message.clone(),), Some(&kwargs))?,
        ))
    })();
    built.unwrap_or_else(|_| errors::make(py, errors::Kind::Base, message, None, None))
}

/// What the conversion did, as a dict for `ffcv_rs.writer.WriteResult`.
fn report_dict<'py>(
    py: Python<'py>,
    report: &Report,
    lines: &[String],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let fields = PyDict::new(py);
    for (name, source) in &report.fields {
        fields.set_item(name, source)?;
    }
    d.set_item("fields", fields)?;
    d.set_item("left_out", report.left_out.clone())?;
    d.set_item("inputs", report.inputs.clone())?;
    d.set_item("records", report.records)?;
    let files = PyList::empty(py);
    for shard in &report.written {
        let f = PyDict::new(py);
        f.set_item("path", shard.path.display().to_string())?;
        f.set_item("samples", (shard.samples.start, shard.samples.end))?;
        f.set_item("pages", shard.summary.num_pages)?;
        f.set_item("bytes", shard.summary.file_size)?;
        files.append(f)?;
    }
    d.set_item("files", files)?;
    let skipped = PyList::empty(py);
    for s in &report.skipped {
        let item = PyDict::new(py);
        item.set_item("input", &s.input)?;
        item.set_item("record", &s.record)?;
        item.set_item("error", &s.error)?;
        skipped.append(item)?;
    }
    d.set_item("skipped", skipped)?;
    d.set_item("skip_report", &report.skip_report)?;
    d.set_item(
        "images",
        (
            report.images.raw,
            report.images.jpg,
            report.images.unchanged,
        ),
    )?;
    d.set_item("lines", lines.to_vec())?;
    Ok(d)
}

/// Runs a conversion of `inputs` (format `webdataset`, `parquet`, `arrow` or `tfrecord`)
/// to `out` with the field mapping `fields` (`NAME=SOURCE:KIND` each; empty: inferred) and
/// the options; `progress(unit, done, total)` is called on this thread as counts advance.
/// Returns what it did as a dict (see `ffcv_rs.writer.WriteResult`).
#[pyfunction]
// The options are keyword-only: `ffcv_rs.writer` passes each by name.
#[pyo3(signature = (format, inputs, out, fields, *, write_mode, max_resolution, jpeg_quality,
    smart_threshold, compress_probability, seed, jpeg_passthrough, skip_unreadable,
    num_workers, page_size, shards, shard_index, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn ingest<'py>(
    py: Python<'py>,
    format: &str,
    inputs: Vec<String>,
    out: String,
    fields: Vec<String>,
    write_mode: &str,
    max_resolution: Option<u32>,
    jpeg_quality: u8,
    smart_threshold: Option<u64>,
    compress_probability: f64,
    seed: u64,
    jpeg_passthrough: bool,
    skip_unreadable: bool,
    num_workers: usize,
    page_size: u64,
    shards: u64,
    shard_index: Option<u64>,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let table = table_format(format);
    if table.is_none() && format != "webdataset" {
        return Err(errors::config(
            py,
            format!("format `{format}`: use webdataset, parquet, arrow or tfrecord"),
        ));
    }
    let job = Job {
        inputs,
        out: out.into(),
        fields,
        image: ImageOptions {
            write_mode: WriteModeName::parse(write_mode).map_err(|e| to_py(py, e))?,
            max_resolution,
            jpeg_quality,
            smart_threshold,
            compress_probability,
            seed,
            jpeg_passthrough,
        },
        skip_unreadable,
        target: Target {
            page_size,
            workers: (num_workers > 0).then_some(num_workers),
            shards: Shards {
                count: shards,
                index: shard_index,
            },
        },
    };
    let collector = Arc::new(Collector::default());
    let observer: Arc<dyn Observer> = collector.clone();
    let mut interrupt = None;
    let mut shown: Option<(String, u64, u64)> = None;
    let result = std::thread::scope(|scope| {
        let handle = scope.spawn(|| {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match table {
                Some(format) => ffcv_ingest::write_table(format, &job, observer),
                None => ffcv_ingest::write_webdataset(&job, observer),
            }));
            // Also after a panic, or the waiting thread would wait forever.
            collector.tell(|t| t.ended = true);
            result
        });
        loop {
            let (ended, count) = {
                let told = collector.told.lock().unwrap_or_else(|p| p.into_inner());
                (told.ended, told.count.clone())
            };
            if let (Some(p), Some(count)) = (&progress, &count)
                && shown.as_ref() != Some(count)
            {
                // A failing progress function must not fail the conversion.
                let _ = p.call1((count.0.as_str(), count.2, count.1));
                shown = Some(count.clone());
            }
            if ended {
                break;
            }
            py.detach(|| {
                let told = collector.told.lock().unwrap_or_else(|p| p.into_inner());
                let _ = collector
                    .changed
                    .wait_timeout_while(told, POLL, |t| !t.ended && t.count == count)
                    .unwrap_or_else(|p| p.into_inner());
            });
            if interrupt.is_none() {
                interrupt = py.check_signals().err();
            }
        }
        py.detach(|| handle.join())
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    let report = match result {
        Ok(result) => result.map_err(|e| to_py(py, e))?,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    if let Some(interrupt) = interrupt {
        // Interrupted while converting: the files are not kept (uploaded ones stay).
        for shard in &report.written {
            let _ = std::fs::remove_file(&shard.path);
        }
        return Err(interrupt);
    }
    let lines = std::mem::take(
        &mut collector
            .told
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .lines,
    );
    report_dict(py, &report, &lines)
}
