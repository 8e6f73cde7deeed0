//! `ffcv order FILE --order sequential|random|quasi-random [...]`: print one epoch's
//! sample order as a JSON array, exactly as the loader (and FFCV 1.0.2) would visit it.
//!
//! - `sequential`: the indices as given.
//! - `random`: NumPy's `default_rng(seed + epoch).permutation(indices)`; with
//!   `--world-size`/`--rank`, PyTorch's `DistributedSampler(shuffle=True)` positions
//!   (`torch.randperm` seeded with `seed + epoch`) mapped through the indices, as FFCV.
//! - `quasi-random`: the page-aware order with a buffer of `--quasi-buffer-pages` pages
//!   (alias `--buffer-pages`; default `2 x --batch-size`, as FFCV; with `--no-os-cache`,
//!   the loader's default: FFCV's buffer when the process cache's schedules fit the
//!   memory budget, `--max-memory` or the available memory, else the largest that fits);
//!   distributed too (FFCV refuses that).
//!
//! `--resume STATE.json` prints what this rank (`--world-size`/`--rank`, one process
//! without them) still has to yield in the state's epoch, exactly as a loader resumed
//! from the state (`ffcv bench --resume`, `LoaderBuilder::resume`) delivers it; the
//! order, seed and batch size default to the saved run's; indices must be the saved run's.
//!
//! `--schedule` prints, instead of the order, what it costs the process cache on this
//! rank: one JSON object with the samples (and how many distinct), the page slots the
//! epoch's page schedule needs and the pages it reads (FFCV's schedule, pages read up to
//! 3 batches ahead, no page kept from an earlier epoch; as `ffcv::quasi_buffer` plans it).
//!
//! `--indices FILE` restricts the order to a subset: either a JSON array of sample ids
//! (`[3, 1, 4]`) or plain text with sample ids separated by whitespace, usually one per
//! line. Ids may repeat (each occurrence is visited), and must be below the number of
//! samples. The cache flags are accepted for symmetry with `ffcv bench`; the order
//! depends on the cache only through quasi-random's default buffer.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::builder::{OsStringValueParser, TypedValueParser};

use traversal::{Distributed, OrderKind, OrderSpec, SamplePages, default_buffer_pages};

use crate::error::CliError;

/// The orders, as named on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderChoice {
    /// The indices as given.
    Sequential,
    /// A uniform random permutation per epoch (NumPy/PyTorch-exact).
    Random,
    /// Page-aware random order: few pages open at once.
    QuasiRandom,
}

impl From<OrderChoice> for OrderKind {
    fn from(choice: OrderChoice) -> OrderKind {
        match choice {
            OrderChoice::Sequential => OrderKind::Sequential,
            OrderChoice::Random => OrderKind::Random,
            OrderChoice::QuasiRandom => OrderKind::QuasiRandom,
        }
    }
}

