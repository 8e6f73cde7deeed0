//! Sharded writes: one source split into N contiguous blocks, each written to its own
//! `.beton` file in parallel ([`DatasetWriter::write_shards`]).
//!
//! Shard `k` of `n` holds samples `k * q + min(k, r) ..` (`q = samples / n`, `r = samples %
//! n`): contiguous blocks in source order whose sizes differ by at most one, the larger
//! ones first. So the shards read one after another in name order are the source in order,
//! and each shard is an ordinary `.beton` that any reader (FFCV's too) opens alone.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result, SourceError};
use crate::source::SampleSource;
use crate::value::FieldValue;
use crate::writer::{DatasetWriter, Progress, WriteSummary, rename_into_place};

/// The file name of shard `shard` (from 0) of `num_shards` written for `out`.
///
/// The shard's number and the count, zero-padded to five digits (more when the count needs
/// them), go before the extension: `train.beton` gives `train-00000-of-00004.beton` …
/// `train-00003-of-00004.beton`; a name without an extension gets the suffix at its end
/// (`train` → `train-00000-of-00004`). Only the file name changes, not the folder.
pub fn shard_path(out: &Path, shard: u64, num_shards: u64) -> PathBuf {
    let width = num_shards.to_string().len().max(5);
    let suffix = format!("-{shard:0width$}-of-{num_shards:0width$}");
    let stem = out.file_stem().unwrap_or_default();
    let mut name = stem.to_os_string();
    name.push(suffix);
    if let Some(ext) = out.extension() {
        name.push(".");
        name.push(ext);
    }
    out.with_file_name(name)
}

/// The samples of each of `num_shards` shards of `num_samples`: contiguous ranges in order,
/// sizes differing by at most one (the first `num_samples % num_shards` one larger).
///
/// `num_shards` must be at least 1; with more shards than samples some ranges are empty
/// ([`DatasetWriter::write_shards`] refuses that).
pub fn shard_ranges(num_samples: u64, num_shards: u64) -> Vec<Range<u64>> {
    let n = num_shards.max(1);
    let (q, r) = (num_samples / n, num_samples % n);
    (0..n)
        .map(|k| {
            let start = k * q + k.min(r);
            start..start + q + u64::from(k < r)
        })
        .collect()
}

/// One shard a sharded write produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardWritten {
    /// The shard's file.
    pub path: PathBuf,
    /// The source's samples it holds (its sample `i` is source sample `samples.start + i`).
    pub samples: Range<u64>,
    /// What the shard's write produced.
    pub summary: WriteSummary,
}

/// The source's samples `start..end` as a source of their own.
struct ShardSource<'a, S: ?Sized> {
    inner: &'a S,
    start: u64,
    len: u64,
}

impl<S: SampleSource + ?Sized> SampleSource for ShardSource<'_, S> {
    fn num_samples(&self) -> u64 {
        self.len
    }

    fn sample(&self, index: u64) -> std::result::Result<Vec<FieldValue>, SourceError> {
        self.inner.sample(self.start + index)
    }
}

/// Sums the per-shard progress counts into one count for the whole job.
struct JobProgress {
    report: Progress,
    /// (samples done per shard, their sum); one lock keeps the reported sums increasing.
    done: Mutex<(Vec<u64>, u64)>,
}

impl JobProgress {
    fn shard_done(&self, shard: usize, done: u64) {
        let mut guard = self.done.lock().unwrap_or_else(|p| p.into_inner());
        let (per_shard, total) = &mut *guard;
        *total += done.saturating_sub(per_shard[shard]);
        per_shard[shard] = done;
        (self.report)(*total);
    }
}

/// What one shard's thread left: its finished temporary file, or why it has none.
enum Outcome {
    Written(WriteSummary, PathBuf),
    Failed(Error),
    Panicked(Box<dyn std::any::Any + Send>),
}

impl DatasetWriter {
    /// Writes `source` as `num_shards` files in parallel: shard `k` holds the `k`-th of
    /// [`shard_ranges`]'s contiguous blocks and is named by [`shard_path`]; with
    /// `num_shards == 1` the one file is this writer's path as given.
    ///
    /// The writer's threads are shared out: `min(num_shards, workers)` shards are written
    /// at a time, each by `workers / that` threads (at least one); so with at least as many
    /// shards as workers every shard is written by one thread, and each file is then the
    /// same bytes on every run (and FFCV's own single-worker write of its block). The
    /// progress callback counts the samples done over all shards.
    ///
    /// Every shard goes to a temporary file; only when all succeeded are they renamed into
    /// place, so a failed write leaves no shard behind (nor its temporary file). An error is
    /// [`Error::Shard`] around the shard's own error, which names the shard's file.
    /// `num_shards` of 0 or above the number of samples is [`Error::InvalidConfig`].
    pub fn write_shards<S: SampleSource + ?Sized>(
        &self,
        source: &S,
        num_shards: u64,
    ) -> Result<Vec<ShardWritten>> {
        self.write_shards_each(source, num_shards, &|_, _| {})
    }

