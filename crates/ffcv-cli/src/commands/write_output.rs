//! What both sources of `ffcv write` (`synthetic`, `image-folder`) share about their
//! output: the `--shards N` flag, the progress bar, and the summary of the files written.

use std::io::IsTerminal;

use beton_io::{ShardWritten, WriteSummary};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::{CliError, Result};

/// `--shards N` of `ffcv write synthetic` and `ffcv write image-folder`.
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
}

impl ShardsArg {
    /// Refuses more shards than samples (a usage error: every shard holds a sample).
    pub(crate) fn check(self, samples: u64, unit: &str) -> Result<()> {
        if self.count > 1 && self.count > samples {
            return Err(CliError::Usage(format!(
                "--shards {} is more than the {samples} {unit} to write (every shard holds at                  least one)",
                self.count
            )));
        }
        Ok(())
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
