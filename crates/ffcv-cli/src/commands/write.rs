//! `ffcv write synthetic OUT --kind KIND --samples N`: build .beton files, as one file or
//! (`--shards N`, shared with `write image-folder` and `write webdataset`) as N files
//! written in parallel, or only one of the N (`--shard-index I`).

use std::path::PathBuf;

use beton_io::{NumpyDtype, from_fn};
use ffcv_cli::synthetic::{Kind, Spec};

use super::write_output::{WriteTarget, print_shards, progress_bar, written};
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
    /// Write an image folder (one subfolder per class; label = sorted class index).
    ImageFolder(super::write_images::ImageFolderArgs),
    /// Write WebDataset tar shards (records grouped by key, extensions mapped to fields).
    Webdataset(super::write_webdataset::WebDatasetArgs),
    /// Write Parquet files (`datasets`' `to_parquet`; columns mapped to fields).
    Parquet(super::write_table::TableArgs),
    /// Write Arrow IPC files (`datasets`' `save_to_disk`; columns mapped to fields).
    Arrow(super::write_table::TableArgs),
    /// Write TFRecord files of `tf.train.Example`s (TFDS; features mapped to fields).
    Tfrecord(super::write_table::TableArgs),
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
    /// `bytes`: the mean sample length (lengths vary from half to one and a half times it).
    #[arg(long, value_parser = parse_byte_size)]
    pub size: Option<u64>,
    /// `ndarray`: the array shape (default `3,4`); `images-raw`: HEIGHT,WIDTH (default `32,32`).
    #[arg(long, value_delimiter = ',')]
    pub shape: Option<Vec<u64>>,
    /// `ndarray`: the numpy dtype, in any spelling `numpy.dtype` accepts (default `float32`;
    /// e.g. `f4`, `<f4`, `uint8`, `|u1`, `>i8`, `float16`, `bool`, `?`).
    #[arg(long)]
    pub dtype: Option<String>,
    /// Any kind: add a `boxes` field, a variable-length array of float32 rows of 4 with
    /// 0 to N rows per sample (N at most 1048576; deterministic from the seed and the sample).
    #[arg(long, value_name = "N", value_parser = crate::numeric_flags::var_rows::<u64>())]
    pub var_rows: Option<u64>,
    /// Options of `--kind jpeg` and `--kind photos`.
    #[command(flatten)]
    pub jpeg: super::write_images::SyntheticJpegArgs,
    /// Page size, writer threads and shards.
    #[command(flatten)]
    pub target: WriteTarget,
}

/// Runs `ffcv write`.
pub fn run(args: &WriteArgs) -> Result<()> {
    match &args.source {
        WriteSource::Synthetic(args) => synthetic(args),
        WriteSource::ImageFolder(args) => super::write_images::image_folder(args),
        WriteSource::Webdataset(args) => super::write_webdataset::run(args),
        WriteSource::Parquet(args) => {
            super::write_table::run(super::write_table::Format::Parquet, args)
        }
        WriteSource::Arrow(args) => {
            super::write_table::run(super::write_table::Format::Arrow, args)
        }
        WriteSource::Tfrecord(args) => {
            super::write_table::run(super::write_table::Format::TfRecord, args)
        }
    }
}

fn synthetic(args: &SyntheticArgs) -> Result<()> {
    let spec = spec(args)?;
    let fields = spec.fields().map_err(CliError::Usage)?;
    // The page size is validated first (by the writer), then checked against the samples.
    let writer = args.target.writer(&args.out, fields)?;
    check_fits(&spec, args.target.page_size)?;
    args.target.shards.check(args.samples, "samples")?;
    let part = args.target.shards.samples(args.samples);
    let bar = progress_bar(part.end - part.start, "samples");
    let shards = {
        let bar = bar.clone();
        args.target.shards.write(
            &writer.with_progress(move |done| bar.set_position(done)),
            &from_fn(args.samples, |i| Ok(spec.sample(i))),
        )
    };
    bar.finish_and_clear();
    let shards = shards?;
    let (summary, name) = written(&shards);
    println!(
        "wrote {name}: {} samples of kind {}, {} data pages, {} bytes",
        summary.num_samples,
        args.kind.name(),
        summary.num_pages,
        summary.file_size
    );
    print_shards(&shards);
    Ok(())
}

/// The spec from the arguments; an option the kind cannot use is a usage error.
fn spec(args: &SyntheticArgs) -> Result<Spec> {
    let mut spec = Spec::new(args.kind);
    spec.seed = args.seed;
    let unused = |option: &str, kinds: &str| {
        CliError::Usage(format!(
            "--{option} applies to --kind {kinds}, not to {}",
            args.kind.name()
        ))
    };
    if let Some(size) = args.size {
        if args.kind != Kind::Bytes {
            return Err(unused("size", "bytes"));
        }
        spec.mean_size = size;
    }
    if let Some(shape) = &args.shape {
        if !matches!(args.kind, Kind::Ndarray | Kind::ImagesRaw) {
            return Err(unused("shape", "ndarray or images-raw"));
        }
        spec.shape = shape.clone();
    }
    if let Some(dtype) = &args.dtype {
        if args.kind != Kind::Ndarray {
            return Err(unused("dtype", "ndarray"));
        }
        spec.dtype = NumpyDtype::from_numpy_name(dtype)
            .map_err(|err| CliError::Usage(format!("--dtype {dtype}: {err}")))?;
    }
    spec.var_rows = args.var_rows;
    args.jpeg.apply(&mut spec)?;
    Ok(spec)
}

/// Refuses parameters whose largest sample cannot fit in one page, before generating any.
fn check_fits(spec: &Spec, page_size: u64) -> Result<()> {
    match spec.largest_sample_bytes() {
        Some(largest) if largest <= page_size => Ok(()),
        largest => {
            let needed = largest
                .and_then(u64::checked_next_power_of_two)
                .map(|p| p.max(beton_io::MIN_PAGE_SIZE))
                .filter(|&p| p < beton_io::MAX_PAGE_SIZE)
                .map_or_else(
                    || "no page size fits: pages are below 4 GiB".to_owned(),
                    |p| format!("use --page-size {p} or more"),
                );
            Err(CliError::Usage(format!(
                "samples of kind {} with these options take up to {} bytes, more than a page of {page_size} bytes ({needed})",
                spec.kind.name(),
                largest.map_or_else(|| "2^64".to_owned(), |l| l.to_string()),
            )))
        }
    }
}