/// Arguments of `ffcv order`.
#[derive(clap::Args, Debug)]
pub struct OrderArgs {
    /// The .beton file (a path, `file://`, `s3://` or `http(s)://` URL), or the first of
    /// several read as one dataset (shards); a glob pattern (`'data/train-*.beton'`) or an
    /// `s3://` prefix (`s3://bucket/train-`) names every match, sorted. Not given with
    /// --mix.
    #[arg(required_unless_present = "mix", default_value = "",
          value_parser = OsStringValueParser::new().map(PathBuf::from))]
    pub file: PathBuf,
    /// More shards of the same dataset, after FILE (global sample ids run through the
    /// files in the order given).
    #[arg(value_name = "MORE")]
    pub more: Vec<PathBuf>,

    /// A weighted mixture of datasets in place of FILE: prints its order (global sample
    /// ids, source after source; `docs/mixtures.md`). Not with --indices, --resume or
    /// --schedule.
    #[command(flatten)]
    pub mix: crate::mix_args::MixArgs,

    /// The traversal order [default: sequential; with --resume, the saved run's].
    #[arg(long, value_enum)]
    pub order: Option<OrderChoice>,

    /// The order's seed: epoch E of random order uses seed + E [default: 0; with
    /// --resume, the saved run's].
    #[arg(long)]
    pub seed: Option<u64>,

    /// The epoch (0-based).
    #[arg(long, default_value_t = 0)]
    pub epoch: u64,

    /// The loader's batch size; quasi-random buffers 2 x batch-size pages [default: 512;
    /// with --resume, the saved run's].
    #[arg(long, value_parser = crate::numeric_flags::batch_size::<u64>())]
    pub batch_size: Option<u64>,

    /// Quasi-random's buffer in pages (overrides the default: 2 x --batch-size, or with
    /// --no-os-cache the largest buffer up to that whose schedules fit the memory budget).
    #[arg(long = "quasi-buffer-pages", visible_alias = "buffer-pages",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub buffer_pages: Option<u64>,

    /// With --no-os-cache: the process cache's memory budget quasi-random's default
    /// buffer is sized to, as the loader's `max_memory` (default: the memory this process
    /// may still take, its cgroup's limit included).
    #[arg(long, value_name = "SIZE", value_parser = crate::byte_size::parse_byte_size)]
    pub max_memory: Option<u64>,

    /// Read through the OS page cache (the default; no effect on the order).
    #[arg(long, overrides_with = "no_os_cache")]
    pub os_cache: bool,

    /// Read through the process cache (no effect on the order).
    #[arg(long, overrides_with = "os_cache")]
    pub no_os_cache: bool,

    /// A subset of sample ids: a JSON array, or ids separated by whitespace (one per line).
    #[arg(long, value_name = "FILE")]
    pub indices: Option<PathBuf>,

    /// Number of ranks of a distributed job (with --rank).
    #[arg(long, requires = "rank", value_parser = clap::value_parser!(u64).range(1..))]
    pub world_size: Option<u64>,

    /// This process's rank, 0..world-size (with --world-size).
    #[arg(long, requires = "world_size")]
    pub rank: Option<u64>,

    /// Print this rank's remaining order of a saved loader state's epoch (from
    /// `ffcv bench --save-state`) instead of a whole epoch.
    #[arg(long, value_name = "STATE.json", conflicts_with = "epoch")]
    pub resume: Option<PathBuf>,

    /// Print what the order costs the process cache instead of the order: a JSON object
    /// with `samples`, `distinct_samples`, `slots` (page slots its schedule needs) and
    /// `pages_read` (prefetching 3 batches ahead, no page kept from an earlier epoch).
    #[arg(long)]
    pub schedule: bool,
}

/// What can go wrong in `ffcv order` beyond opening the file.
#[derive(Debug, thiserror::Error)]
pub enum OrderError {
    /// The indices file cannot be read.
    #[error("{path}: cannot read the indices file: {source}")]
    ReadIndices {
        /// The indices file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The indices file is neither a JSON array of ids nor whitespace-separated ids.
    #[error("{path}: {reason}")]
    BadIndices {
        /// The indices file.
        path: PathBuf,
        /// What is wrong, with where.
        reason: String,
    },
    /// An id of the indices file is not a sample of the dataset.
    #[error(
        "{indices}: sample id {index} (entry {position}) is out of range: {file} has {num_samples} samples"
    )]
    IndexOutOfRange {
        /// The indices file.
        indices: PathBuf,
        /// The dataset.
        file: PathBuf,
        /// The offending id.
        index: u64,
        /// Its 0-based position in the indices file.
        position: usize,
        /// Samples in the dataset.
        num_samples: u64,
    },
    /// The order cannot be built for this file and these options.
    #[error("{file}: {source}")]
    Order {
        /// The dataset.
        file: PathBuf,
        /// Why.
        #[source]
        source: traversal::Error,
    },
    /// A number does not fit this machine's address size.
    #[error("--{flag} {value} is too large for this machine")]
    TooLarge {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: u64,
    },
}

fn to_usize(flag: &'static str, value: u64) -> Result<usize, OrderError> {
    usize::try_from(value).map_err(|_| OrderError::TooLarge { flag, value })
}

/// Parses an indices file: a JSON array of non-negative integers, or integers separated
/// by whitespace.
pub fn parse_indices(path: &Path, text: &str) -> Result<Vec<u64>, OrderError> {
    let bad = |reason: String| OrderError::BadIndices {
        path: path.to_owned(),
        reason,
    };
    if text.trim_start().starts_with('[') {
        let values: Vec<serde_json::Value> = serde_json::from_str(text)
            .map_err(|err| bad(format!("not a JSON array of sample ids: {err}")))?;
        return values
            .iter()
            .enumerate()
            .map(|(position, value)| {
                value.as_u64().ok_or_else(|| {
                    bad(format!(
                        "entry {position} is {value}, not a non-negative integer sample id"
                    ))
                })
            })
            .collect();
    }
    let mut indices = Vec::new();
    for (line_number, line) in text.lines().enumerate() {
        for word in line.split_whitespace() {
            let index = word.parse::<u64>().map_err(|_| {
                bad(format!(
                    "line {}: `{word}` is not a non-negative integer sample id",
                    line_number + 1
                ))
            })?;
            indices.push(index);
        }
    }
    Ok(indices)
}