    /// [`Self::write_shards`], calling `finished(k, file)` on the writing thread as soon
    /// as shard `k`'s file is complete, while later shards are still being written: `file`
    /// holds the shard's final bytes (its temporary file, renamed into place only when
    /// every shard is written; with one shard, the file itself, already in place). So a
    /// caller can start using a shard (upload it) early. Open `file` within the call: a
    /// temporary file is renamed, or removed after a failure, once the write ends. Keep
    /// the call short; it holds up the thread's next shard.
    pub fn write_shards_each<S: SampleSource + ?Sized>(
        &self,
        source: &S,
        num_shards: u64,
        finished: &(dyn Fn(u64, &Path) + Sync),
    ) -> Result<Vec<ShardWritten>> {
        let num_samples = source.num_samples();
        if num_shards == 0 || (num_shards > 1 && num_shards > num_samples) {
            return Err(Error::InvalidConfig {
                path: self.path.clone(),
                reason: format!(
                    "{num_shards} shards of {num_samples} samples: give 1 to {} shards (every \
                     shard holds at least one sample)",
                    num_samples.max(1)
                ),
            });
        }
        if num_shards == 1 {
            let summary = self.write(source)?;
            finished(0, &self.path);
            return Ok(vec![ShardWritten {
                path: self.path.clone(),
                samples: 0..num_samples,
                summary,
            }]);
        }
        let ranges = shard_ranges(num_samples, num_shards);
        let workers = self.num_workers.max(1);
        let at_once = usize::try_from(num_shards).map_or(workers, |n| n.min(workers));
        let per_shard = (workers / at_once).max(1);
        let job = self.progress.clone().map(|report| {
            Arc::new(JobProgress {
                report,
                done: Mutex::new((vec![0; ranges.len()], 0)),
            })
        });
        let shard_writer = |k: usize| {
            let mut writer = self.clone();
            writer.path = shard_path(&self.path, k as u64, num_shards);
            writer.num_workers = per_shard;
            writer.progress = job
                .clone()
                .map(|job| -> Progress { Arc::new(move |done| job.shard_done(k, done)) });
            writer
        };
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let outcomes: Mutex<Vec<Option<Outcome>>> =
            Mutex::new((0..ranges.len()).map(|_| None).collect());
        std::thread::scope(|scope| {
            for _ in 0..at_once {
                scope.spawn(|| {
                    loop {
                        // After a failure no further shard starts: they would be removed.
                        if failed.load(Ordering::Relaxed) {
                            return;
                        }
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(range) = ranges.get(k) else { return };
                        let part = ShardSource {
                            inner: source,
                            start: range.start,
                            len: range.end - range.start,
                        };
                        let writer = shard_writer(k);
                        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            writer.write_unrenamed(&part)
                        }));
                        let outcome = match run {
                            Ok(Ok((summary, tmp))) => {
                                finished(k as u64, &tmp);
                                Outcome::Written(summary, tmp)
                            }
                            Ok(Err(e)) => Outcome::Failed(e),
                            Err(panic) => Outcome::Panicked(panic),
                        };
                        if !matches!(outcome, Outcome::Written(..)) {
                            failed.store(true, Ordering::Relaxed);
                        }
                        outcomes.lock().unwrap_or_else(|p| p.into_inner())[k] = Some(outcome);
                    }
                });
            }
        });
        let outcomes = outcomes.into_inner().unwrap_or_else(|p| p.into_inner());
        self.finish_shards(outcomes, &ranges, num_shards)
    }

    /// Renames every shard into place when all were written; otherwise removes the
    /// temporary files and returns the first shard's error (or resumes its panic).
    fn finish_shards(
        &self,
        outcomes: Vec<Option<Outcome>>,
        ranges: &[Range<u64>],
        num_shards: u64,
    ) -> Result<Vec<ShardWritten>> {
        let all_written = outcomes
            .iter()
            .all(|o| matches!(o, Some(Outcome::Written(..))));
        if !all_written {
            let mut first_failure = None;
            for (k, outcome) in outcomes.into_iter().enumerate() {
                match outcome {
                    Some(Outcome::Written(_, tmp)) => {
                        let _ = std::fs::remove_file(tmp);
                    }
                    Some(failure) if first_failure.is_none() => first_failure = Some((k, failure)),
                    _ => {}
                }
            }
            return match first_failure {
                Some((_, Outcome::Panicked(panic))) => std::panic::resume_unwind(panic),
                Some((k, Outcome::Failed(source))) => Err(Error::Shard {
                    shard: k as u64,
                    num_shards,
                    start: ranges[k].start,
                    end: ranges[k].end,
                    source: Box::new(source),
                }),
                _ => unreachable!("a shard that was not written failed or panicked"),
            };
        }
        let finished: Vec<(WriteSummary, PathBuf)> = outcomes
            .into_iter()
            .map(|o| match o {
                Some(Outcome::Written(summary, tmp)) => (summary, tmp),
                _ => unreachable!("checked above"),
            })
            .collect();
        let mut written: Vec<ShardWritten> = Vec::with_capacity(finished.len());
        for (k, (summary, tmp)) in finished.iter().enumerate() {
            let path = shard_path(&self.path, k as u64, num_shards);
            if let Err(e) = rename_into_place(tmp, &path) {
                // A partial set must not look complete: the shards renamed so far go, and
                // the temporary files not renamed yet.
                for done in &written {
                    let _ = std::fs::remove_file(&done.path);
                }
                for (_, rest) in &finished[k..] {
                    let _ = std::fs::remove_file(rest);
                }
                return Err(e);
            }
            written.push(ShardWritten {
                path,
                samples: ranges[k].clone(),
                summary: *summary,
            });
        }
        tracing::debug!(path = %self.path.display(), num_shards, "wrote sharded .beton");
        Ok(written)
    }
}
