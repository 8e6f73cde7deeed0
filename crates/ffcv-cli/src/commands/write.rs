//! `ffcv write synthetic OUT --kind KIND --samples N`: build .beton files.

use std::path::PathBuf;

use crate::byte_size::parse_byte_size;
use crate::error::{CliError, Result};

/// Arguments of `ffcv write`.
#[derive(clap::Args, Debug)]
pub struct WriteArgs {
    #[command(subcommand)]
    source: WriteSource,
}

#[derive(clap::Subcommand, Debug)]
enum WriteSource {
    /// Generate a dataset with deterministic pseudo-random content.
    Synthetic(SyntheticArgs),
}

/// What `ffcv write synthetic` generates.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `index` (int) and `value` (float).
    Scalars,
    /// `index` (int) and `blob` (bytes of varying length around --size).
    Bytes,
    /// `index` (int) and `array` (ndarray of --dtype and --shape).
    Ndarray,
    /// `image` (u8 32x32x3 ndarray) and `label` (int 0..10), like CIFAR-10.
    CifarRaw,
    /// `image` (raw RGB image, --shape H,W, default 32,32) and `label` (int 0..10).
    ImagesRaw,
}

/// Arguments of `ffcv write synthetic`.
#[derive(clap::Args, Debug)]
pub struct SyntheticArgs {
    /// The .beton file to write.
    pub out: PathBuf,
    /// What to generate.
    #[arg(long, value_enum)]
    pub kind: Kind,
    /// Number of samples.
    #[arg(long)]
    pub samples: u64,
    /// Seed of the content (the same seed gives the same values).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Page size: a power of two, at least 2 MiB (e.g. `8MiB`, `2097152`).
    #[arg(long, default_value = "8MiB", value_parser = parse_byte_size)]
    pub page_size: u64,
    /// Writer threads (default: the CPUs available).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Mean length of `bytes` samples (lengths vary from half to one and a half times it).
    #[arg(long, default_value = "4KiB", value_parser = parse_byte_size)]
    pub size: u64,
    /// Shape of `ndarray` samples (e.g. `3,4`), or H,W of `images-raw` images.
    #[arg(long, value_delimiter = ',')]
    pub shape: Option<Vec<u64>>,
    /// numpy dtype of `ndarray` samples (e.g. `<f4`, `|u1`, `>i8`).
    #[arg(long, default_value = "<f4")]
    pub dtype: String,
}

/// Runs `ffcv write`.
pub fn run(args: &WriteArgs) -> Result<()> {
    match &args.source {
        WriteSource::Synthetic(args) => Err(CliError::Write {
            path: args.out.clone(),
            reason: format!(
                "the dataset writer is not available yet (kind {:?}, {} samples, seed {}, page size {}, size {}, shape {:?}, dtype {}, workers {:?})",
                args.kind,
                args.samples,
                args.seed,
                args.page_size,
                args.size,
                args.shape,
                args.dtype,
                args.workers
            ),
        }),
    }
}