/// Quasi-random's buffer as a process-cache loader would choose it by default (FFCV's
/// `prefetch_ahead` of 3, `drop_last`).
fn sized_buffer(
    args: &OrderArgs,
    reader: &beton_io::Reader,
    indices: &[u64],
    seed: u64,
    distributed: Option<Distributed>,
    batch_size: usize,
) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
    let Some(budget) = args.max_memory.or_else(ffcv::page_cache::available_memory) else {
        return Ok(default_buffer_pages(batch_size));
    };
    let map = reader.page_map();
    let pages = SamplePages::from_fn(reader.num_samples(), |sample| {
        map.pages_of_sample(sample).first().copied()
    });
    let plan = ffcv::quasi_buffer::QuasiPlan {
        reader,
        pages: &pages,
        indices,
        seed,
        distributed,
        batch_size,
        drop_last: true,
        prefetch_ahead: 3,
    };
    let sizing = plan
        .size_buffer(budget)
        .map_err(|source| OrderError::Order {
            file: args.file.clone(),
            source,
        })?;
    Ok(sizing.buffer_pages)
}

/// The order of `--mix` on this rank: the mixture's, seed 0 unless given.
fn compute_mixture(args: &OrderArgs) -> Result<Computed, Box<dyn std::error::Error + Send + Sync>> {
    if args.indices.is_some() || args.resume.is_some() || args.schedule {
        return Err(CliError::Usage(
            "--mix cannot be combined with --indices, --resume or --schedule".into(),
        )
        .into());
    }
    args.mix.check_no_file(&args.file, &args.more)?;
    let saturate = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let world = args
        .world_size
        .zip(args.rank)
        .map(|(w, r)| (saturate(w), saturate(r)));
    let kind: OrderKind = args.order.map_or(OrderKind::Sequential, Into::into);
    let seed = Some(args.seed.unwrap_or(0));
    let mixture = args.mix.open(kind.into(), seed, world, args.buffer_pages)?;
    let order = traversal::TraversalOrder::order(mixture.order().as_ref(), args.epoch);
    let batch_size = saturate(args.batch_size.unwrap_or(512));
    Ok((
        order,
        std::sync::Arc::clone(&mixture.dataset().reader),
        batch_size,
        None,
    ))
}

/// The order `args` describe (the sample ids of the epoch on this rank), the reader it
/// was computed over, its batch size and QuasiRandom's buffer (`None` for the other
/// orders).
type Computed = (
    Vec<u64>,
    std::sync::Arc<beton_io::Reader>,
    usize,
    Option<usize>,
);

