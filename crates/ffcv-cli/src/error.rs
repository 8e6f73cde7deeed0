//! The errors the `ffcv` commands report: one line on stderr, exit status 1.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in `inspect`, `dump` and `write` after the arguments parsed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The file could not be opened, failed validation, or a sample could not be read.
    #[error(transparent)]
    Beton(#[from] beton_io::Error),

    /// Writing to standard output failed (a closed pipe is not reported: see `main`).
    #[error("cannot write to standard output: {0}")]
    Stdout(#[source] io::Error),

    /// `--fields` named a field the file does not have.
    #[error("{path}: no field named `{name}` (the file has: {available})")]
    UnknownField {
        /// The file.
        path: PathBuf,
        /// The requested name.
        name: String,
        /// The file's field names, comma-separated.
        available: String,
    },

    /// `--start` points past the last sample.
    #[error("{path}: --start {start} is past the end (the file has {num_samples} samples)")]
    StartPastEnd {
        /// The file.
        path: PathBuf,
        /// The requested first sample.
        start: u64,
        /// Samples in the file.
        num_samples: u64,
    },

    /// A sample's stored value cannot be decoded (sizes disagree, unknown image mode, ...).
    #[error("{path}: sample {sample}, field `{field}`: {reason}")]
    BadValue {
        /// The file.
        path: PathBuf,
        /// The sample id.
        sample: u64,
        /// The field name.
        field: String,
        /// What is wrong, with the numbers involved.
        reason: String,
    },

    /// `ffcv write image-folder`: the source folder cannot be used.
    #[error("{path}: {reason}")]
    ImageFolder {
        /// The folder.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// `ffcv write webdataset|parquet|arrow|tfrecord` and object storage: an input
    /// cannot be read, a record cannot be converted, an object cannot be fetched or
    /// uploaded, a staging file cannot be written ([`ffcv_ingest::Error`]'s message).
    #[error(transparent)]
    Ingest(ffcv_ingest::Error),

    /// The loader (`ffcv dump --decoder`) could not be built or failed to decode a sample.
    #[error(transparent)]
    Loader(#[from] ffcv::Error),

    /// `ffcv doctor`: no configuration could be measured, so nothing is recommended.
    #[error("{path}: no configuration could be measured, so nothing is recommended: {reason}")]
    NothingMeasured {
        /// The file.
        path: PathBuf,
        /// The first run's error.
        reason: String,
    },

    /// The options given do not fit together (exit status 2, like clap's usage errors).
    #[error("{0}")]
    Usage(String),
}

impl From<ffcv_ingest::Error> for CliError {
    /// A conversion's usage error stays a usage error (exit status 2), and a writer's
    /// error a [`CliError::Beton`]; the rest keep their message.
    fn from(err: ffcv_ingest::Error) -> Self {
        match err {
            ffcv_ingest::Error::Usage(reason) => CliError::Usage(reason),
            ffcv_ingest::Error::Beton(err) => CliError::Beton(err),
            other => CliError::Ingest(other),
        }
    }
}

/// The `Result` of a command.
pub type Result<T> = std::result::Result<T, CliError>;
