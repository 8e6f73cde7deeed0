//! What the sources of `ffcv write` share about their output: the `--page-size`,
//! `--workers`, `--shards N` and `--shard-index I` flags, OUT in object storage
//! (`crate::object_io`), the progress bar, and the summary of the files written.

use std::io::IsTerminal;
use std::ops::Range;
use std::path::{Path, PathBuf};

use beton_io::{
    DatasetWriter, FieldSpec, FieldValue, SampleSource, ShardWritten, SourceError, WriteSummary,
    shard_path, shard_ranges,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::{CliError, Result};

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
    /// The writer of OUT (or of the shard --shard-index names) with `fields`, the page
    /// size and --workers (else the writer's default, one thread per CPU); a bad page size is
    /// the writer's error.
    pub(crate) fn writer(&self, out: &Path, fields: Vec<FieldSpec>) -> Result<DatasetWriter> {
        // A URL is written to a staging file first; `ShardsArg::write` uploads it.
        let out = crate::object_io::local_output(out)?;
        let writer = DatasetWriter::new(self.shards.writer_path(&out), fields)?
            .with_page_size(self.page_size)?;
        Ok(match self.workers {
            Some(workers) => writer.with_num_workers(workers),
            None => writer,
        })
    }

    /// The writer threads: --workers, else the CPUs available (at least 1).
    pub(crate) fn threads(&self) -> usize {
        self.workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
            .max(1)
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
    /// Refuses a --shard-index not below --shards, and more shards than samples (usage
    /// errors: every shard holds a sample).
    pub(crate) fn check(self, samples: u64, unit: &str) -> Result<()> {
        if let Some(index) = self.index
            && index >= self.count
        {
            return Err(CliError::Usage(format!(
                "--shard-index {index} is not below --shards {} (shards are numbered from 0)",
                self.count
            )));
        }
        if self.count > 1 && self.count > samples {
            return Err(CliError::Usage(format!(
                "--shards {} is more than the {samples} {unit} to write (every shard holds at \
                 least one)",
                self.count
            )));
        }
        Ok(())
    }

    /// The file a writer is made for: shard I's name with --shard-index (when N > 1),
    /// OUT otherwise ([`ShardsArg::write`] then names the shards after it).
    pub(crate) fn writer_path(self, out: &Path) -> PathBuf {
        match self.index {
            Some(index) if self.count > 1 => shard_path(out, index, self.count),
            _ => out.to_path_buf(),
        }
    }

    /// The source's samples this run writes: all of them, or shard I's block.
    pub(crate) fn samples(self, num_samples: u64) -> Range<u64> {
        match self.index {
            Some(index) if self.count > 1 => shard_ranges(num_samples, self.count)
                .get(index as usize)
                .cloned()
                .unwrap_or(0..0),
            _ => 0..num_samples,
        }
    }

    /// Writes `source` with `writer` (made for [`ShardsArg::writer_path`]): all N shards,
    /// or with --shard-index only shard I, the I-th contiguous block of
    /// [`beton_io::shard_ranges`], exactly the samples of shard I of the all-N write.
    /// Shards of an OUT URL are then uploaded ([`crate::object_io::commit`]) and named by
    /// their URLs.
    pub(crate) fn write<S: SampleSource + ?Sized>(
        self,
        writer: &DatasetWriter,
        source: &S,
    ) -> Result<Vec<ShardWritten>> {
        let mut shards = self.write_local(writer, source)?;
        crate::object_io::commit(&mut shards)?;
        Ok(shards)
    }

    fn write_local<S: SampleSource + ?Sized>(
        self,
        writer: &DatasetWriter,
        source: &S,
    ) -> beton_io::Result<Vec<ShardWritten>> {
        match self.index {
            Some(_) if self.count > 1 => {
                let samples = self.samples(source.num_samples());
                let part = Part {
                    inner: source,
                    samples: samples.clone(),
                };
                let summary = writer.write(&part)?;
                Ok(vec![ShardWritten {
                    path: writer.path().to_path_buf(),
                    samples,
                    summary,
                }])
            }
            _ => writer.write_shards(source, self.count),
        }
    }
}

/// A block of a source's samples as a source of their own.
struct Part<'a, S: ?Sized> {
    inner: &'a S,
    samples: Range<u64>,
}

impl<S: SampleSource + ?Sized> SampleSource for Part<'_, S> {
    fn num_samples(&self) -> u64 {
        self.samples.end - self.samples.start
    }

    fn sample(&self, index: u64) -> std::result::Result<Vec<FieldValue>, SourceError> {
        self.inner.sample(self.samples.start + index)
    }
}

/// What the shards of a write hold together, and the name to print for them: OUT itself
/// for one shard, `N shards FIRST … LAST` otherwise.
pub(crate) fn written(shards: &[ShardWritten]) -> (WriteSummary, String) {
    let total = WriteSummary {
        num_samples: shards.iter().map(|s| s.summary.num_samples).sum(),
        num_pages: shards.iter().map(|s| s.summary.num_pages).sum(),
        alloc_table_rows: shards.iter().map(|s| s.summary.alloc_table_rows).sum(),
        file_size: shards.iter().map(|s| s.summary.file_size).sum(),
    };
    let name = match shards {
        [one] => one.path.display().to_string(),
        [first, .., last] => format!(
            "{} shards {} … {}",
            shards.len(),
            first.path.display(),
            last.path.display()
        ),
        [] => String::new(),
    };
    (total, name)
}

/// One line per shard (only when there are several): its file, samples, pages and bytes.
pub(crate) fn print_shards(shards: &[ShardWritten]) {
    if shards.len() < 2 {
        return;
    }
    for s in shards {
        println!(
            "  {}: samples {}..{}, {} data pages, {} bytes",
            s.path.display(),
            s.samples.start,
            s.samples.end,
            s.summary.num_pages,
            s.summary.file_size
        );
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
