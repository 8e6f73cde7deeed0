//! What a conversion tells its caller: lines and progress while it runs ([`Observer`]),
//! and what it did when it ends ([`Report`]).

use beton_io::{ShardWritten, WriteSummary};

/// Sees a conversion as it runs. The command line prints the lines on stdout and draws
/// the counts as progress bars; the Python package keeps the lines and calls the user's
/// progress function. Called from the writer's threads too, so it must be `Send + Sync`.
pub trait Observer: Send + Sync {
    /// A line for the user: the fields used (`fields: --field …`), a column left out,
    /// the summary, the records skipped, where the skip report went.
    fn line(&self, text: &str);
    /// A count of `total` `unit`s starts (`records`, `records checked`).
    fn start(&self, _total: u64, _unit: &str) {}
    /// `done` of the current count are done. Threads report as they finish, so a call
    /// may carry a lower count than the one before it.
    fn progress(&self, _done: u64) {}
    /// The current count ended.
    fn finish(&self) {}
}

/// An observer that ignores everything.
pub struct Quiet;

impl Observer for Quiet {
    fn line(&self, _text: &str) {}
}

/// A record left out by `skip_unreadable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The input (its URL when it was fetched).
    pub input: String,
    /// The record: a WebDataset key or a row number as text; `None` for the broken tail
    /// of an input (its records before the break were kept).
    pub record: Option<String>,
    /// Why it was left out.
    pub error: String,
}

/// What a conversion did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The fields, in file order, as `(name, "SOURCE:KIND")` (the `--field` flags'
    /// right-hand sides: `jpg:image`, `label:int`).
    pub fields: Vec<(String, String)>,
    /// Columns inference left out, with the reason (Parquet, Arrow, TFRecord).
    pub left_out: Vec<(String, String)>,
    /// The input files (URLs for fetched objects), in the order read.
    pub inputs: Vec<String>,
    /// Records in the inputs (before any was skipped).
    pub records: u64,
    /// The files written (URLs for uploaded shards), with their samples and sizes.
    pub written: Vec<ShardWritten>,
    /// The records left out by `skip_unreadable`.
    pub skipped: Vec<Skipped>,
    /// Where the skip report went (`OUT.skipped.json`), with `skip_unreadable`.
    pub skip_report: Option<String>,
    /// Images of the first image field stored raw and as JPEG, and the JPEGs stored
    /// unchanged (passthrough).
    pub images: ImageCounts,
}

/// How the first image field's images were stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageCounts {
    /// Stored as raw pixels.
    pub raw: u64,
    /// Stored as JPEG.
    pub jpg: u64,
    /// Of the JPEGs, those stored as the source's bytes.
    pub unchanged: u64,
}

/// What the shards of a write hold together, and the name to print for them: OUT itself
/// for one shard, `N shards FIRST … LAST` otherwise.
pub fn written(shards: &[ShardWritten]) -> (WriteSummary, String) {
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
pub fn shard_lines(shards: &[ShardWritten]) -> Vec<String> {
    if shards.len() < 2 {
        return Vec::new();
    }
    shards
        .iter()
        .map(|s| {
            format!(
                "  {}: samples {}..{}, {} data pages, {} bytes",
                s.path.display(),
                s.samples.start,
                s.samples.end,
                s.summary.num_pages,
                s.summary.file_size
            )
        })
        .collect()
}
