//! The error type of beton-io: one enum whose variants name the file and the place in it.

use std::path::PathBuf;

use extension_error::ExtensionError;

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// The boxed error a [`crate::SampleSource`] may return.
pub type SourceError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A field handler's error as the reader and writer report it: its message (the variant's
/// `reason`) and the error itself when it carries a cause, kept as the variant's source
/// (without one the message says it all).
pub(crate) fn handler_parts(e: ExtensionError) -> (String, Option<Box<ExtensionError>>) {
    let message = e.message().to_owned();
    let cause = e.has_source().then(|| Box::new(e));
    (message, cause)
}

/// Everything that can go wrong while reading or writing a `.beton` file.
///
/// Every variant names the file and, where it applies, the field, sample, page, row or byte
/// offset, so that the message alone tells a user what is wrong and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    #[error("{path}: cannot {op}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done ("open", "map", "write page 3", ...).
        op: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// Bytes asked of a reader opened from byte ranges (a remote object) that it does not
    /// hold: only the header, descriptors, metadata and allocation table are read at open.
    #[error(
        "{path}: bytes {start}..{end} are not in memory: this reader was opened from byte \
         ranges (a remote object), so sample data is read through the page cache"
    )]
    NotInMemory {
        /// The file (or URL).
        path: PathBuf,
        /// First byte asked for.
        start: u64,
        /// End of the range asked for.
        end: u64,
    },

    /// Two shards of a dataset read as one ([`crate::Reader::concat`]) do not have the same
    /// fields or page size.
    #[error(
        "{other}: {what} differs from {first}: {reason}; shards read as one dataset need \
         the same fields (names, types, arguments, order) and page size"
    )]
    ShardMismatch {
        /// The first shard, whose fields the others must have.
        first: PathBuf,
        /// The shard that differs.
        other: PathBuf,
        /// What differs: `field "NAME"` or `the page size`.
        what: String,
        /// How it differs.
        reason: String,
    },

    /// A set of shards that cannot be read as one dataset (none, too large, a field whose
    /// data pointers cannot be moved).
    #[error("{path}: cannot read these shards as one dataset: {reason}")]
    InvalidShards {
        /// The name of the set (its first shard, or the pattern).
        path: PathBuf,
        /// Why.
        reason: String,
    },

    /// A structure of the file extends past its end (or is cut short).
    #[error(
        "{path}: truncated: {what} needs bytes {start}..{end} but the file has {file_size} bytes"
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Which structure ("header", "field descriptors", "metadata", ...).
        what: String,
        /// Where the structure starts.
        start: u64,
        /// Where it ends (exclusive); `u64::MAX` when the end overflowed.
        end: u64,
        /// The size of the file.
        file_size: u64,
    },

    /// The header's version is not 2, the only version FFCV 1.0.2 writes.
    #[error("{path}: unsupported .beton version {version} at byte 0 (only version 2 is supported)")]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        version: u16,
    },

    /// The header declares no fields.
    #[error("{path}: header declares 0 fields (num_fields at byte 2); a .beton needs at least one")]
    NoFields {
        /// The file.
        path: PathBuf,
    },

    /// The page size is 0 or not a power of two (reader), or outside FFCV's range (writer).
    #[error("{path}: invalid page size {page_size}: {reason}")]
    InvalidPageSize {
        /// The file.
        path: PathBuf,
        /// The page size found or requested.
        page_size: u64,
        /// Why it is rejected.
        reason: String,
    },

    /// A size or offset computed from header numbers overflows 64 bits.
    #[error("{path}: {what} overflows 64 bits ({detail})")]
    Overflow {
        /// The file.
        path: PathBuf,
        /// The quantity that overflows ("metadata size", ...).
        what: String,
        /// The numbers involved.
        detail: String,
    },

    /// The allocation table pointer is not where a table can be.
    #[error("{path}: alloc_table_ptr {alloc_table_ptr} (header byte 16) is invalid: {reason}")]
    InvalidAllocTable {
        /// The file.
        path: PathBuf,
        /// The pointer from the header.
        alloc_table_ptr: u64,
        /// Why it is rejected.
        reason: String,
    },

    /// An allocation-table row is out of bounds or otherwise invalid.
    #[error(
        "{path}: allocation table row {row} at byte {offset} (sample_id {sample_id}, ptr {ptr}, size {size}): {reason}"
    )]
    InvalidAllocRow {
        /// The file.
        path: PathBuf,
        /// Row index in the table.
        row: u64,
        /// Byte offset of the row in the file.
        offset: u64,
        /// The row's sample id.
        sample_id: u64,
        /// The row's pointer.
        ptr: u64,
        /// The row's size.
        size: u64,
        /// Why it is rejected.
        reason: String,
    },

    /// A field descriptor has a type id that is neither 0..=6 nor 255.
    #[error("{path}: field {index} (descriptor at byte {offset}) has unknown type id {type_id}")]
    UnknownTypeId {
        /// The file.
        path: PathBuf,
        /// Field index.
        index: usize,
        /// Byte offset of the descriptor.
        offset: u64,
        /// The type id found.
        type_id: u8,
    },

    /// A field name is not ASCII, or is used twice.
    #[error("{path}: field {index} (name at byte {offset}): invalid name {name:?}: {reason}")]
    InvalidFieldName {
        /// The file (or the output file for the writer).
        path: PathBuf,
        /// Field index.
        index: usize,
        /// Byte offset of the name in the file (0 for the writer).
        offset: u64,
        /// The name, lossily decoded.
        name: String,
        /// Why it is rejected.
        reason: String,
    },

    /// The 1024-byte argument block of a field (NDArray/TorchTensor) is malformed.
    #[error("{path}: field {index} {name:?} (arguments at byte {offset}): {reason}")]
    InvalidFieldArguments {
        /// The file.
        path: PathBuf,
        /// Field index.
        index: usize,
        /// Field name.
        name: String,
        /// Byte offset of the argument block.
        offset: u64,
        /// What is wrong.
        reason: String,
        /// The field handler's error, when it carried a cause
        /// ([`ExtensionError::with_source`]): this error's source, whose own source is that
        /// cause.
        #[source]
        cause: Option<Box<ExtensionError>>,
    },

    /// A custom field (type id 255) was found but no handler for it was registered.
    #[error(
        "{path}: field {index} {name:?} is a custom field (type id 255); register its metadata layout with ReaderOptions::custom_field"
    )]
    MissingCustomHandler {
        /// The file.
        path: PathBuf,
        /// Field index.
        index: usize,
        /// Field name.
        name: String,
    },

    /// A sample's metadata is inconsistent with the rest of the file.
    #[error("{path}: sample {sample}, field {field:?} (metadata at byte {offset}): {reason}")]
    InvalidMetadata {
        /// The file.
        path: PathBuf,
        /// Sample index.
        sample: u64,
        /// Field name.
        field: String,
        /// Byte offset of the field's metadata in the file.
        offset: u64,
        /// What is wrong.
        reason: String,
        /// The field handler's error, when it carried a cause
        /// ([`ExtensionError::with_source`]): this error's source, whose own source is that
        /// cause.
        #[source]
        cause: Option<Box<ExtensionError>>,
    },

    /// A sample index past the end of the dataset was requested.
    #[error("{path}: sample {sample} out of range (the file has {num_samples} samples)")]
    SampleOutOfRange {
        /// The file.
        path: PathBuf,
        /// The requested sample.
        sample: u64,
        /// Number of samples in the file.
        num_samples: u64,
    },

    /// A field index past the last field was requested.
    #[error("{path}: field index {field} out of range (the file has {num_fields} fields)")]
    FieldOutOfRange {
        /// The file.
        path: PathBuf,
        /// The requested field index.
        field: usize,
        /// Number of fields.
        num_fields: usize,
    },

    /// No allocation-table row starts at the requested pointer.
    #[error("{path}: no allocation starts at byte {ptr}")]
    NoAllocation {
        /// The file.
        path: PathBuf,
        /// The pointer.
        ptr: u64,
    },

    /// The writer was configured with something FFCV cannot represent.
    #[error("{path}: invalid writer configuration: {reason}")]
    InvalidConfig {
        /// The output file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// A sample's value does not match its field (wrong kind, wrong length, out of range).
    #[error("{path}: sample {sample}, field {field:?}: {reason}")]
    InvalidValue {
        /// The output file.
        path: PathBuf,
        /// Sample index.
        sample: u64,
        /// Field name.
        field: String,
        /// What is wrong.
        reason: String,
        /// The field handler's error, when it carried a cause
        /// ([`ExtensionError::with_source`]): this error's source, whose own source is that
        /// cause.
        #[source]
        cause: Option<Box<ExtensionError>>,
    },

    /// A sample needs more space than one page holds.
    #[error(
        "{path}: sample {sample}, field {field:?}: {size} bytes do not fit in a page of {page_size} bytes; use page_size >= {page_size_that_fits}"
    )]
    SampleTooLarge {
        /// The output file.
        path: PathBuf,
        /// Sample index.
        sample: u64,
        /// The field whose allocation failed.
        field: String,
        /// Bytes needed: the allocation alone, or the whole sample when the sample's
        /// allocations together exceed a page.
        size: u64,
        /// The configured page size.
        page_size: u64,
        /// The smallest valid page size that would hold it.
        page_size_that_fits: u64,
    },

    /// One shard of a sharded write ([`crate::DatasetWriter::write_shards`]) failed; the
    /// inner error names the shard's file and counts samples within that file.
    #[error("{source} (shard {shard} of {num_shards}: samples {start}..{end} of the source)")]
    Shard {
        /// The shard's index, from 0.
        shard: u64,
        /// How many shards the write had.
        num_shards: u64,
        /// The source's first sample in this shard.
        start: u64,
        /// One past the source's last sample in this shard.
        end: u64,
        /// What went wrong in the shard.
        #[source]
        source: Box<Error>,
    },

    /// The sample source failed to produce a sample.
    #[error("{path}: sample source failed at sample {sample}: {source}")]
    Source {
        /// The output file.
        path: PathBuf,
        /// Sample index.
        sample: u64,
        /// The source's error.
        #[source]
        source: SourceError,
    },
}