/// Computes the order `args` describe, with what `--schedule` needs to cost it.
pub fn compute(args: &OrderArgs) -> Result<Computed, Box<dyn std::error::Error + Send + Sync>> {
    if args.mix.is_set() {
        return compute_mixture(args);
    }
    let reader = crate::dataset_args::open(&args.file, &args.more)
        .map_err(CliError::from)?
        .reader;
    let num_samples = reader.num_samples();

    let indices = match &args.indices {
        None => (0..num_samples).collect(),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| OrderError::ReadIndices {
                path: path.clone(),
                source,
            })?;
            let indices = parse_indices(path, &text)?;
            if let Some((position, &index)) =
                indices.iter().enumerate().find(|&(_, &i)| i >= num_samples)
            {
                return Err(OrderError::IndexOutOfRange {
                    indices: path.clone(),
                    file: args.file.clone(),
                    index,
                    position,
                    num_samples,
                }
                .into());
            }
            indices
        }
    };

    let order_error = |source| OrderError::Order {
        file: args.file.clone(),
        source,
    };
    let distributed = match (args.world_size, args.rank) {
        (Some(world_size), Some(rank)) => Some(
            Distributed::new(
                to_usize("world-size", world_size)?,
                // A rank beyond usize is out of range anyway; keep the error typed.
                usize::try_from(rank).unwrap_or(usize::MAX),
            )
            .map_err(order_error)?,
        ),
        _ => None,
    };
    // With --resume, what the command line leaves out is the saved run's.
    let state = match &args.resume {
        Some(path) => Some(crate::state_file::read(path)?),
        None => None,
    };
    let kind: OrderKind = match (args.order, &state) {
        (Some(choice), _) => choice.into(),
        (None, Some(state)) => state.order_kind().unwrap_or(OrderKind::Sequential),
        (None, None) => OrderKind::Sequential,
    };
    let seed = args.seed.or(state.as_ref().map(|s| s.seed())).unwrap_or(0);
    let batch_size = match (args.batch_size, &state) {
        (Some(b), _) => to_usize("batch-size", b)?,
        (None, Some(state)) => state.batch_size(),
        (None, None) => 512,
    };
    let buffer_pages = match (args.buffer_pages, &state) {
        (Some(pages), _) => to_usize("buffer-pages", pages)?,
        (None, Some(state)) if kind == OrderKind::QuasiRandom && state.buffer_pages() > 0 => {
            state.buffer_pages()
        }
        _ if kind == OrderKind::QuasiRandom && args.no_os_cache => {
            sized_buffer(args, &reader, &indices, seed, distributed, batch_size)?
        }
        _ => default_buffer_pages(batch_size),
    };
    let spec = OrderSpec {
        kind,
        seed,
        distributed,
        buffer_pages,
    };
    let pages = (spec.kind == OrderKind::QuasiRandom).then(|| {
        let map = reader.page_map();
        SamplePages::from_fn(num_samples, |sample| {
            map.pages_of_sample(sample).first().copied()
        })
    });
    tracing::debug!(?spec, samples = indices.len(), "ffcv order");
    let quasi_buffer = (kind == OrderKind::QuasiRandom).then_some(buffer_pages);
    if let Some(state) = &state {
        let order = state.remaining_order(&reader, &spec, &indices, batch_size)?;
        return Ok((order, reader, batch_size, quasi_buffer));
    }
    let order = spec.build(indices, pages.as_ref()).map_err(order_error)?;
    Ok((order.order(args.epoch), reader, batch_size, quasi_buffer))
}

/// The `--schedule` report of an order.
fn schedule_report(
    order: &[u64],
    reader: &beton_io::Reader,
    batch_size: usize,
    buffer_pages: Option<usize>,
) -> serde_json::Value {
    let cost = ffcv::quasi_buffer::epoch_pages(reader, order, batch_size, false, 3);
    let distinct: std::collections::HashSet<u64> = order.iter().copied().collect();
    serde_json::json!({
        "samples": order.len(),
        "distinct_samples": distinct.len(),
        "slots": cost.slots,
        "pages_read": cost.pages_read,
        "batch_size": batch_size,
        "buffer_pages": buffer_pages,
    })
}

/// Runs `ffcv order`: prints the order as one JSON array on standard output.
pub fn run(args: &OrderArgs) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let (order, reader, batch_size, buffer_pages) = compute(args)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    if args.schedule {
        let report = schedule_report(&order, &reader, batch_size, buffer_pages);
        writeln!(out, "{report}")
            .and_then(|()| out.flush())
            .map_err(CliError::Stdout)?;
        return Ok(());
    }
    let mut write = || -> std::io::Result<()> {
        out.write_all(b"[")?;
        for (i, index) in order.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write!(out, "{index}")?;
        }
        out.write_all(b"]\n")?;
        out.flush()
    };
    write().map_err(CliError::Stdout)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_files_are_json_arrays_or_whitespace_separated() {
        let path = Path::new("ids");
        assert_eq!(parse_indices(path, " [3, 1, 4]\n").unwrap(), vec![3, 1, 4]);
        assert_eq!(
            parse_indices(path, "3\n1\n\n4 5\n").unwrap(),
            vec![3, 1, 4, 5]
        );
        assert_eq!(parse_indices(path, "").unwrap(), Vec::<u64>::new());
        assert_eq!(parse_indices(path, "[]").unwrap(), Vec::<u64>::new());
    }

    #[test]
    fn malformed_indices_name_the_file_and_the_entry() {
        let path = Path::new("ids.txt");
        let message = parse_indices(path, "1\n2\n-3\n").unwrap_err().to_string();
        assert_eq!(
            message,
            "ids.txt: line 3: `-3` is not a non-negative integer sample id"
        );
        let message = parse_indices(path, "[1, 2.5]").unwrap_err().to_string();
        assert_eq!(
            message,
            "ids.txt: entry 1 is 2.5, not a non-negative integer sample id"
        );
        assert!(
            parse_indices(path, "[1, 2")
                .unwrap_err()
                .to_string()
                .starts_with("ids.txt: not a JSON array of sample ids")
        );
    }
}
