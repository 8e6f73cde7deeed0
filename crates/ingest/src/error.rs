//! The errors of a conversion: an input that cannot be read, a record that cannot be
//! converted, an object that cannot be fetched or uploaded, options that do not fit.

use std::io;
use std::path::PathBuf;

/// Everything that can stop a conversion before or after the writer runs; a record that
/// fails while the writer runs reaches the caller as [`Error::Beton`] around a
/// [`RecordError`] (the sample source's error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The writer failed: a bad page size, a write error, or a record that could not be
    /// converted (its source is then a [`RecordError`]).
    #[error(transparent)]
    Beton(#[from] beton_io::Error),

    /// A WebDataset shard cannot be read, or a record cannot be converted.
    #[error("{path}: {reason}")]
    WebDataset {
        /// The shard (its URL when it was fetched).
        path: PathBuf,
        /// What is wrong (with the record's key where one is at fault).
        reason: String,
    },

    /// A Parquet, Arrow IPC or TFRecord input cannot be read, or a record cannot be
    /// converted.
    #[error("{path}: {reason}")]
    Input {
        /// The input file (its URL when it was fetched).
        path: PathBuf,
        /// What is wrong (with the record where one is at fault).
        reason: String,
    },

    /// An object in storage (`s3://`, …) could not be fetched or uploaded.
    #[error("{url}: {reason}")]
    Remote {
        /// The object's URL.
        url: String,
        /// What went wrong.
        reason: String,
    },

    /// The write of an OUT URL failed: the writer's error, its shard named by its URL
    /// rather than by the staging file it was written to.
    #[error("{message}")]
    Output {
        /// The writer's message, the staging folder replaced by OUT's URL folder.
        message: String,
        /// The writer's error (boxed: it is large, and rare here).
        #[source]
        source: Box<beton_io::Error>,
    },

    /// A local file could not be created or written (the staging directory of remote
    /// inputs and outputs, the skip report).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },

    /// The options do not fit together or name something that is not there (a field
    /// mapping that does not parse, a column the input lacks, more shards than records).
    /// The command line reports it as a usage error (exit status 2).
    #[error("{0}")]
    Usage(String),
}

/// The `Result` of a conversion.
pub type Result<T> = std::result::Result<T, Error>;

/// Which record of an input failed: a WebDataset key or a row (record) number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordId {
    /// A WebDataset record's key.
    Key(String),
    /// A record's number in its file, from 0 (a Parquet or Arrow row, a TFRecord record).
    Row(u64),
}

/// A record that could not be converted while the writer ran: the writer's
/// [`beton_io::Error::Source`] holds it, so a front end can name the input and the record
/// without parsing the message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct RecordError {
    /// The input holding the record (its URL when it was fetched).
    pub input: String,
    /// The record.
    pub record: RecordId,
    /// The whole message, naming the input, the record and the field.
    pub message: String,
}

impl Error {
    /// The [`RecordError`] this error is about, if a record's conversion failed.
    pub fn record(&self) -> Option<&RecordError> {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(err) = next {
            if let Some(found) = err.downcast_ref::<RecordError>() {
                return Some(found);
            }
            next = err.source();
        }
        None
    }
}
