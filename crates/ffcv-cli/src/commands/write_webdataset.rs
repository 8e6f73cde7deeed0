//! `ffcv write webdataset INPUT... OUT`: WebDataset tar shards as an FFCV `.beton` file,
//! by `ffcv_ingest::write_webdataset` (the flags become its `Job`; its lines are printed).
//!
//! The inputs are expanded and sorted, every tar header is scanned into records, and the
//! fields are the `--field NAME=EXT:KIND` flags or, without them, inferred from the first
//! record; the fields used are printed as flags, so a run can be repeated with them. Record `i` of
//! the sorted shards is sample `i` of the file (or of the set, with `--shards`). A
//! record that cannot be converted stops the write with an error naming its shard and
//! key; with `--skip-unreadable` every record is checked first (images decoded, `cls`,
//! `json` and `npy` members parsed, tar structure followed), and the bad ones are left
//! out, listed on stdout and in `OUT.skipped.json`.

use std::path::PathBuf;
use std::sync::Arc;

use super::write_images::ImageOptions;
use super::write_output::{Printer, WriteTarget};
use crate::error::Result;

/// Arguments of `ffcv write webdataset`.
#[derive(clap::Args, Debug)]
pub struct WebDatasetArgs {
    /// The tar shards: paths, glob patterns (`data/*.tar`) and brace lists
    /// (`shard-{000..009}.tar`, `{train,extra}.tar`), expanded and sorted byte-wise.
    #[arg(value_name = "INPUT", required = true)]
    pub inputs: Vec<String>,
    /// The .beton file to write.
    #[arg(value_name = "OUT")]
    pub out: PathBuf,
    /// A field, NAME=EXT:KIND: the record member with extension EXT stored as KIND
    /// (image, int, json, array, bytes), e.g. `--field image=jpg:image --field
    /// label=cls:int`. Repeat it for each field, in file order. Without it the fields are
    /// the first record's members, named by extension: jpg/jpeg/png images, cls ints,
    /// json JSON, npy arrays (dtype and shape of the first record's), others bytes.
    #[arg(long = "field", value_name = "NAME=EXT:KIND")]
    pub fields: Vec<String>,
    /// The image options.
    #[command(flatten)]
    pub image: ImageOptions,
    /// Leave out records that cannot be converted (a broken tar member, an image that does
    /// not decode, a cls that is not an integer, a missing member, an array of another
    /// shape) instead of failing: every record is checked once beforehand (on every
    /// process of a --shard-index job, since the split counts the records kept); they
    /// are listed at the end and in OUT.skipped.json.
    #[arg(long)]
    pub skip_unreadable: bool,
    /// Page size, writer threads and shards.
    #[command(flatten)]
    pub target: WriteTarget,
}

/// Runs `ffcv write webdataset`.
pub fn run(args: &WebDatasetArgs) -> Result<()> {
    let job = ffcv_ingest::Job {
        inputs: args.inputs.clone(),
        out: args.out.clone(),
        fields: args.fields.clone(),
        image: args.image.options(),
        skip_unreadable: args.skip_unreadable,
        target: args.target.target(),
    };
    ffcv_ingest::write_webdataset(&job, Arc::new(Printer::default()))?;
    Ok(())
}
