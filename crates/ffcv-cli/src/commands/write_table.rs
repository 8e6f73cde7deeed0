//! `ffcv write parquet|arrow|tfrecord INPUT... OUT`: Parquet files, Arrow IPC files or
//! TFRecord files of `tf.train.Example`s as an FFCV `.beton` file, by
//! `ffcv_ingest::write_table` (the flags become its `Job`; its lines are printed).
//!
//! The inputs are expanded and sorted as WebDataset shards are (a folder stands for its
//! files of the format), the files are opened (footers or record headers read), and the
//! fields are the `--field NAME=COLUMN:KIND` flags or, without them, inferred from the
//! first record; the fields used are printed as flags. Record `i` of the sorted files is
//! sample `i` of the file (or of the set, with `--shards`). A record that cannot be
//! converted stops the write with an error naming its file and the record; with
//! `--skip-unreadable` every record is checked first and the bad ones are left out,
//! listed on stdout and in `OUT.skipped.json`.

use std::path::PathBuf;
use std::sync::Arc;

pub use ffcv_ingest::Format;

use super::write_images::ImageOptions;
use super::write_output::{Printer, WriteTarget};
use crate::error::Result;

/// Arguments of `ffcv write parquet`, `ffcv write arrow` and `ffcv write tfrecord`.
#[derive(clap::Args, Debug)]
pub struct TableArgs {
    /// The input files: paths, glob patterns (`data/*.parquet`) and brace lists
    /// (`train-{00000..00003}-of-00004.tfrecord`), expanded and sorted byte-wise; a folder
    /// stands for its files of the format (`*.parquet`; `*.arrow`, as `save_to_disk`
    /// writes them; names holding `.tfrecord`).
    #[arg(value_name = "INPUT", required = true)]
    pub inputs: Vec<String>,
    /// The .beton file to write.
    #[arg(value_name = "OUT")]
    pub out: PathBuf,
    /// A field, NAME=COLUMN:KIND: the column (TFRecord: the feature key) stored as KIND
    /// (image, int, float, json, array, var_array, bytes), e.g. `--field image=image:image
    /// --field label=label:int --field tokens=input_ids:var_array`. Repeat it for each
    /// field, in file order. `array` is an NDArrayField (every record the first record's
    /// dtype and shape); `var_array` a VarArrayField (every record the first record's
    /// dtype and row shape, any number of rows, 0 too). Without it the fields are inferred
    /// from the first record: image structs and JPEG/PNG bytes images, integers ints,
    /// floats floats, strings and other bytes bytes; for Parquet and Arrow, columns of a
    /// variable-size list type (List, LargeList) of numbers var_array, fixed-size lists
    /// array; for TFRecord, which has no schema, numeric lists array (var_array only
    /// with --field).
    #[arg(long = "field", value_name = "NAME=COLUMN:KIND")]
    pub fields: Vec<String>,
    /// The image options.
    #[command(flatten)]
    pub image: ImageOptions,
    /// Leave out records that cannot be converted (an image that does not decode, a null,
    /// a value of another kind, a TFRecord checksum mismatch, a row group that does not
    /// decode) instead of failing: every record is checked once beforehand; they are
    /// listed at the end and in OUT.skipped.json.
    #[arg(long)]
    pub skip_unreadable: bool,
    /// Page size, writer threads and shards.
    #[command(flatten)]
    pub target: WriteTarget,
}

/// Runs `ffcv write parquet`, `arrow` or `tfrecord`.
pub fn run(format: Format, args: &TableArgs) -> Result<()> {
    let job = ffcv_ingest::Job {
        inputs: args.inputs.clone(),
        out: args.out.clone(),
        fields: args.fields.clone(),
        image: args.image.options(),
        skip_unreadable: args.skip_unreadable,
        target: args.target.target(),
    };
    ffcv_ingest::write_table(format, &job, Arc::new(Printer::default()))?;
    Ok(())
}
