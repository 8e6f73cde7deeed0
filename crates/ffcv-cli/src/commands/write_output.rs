//! What the sources of `ffcv write` share about their output: the `--page-size`,
//! `--workers`, `--shards N` and `--shard-index I` flags (parsed here, carried out by
//! `ffcv_ingest`'s `Target` and `Shards`, OUT in object storage included), the progress
//! bar, the observer that prints a conversion's lines, and the summary of the files
//! written.

use std::io::IsTerminal;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use beton_io::{DatasetWriter, FieldSpec, SampleSource, ShardWritten, WriteSummary};
use ffcv_ingest::{Observer, Shards, Target};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::Result;

/// The output flags of every `ffcv write` source: page size, writer threads, shards.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct WriteTarget {
    /// Page size: a power of two, at least 2 MiB, below 4 GiB (e.g. `8MiB`, `2097152`).
    #[arg(long, default_value = "8MiB", value_parser = crate::byte_size::parse_byte_size)]
    pub page_size: u64,
    /// Writer threads, 1 to 1024 (default: the CPUs available).
    #[arg(long, value_parser = crate::numeric_flags::threads::<usize>())]
    pub workers: Option<usize>,
    /// Write N files in parallel instead of one.
    #[command(flatten)]
    pub shards: ShardsArg,
}

impl WriteTarget {
    /// The conversion library's target: the same page size, workers and shards.
    pub(crate) fn target(&self) -> Target {
        Target {
            page_size: self.page_size,
            workers: self.workers,
            shards: self.shards.shards(),
        }
    }

    /// The writer of OUT (or of the shard --shard-index names) with `fields`, the page
    /// size and --workers (else the writer's default, one thread per CPU); a bad page size is
    /// the writer's error. An OUT URL is written to a staging file first;
    /// `ShardsArg::write` uploads it.
    pub(crate) fn writer(&self, out: &Path, fields: Vec<FieldSpec>) -> Result<DatasetWriter> {
        Ok(self.target().writer(out, fields)?)
    }
}

/// `--shards N` and `--shard-index I` of every `ffcv write` source.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ShardsArg {
    /// Write N files in parallel instead of one: OUT `train.beton` becomes
    /// `train-00000-of-0000N.beton` … , shard k holding the k-th contiguous block of the
    /// samples in order (sizes differing by at most one), so the shards in name order are
    /// the single-file write sample for sample. 1 (the default) writes OUT itself; at most
    /// the number of samples.
    #[arg(long = "shards", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,
    /// Write only shard I (from 0) of the N of --shards, under its name in the set
    /// (`train-0000I-of-0000N.beton`): the same samples as shard I of a write of all N, so
    /// N processes given I = 0 … N-1 (a job array) write the whole set between them. Its
    /// bytes are those of the all-N write's shard I when both write the shard with one
    /// thread (--workers 1 here; N at least --workers there); with more threads it holds
    /// the same samples in the same order, pages laid out by whichever thread was first.
    #[arg(long = "shard-index", value_name = "I",
          value_parser = clap::value_parser!(u64))]
    pub index: Option<u64>,
}

impl ShardsArg {
    /// The conversion library's shards.
    pub(crate) fn shards(self) -> Shards {
        Shards {
            count: self.count,
            index: self.index,
        }
    }

    /// Refuses a --shard-index not below --shards, and more shards than samples (usage
    /// errors: every shard holds a sample).
    pub(crate) fn check(self, samples: u64, unit: &str) -> Result<()> {
        Ok(self.shards().check(samples, unit)?)
    }

    /// The file a writer is made for: shard I's name with --shard-index (when N > 1),
    /// OUT otherwise ([`ShardsArg::write`] then names the shards after it).
    pub(crate) fn writer_path(self, out: &Path) -> PathBuf {
        self.shards().writer_path(out)
    }

    /// The source's samples this run writes: all of them, or shard I's block.
    pub(crate) fn samples(self, num_samples: u64) -> Range<u64> {
        self.shards().samples(num_samples)
    }

    /// Writes `source` with `writer` (made for [`ShardsArg::writer_path`]): all N shards,
    /// or with --shard-index only shard I, exactly the samples of shard I of the all-N
    /// write. Shards of an OUT URL are uploaded as each is written and named by their URLs.
    pub(crate) fn write<S: SampleSource + ?Sized>(
        self,
        writer: &DatasetWriter,
        source: &S,
    ) -> Result<Vec<ShardWritten>> {
        Ok(self.shards().write(writer, source)?)
    }
}

/// What the shards of a write hold together, and the name to print for them: OUT itself
/// for one shard, `N shards FIRST … LAST` otherwise.
pub(crate) fn written(shards: &[ShardWritten]) -> (WriteSummary, String) {
    ffcv_ingest::report::written(shards)
}

/// One line per shard (only when there are several): its file, samples, pages and bytes.
pub(crate) fn print_shards(shards: &[ShardWritten]) {
    for line in ffcv_ingest::report::shard_lines(shards) {
        println!("{line}");
    }
}

/// A bar on stderr counting `total` `unit`s (samples, images) when stderr is a terminal;
/// hidden (drawing nothing) otherwise.
pub(crate) fn progress_bar(total: u64, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let template = format!(
        "{{spinner}} writing [{{bar:40}}] {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}})"
    );
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// A conversion's lines on stdout and its counts as progress bars on stderr.
#[derive(Default)]
pub(crate) struct Printer {
    bar: Mutex<Option<ProgressBar>>,
}

impl Observer for Printer {
    fn line(&self, text: &str) {
        println!("{text}");
    }

    fn start(&self, total: u64, unit: &str) {
        *self.bar.lock().unwrap_or_else(|p| p.into_inner()) = Some(progress_bar(total, unit));
    }

    fn progress(&self, done: u64) {
        // Threads report out of order; the bar only moves forward.
        if let Some(bar) = &*self.bar.lock().unwrap_or_else(|p| p.into_inner())
            && done > bar.position()
        {
            bar.set_position(done);
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|p| p.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}
