//! Read and write FFCV `.beton` files (format version 2, byte-compatible with FFCV 1.0.2).
//!
//! # Overview
//!
//! - [`Reader`] maps a file read-only (or, with [`Reader::open_ranges`], reads only the
//!   structure of a file served by byte ranges, such as an object in a store), validates its whole structure in [`Reader::open`] and
//!   then hands out zero-copy views: the [`Header`], the [`Layout`] of its regions, the
//!   [`Field`]s with their [`FieldType`]s, typed per-sample [`FieldMetadata`], the bytes of an
//!   allocation ([`Reader::data_at`]) or of a field ([`Reader::field_data`]), and the
//!   [`PageMap`] (page → samples, sample → pages).
//! - [`DatasetWriter`] writes [`FieldSpec`]s and the [`FieldValue`]s of any [`SampleSource`]
//!   on several threads with FFCV's page allocation rules; with one thread its output is
//!   byte-identical to FFCV's. [`DatasetWriter::write_shards`] writes one source as N
//!   files in parallel, contiguous blocks named by [`shard_path`].
//! - [`fields`] holds one module per field type behind [`FieldKind`] (type id, metadata
//!   layout, stored extent, typed value, encoding); [`CustomHandler`] does the same for a
//!   user's field type (FFCV's custom `Field` subclasses), registered per field name.
//!   Both fail with an [`ExtensionError`] (a message, and a cause the reader's or writer's
//!   [`Error`] keeps as its source).
//! - [`NumpyDtype`] and [`NdArrayArgs`] describe NDArray/TorchTensor fields the way numpy does;
//!   [`JsonValue`] is a JSON value encoded exactly like Python's `json.dumps`.
//! - Every failure is an [`Error`] naming the file and the place in it (the workspace's
//!   dev-only `ffcv-testkit` crate generates damaged files to test exactly that).
//!
//! The format itself, with the quirks FFCV 1.0.2 files exhibit, is described in
//! `docs/format.md` at the root of the repository.
//!
//! # Example
//!
//! ```
//! use beton_io::{DatasetWriter, FieldMetadata, FieldSpec, FieldType, FieldValue, Reader};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("tiny.beton");
//! let fields = vec![
//!     FieldSpec::new("label", FieldType::Int),
//!     FieldSpec::new("blob", FieldType::Bytes),
//! ];
//! let samples: Vec<Vec<FieldValue>> = (0..10)
//!     .map(|i| vec![FieldValue::Int(i), FieldValue::Bytes(vec![i as u8; i as usize * 100])])
//!     .collect();
//! DatasetWriter::new(&path, fields)?.with_num_workers(2).write(&samples)?;
//!
//! let reader = Reader::open(&path)?;
//! assert_eq!(reader.num_samples(), 10);
//! let blob = reader.field_index("blob").unwrap();
//! assert_eq!(reader.metadata(7, 0)?, FieldMetadata::Int(7));
//! assert_eq!(reader.field_data(7, blob)?.unwrap(), &[7u8; 700][..]);
//! assert_eq!(reader.page_map().pages_of_sample(7).len(), 1);
//! # Ok::<(), beton_io::Error>(())
//! ```

mod concat;
mod dtype;
mod error;
pub mod fields;
mod format;
mod json;
mod mapping;
mod page_map;
mod ranged;
mod reader;
mod shards;
mod source;
mod value;
mod writer;

pub use concat::{SHARD_ALIGN, ShardSpan};
pub use dtype::{ByteOrder, NumpyDtype, NumpyKind};
pub use error::{Error, Result, SourceError};
/// The error of the field handlers ([`FieldKind`], [`CustomHandler`]): a message and an
/// optional cause, the same type as `pipeline_jit::ExtensionError`.
pub use extension_error::ExtensionError;
pub use fields::{CustomField, CustomHandler, Extent, ExtentRule, FieldKind, StoredLen};
pub use format::{
    ALLOC_ROW_SIZE, ARGS_SIZE, FIELD_DESC_SIZE, FieldMetadata, FieldType, HEADER_SIZE, Header,
    IMAGE_MODE_JPEG, IMAGE_MODE_RAW, ImageArgs, Layout, MAX_DIMS, MAX_PAGE_SIZE, MIN_PAGE_SIZE,
    MIN_READ_PAGE_SIZE, NAME_SIZE, NDARRAY_ARGS_HEADER, NdArrayArgs, VERSION, VarArrayArgs,
};
pub use json::{JsonValue, python_float_repr};
pub use page_map::PageMap;
pub use ranged::ReadRange;
pub use reader::{AllocRow, Field, Reader, ReaderOptions};
pub use shards::{ShardWritten, shard_path, shard_ranges};
pub use source::{FnSource, SampleSource, from_fn};
pub use value::{FieldValue, RgbImage};
pub use writer::{DEFAULT_PAGE_SIZE, DatasetWriter, FieldSpec, WriteSummary};
