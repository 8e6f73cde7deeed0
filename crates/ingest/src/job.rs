//! What the conversions share: the job ([`Job`]: inputs, OUT, field mapping, options),
//! parsing the field mapping, checking records beforehand for `skip_unreadable`, and
//! writing the checked records with the image counts and the progress.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use beton_io::{FieldSpec, FieldValue, ShardWritten, from_fn};
use ffcv::image::ImageMode;

use crate::error::{Error, RecordError, RecordId, Result};
use crate::options::{ImageOptions, Target};
use crate::report::{ImageCounts, Observer};

/// One conversion: the inputs, OUT, the field mapping and the options.
#[derive(Debug, Clone)]
pub struct Job {
    /// The inputs: paths, glob patterns, brace lists and object URLs, expanded and
    /// sorted byte-wise; for the table formats a folder stands for its files of the
    /// format.
    pub inputs: Vec<String>,
    /// The `.beton` file to write (or the name the shards are named after), a path or an
    /// `s3://`, `gs://`, `az://` URL.
    pub out: PathBuf,
    /// The fields, `NAME=SOURCE:KIND` (the command line's `--field`), in file order;
    /// empty: inferred from the first record.
    pub fields: Vec<String>,
    /// How images are stored.
    pub image: ImageOptions,
    /// Leave out the records that cannot be converted (checked beforehand) instead of
    /// failing; they are listed in the report and in `OUT.skipped.json`.
    pub skip_unreadable: bool,
    /// Page size, writer threads, shards.
    pub target: Target,
}

impl Job {
    /// A job writing `inputs` to `out` with the fields inferred and the default options.
    pub fn new(inputs: Vec<String>, out: impl Into<PathBuf>) -> Self {
        Self {
            inputs,
            out: out.into(),
            fields: Vec::new(),
            image: ImageOptions::default(),
            skip_unreadable: false,
            target: Target::default(),
        }
    }
}

/// Parses `fields` with `parse` and refuses a field name given twice (usage errors).
pub(crate) fn parse_fields<M>(
    fields: &[String],
    parse: impl Fn(&str) -> Result<M>,
    name: impl Fn(&M) -> (&str, String),
) -> Result<Vec<M>> {
    let given: Vec<M> = fields.iter().map(|f| parse(f)).collect::<Result<_>>()?;
    for (i, map) in given.iter().enumerate() {
        let (field, flag) = name(map);
        if given[..i].iter().any(|m| name(m).0 == field) {
            return Err(Error::Usage(format!(
                "--field {flag}: the field `{field}` is given twice"
            )));
        }
    }
    Ok(given)
}

/// Converts records `0..total` once with `check` on `workers` threads, counting them on
/// the observer: the records that convert, in order, and `(record, error)` for the ones
/// that do not, in order.
pub(crate) fn check_all(
    total: usize,
    workers: usize,
    observer: &dyn Observer,
    check: impl Fn(usize) -> std::result::Result<(), String> + Sync,
) -> (Vec<usize>, Vec<(usize, String)>) {
    observer.start(total as u64, "records checked");
    let next = AtomicUsize::new(0);
    let done = AtomicU64::new(0);
    let failures: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers.min(total).max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return;
                    }
                    if let Err(error) = check(i) {
                        failures
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((i, error));
                    }
                    observer.progress(done.fetch_add(1, Ordering::Relaxed) + 1);
                }
            });
        }
    });
    observer.finish();
    let mut failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    failures.sort_by_key(|&(i, _)| i);
    let mut bad = failures.iter().map(|&(i, _)| i).peekable();
    let kept = (0..total)
        .filter(|&i| {
            let is_bad = bad.peek() == Some(&i);
            if is_bad {
                bad.next();
            }
            !is_bad
        })
        .collect();
    (kept, failures)
}

/// Writes the records `kept` (sample `i` is record `kept[i]`, converted by `convert`,
/// which names its input and record on failure) with `specs` to the job's OUT, counting
/// the first image field's modes; the shards written (URLs once uploaded).
pub(crate) fn write_records(
    job: &Job,
    specs: Vec<FieldSpec>,
    kept: &[usize],
    observer: &Arc<dyn Observer>,
    convert: impl Fn(
        usize,
        u64,
    ) -> std::result::Result<(Vec<FieldValue>, Option<ImageMode>), RecordError>
    + Sync,
) -> Result<(Vec<ShardWritten>, ImageCounts)> {
    let n = kept.len() as u64;
    job.target.shards.check(n, "records")?;
    let workers = job.target.threads();
    let writer = job
        .target
        .writer(&job.out, specs)?
        .with_num_workers(workers);
    let (raw, jpg) = (AtomicU64::new(0), AtomicU64::new(0));
    let part = job.target.shards.samples(n);
    observer.start(part.end - part.start, "records");
    let progress = Arc::clone(observer);
    let source = from_fn(n, |i| {
        let (values, mode) = convert(kept[i as usize], i)?;
        match mode {
            Some(ImageMode::Raw) => raw.fetch_add(1, Ordering::Relaxed),
            Some(ImageMode::Jpeg) => jpg.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        Ok(values)
    });
    let written = job.target.shards.write(
        &writer.with_progress(move |done| progress.progress(done)),
        &source,
    );
    observer.finish();
    let counts = ImageCounts {
        raw: raw.load(Ordering::Relaxed),
        jpg: jpg.load(Ordering::Relaxed),
        unchanged: 0,
    };
    Ok((written?, counts))
}

/// A record's failure while the writer runs, naming its input and record.
pub(crate) fn record_error(input: &Path, record: RecordId, message: String) -> RecordError {
    RecordError {
        input: crate::object_io::display_name(input),
        record,
        message,
    }
}

/// Writes the skip report `doc` as `OUT.skipped.json` (uploaded beside an OUT URL) and
/// tells the observer where it went; its name.
pub(crate) fn skip_report(
    out: &Path,
    doc: &serde_json::Value,
    observer: &dyn Observer,
) -> Result<String> {
    let mut text = serde_json::to_string_pretty(doc).unwrap_or_default();
    text.push('\n');
    let name = crate::object_io::write_skip_report(out, text.as_bytes())?;
    observer.line(&format!("listed in {name}"));
    Ok(name)
}
