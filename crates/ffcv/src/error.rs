//! The facade's error type: the lower crates' errors, plus what the loader itself checks.

use std::path::PathBuf;

/// Everything that can go wrong while building a loader or running an epoch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening or reading the `.beton` file failed.
    #[error(transparent)]
    Format(#[from] beton_io::Error),

    /// The page cache failed (memory budget, page read, reader threads).
    #[error(transparent)]
    Cache(#[from] page_cache::Error),

    /// The order could not be built (rank out of range, QuasiRandom without data pages...).
    #[error("order: {0}")]
    Order(#[from] traversal::Error),

    /// A field's pipeline was refused when planned, compiled or run.
    #[error("{path}: field {field:?}: pipeline: {source}")]
    Pipeline {
        /// The dataset file.
        path: PathBuf,
        /// The field whose pipeline failed.
        field: String,
        /// What pipeline-jit reported.
        #[source]
        source: pipeline_jit::Error,
    },

    /// A sample could not be decoded; the epoch ends with this error.
    #[error("{path}: field {field:?}, sample {sample}: {decoder} failed: {message}")]
    Decode {
        /// The dataset file.
        path: PathBuf,
        /// The field.
        field: String,
        /// The sample id.
        sample: u64,
        /// The decoder's name.
        decoder: String,
        /// What went wrong.
        message: String,
        /// The decoder's error, when it carried a cause
        /// ([`crate::ExtensionError::with_source`]): this error's source, whose own source
        /// is that cause.
        #[source]
        cause: Option<Box<crate::ExtensionError>>,
    },

    /// The loader's configuration is invalid; `build()` refuses it.
    #[error("{path}: invalid loader configuration: {reason}")]
    Config {
        /// The dataset file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        reason: String,
        /// The error of the extension that refused the configuration (a decoder's
        /// `declare`), when it carried a cause: this error's source, whose own source is
        /// that cause (as [`Error::Decode`]'s).
        #[source]
        cause: Option<Box<crate::ExtensionError>>,
    },

    /// A field has no default decoder (custom fields) and was neither given a pipeline nor
    /// disabled.
    #[error(
        "{path}: field {field:?} ({field_type}) has no default decoder; give it one \
         (LoaderBuilder::pipeline, or `--decoder {field}=SPEC`) or disable it \
         (LoaderBuilder::disable, or `--decoder {field}=none`)"
    )]
    NoDecoder {
        /// The dataset file.
        path: PathBuf,
        /// The field.
        field: String,
        /// FFCV's name of the field's type.
        field_type: &'static str,
    },

    /// A batch output was asked for by a name or type it does not have.
    #[error("batch output {name:?}: {reason}")]
    Output {
        /// The output's name.
        name: String,
        /// What does not match.
        reason: String,
    },

    /// A JSON output's bytes are not a JSON document.
    #[error("JSON output {name:?}, row {row}: {reason}")]
    Json {
        /// The output's name.
        name: String,
        /// The row in the batch.
        row: usize,
        /// Why it does not parse.
        reason: String,
    },

    /// Allocating batch memory, or starting a thread, failed.
    #[error("{path}: cannot set up the loader ({what}): {source}")]
    Setup {
        /// The dataset file.
        path: PathBuf,
        /// What was being set up.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A stage after the CPU pipelines (such as a GPU copy) failed for a batch.
    #[error("{path}: slot stage failed on batch {batch}: {message}")]
    SlotStage {
        /// The dataset file.
        path: PathBuf,
        /// The batch index in the epoch.
        batch: usize,
        /// What the stage reported.
        message: String,
        /// The stage's error, when it carried a cause (as [`Error::Decode`]'s).
        #[source]
        cause: Option<Box<crate::ExtensionError>>,
    },

    /// The producer thread ended without reporting an error of its own (it panicked).
    #[error("{path}: the loader's producer thread stopped unexpectedly in epoch {epoch}: {cause}")]
    ProducerGone {
        /// The dataset file.
        path: PathBuf,
        /// The epoch.
        epoch: u64,
        /// Why: the producer's panic message.
        cause: String,
    },

    /// The file's size is not what it was when the loader opened it: it was truncated or
    /// rewritten in place, and reading its memory map past the new end would kill the
    /// process with SIGBUS. Checked at each epoch start; see `docs/troubleshooting.md`.
    #[error(
        "{path}: the file is now {now} bytes but was {opened} bytes when the loader opened it; \
         it was truncated or rewritten in place: rebuild the loader once the file is complete"
    )]
    FileSizeChanged {
        /// The dataset file.
        path: PathBuf,
        /// Its size when opened.
        opened: u64,
        /// Its size now.
        now: u64,
    },

    /// A loader state could not be read ([`crate::LoaderState::from_json`]).
    #[error("loader state: {reason}")]
    State {
        /// What is wrong with it.
        reason: String,
    },

    /// A loader state does not fit the loader it was given to
    /// ([`crate::LoaderBuilder::resume`]): another file, order, seed, batching or indices.
    #[error("{path}: cannot resume from this loader state: {reason}")]
    Resume {
        /// The dataset file.
        path: PathBuf,
        /// What does not match, with both values.
        reason: String,
    },
}

/// `Result` with the facade's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// `e`'s message followed by each of its sources' messages (`: ` between) that the text
/// does not already hold: how the front ends report an error in one message, the causes
/// a user's decoder or field handler gave included (the CLI's `ffcv: error:` line, the
/// Python exceptions).
///
/// ```
/// let cause = std::io::Error::new(std::io::ErrorKind::NotFound, "labels.csv");
/// let e = ffcv::ExtensionError::with_source("cannot look up the label", cause);
/// assert_eq!(ffcv::message_with_causes(&e), "cannot look up the label: labels.csv");
/// ```
pub fn message_with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// An extension's error as the loader reports it: its message, and the error itself when
/// it carries a cause (kept as the report's source; without one the message says it all).
pub(crate) fn extension_parts(
    e: crate::ExtensionError,
) -> (String, Option<Box<crate::ExtensionError>>) {
    let message = e.message().to_owned();
    let cause = std::error::Error::source(&e).is_some().then(|| Box::new(e));
    (message, cause)
}
