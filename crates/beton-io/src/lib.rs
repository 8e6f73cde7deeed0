//! Read and write FFCV `.beton` files (format version 2, byte-compatible with FFCV 1.0.2).
//!
//! # Overview
//!
//! - [`Reader`] maps a file read-only, validates its whole structure in [`Reader::open`] and
//!   then hands out zero-copy views: the [`Header`], the [`Layout`] of its regions, the
//!   [`Field`]s with their [`FieldType`]s, typed per-sample [`FieldMetadata`], the bytes of an
//!   allocation ([`Reader::data_at`]) or of a field ([`Reader::field_data`]), and the
//!   [`PageMap`] (page → samples, sample → pages).
//! - [`DType`] and [`NdArrayArgs`] describe NDArray/TorchTensor fields the way numpy does.
//! - Every failure is an [`Error`] naming the file and the place in it.
//!
//! The format itself, with the quirks FFCV 1.0.2 files exhibit, is described in
//! `docs/format.md` at the root of the repository.
//!
//! # Example
//!
//! ```
//! use beton_io::{FieldMetadata, Reader};
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/ffcv-1.0.2/json.beton");
//! let reader = Reader::open(path)?;
//! assert_eq!(reader.num_samples(), 20);
//! let meta = reader.field_index("meta").unwrap();
//! let FieldMetadata::Json { size, .. } = reader.metadata(0, meta)? else { unreachable!() };
//! let text = reader.field_data(0, meta)?.unwrap();
//! assert_eq!(text.len() as u64, size);
//! assert!(text.starts_with(br#"{"i": 0, "name": "item-0""#));
//! assert_eq!(reader.page_map().samples_of_page(1).len(), 20);
//! # Ok::<(), beton_io::Error>(())
//! ```

pub mod corrupt;
mod dtype;
mod error;
mod format;
mod json;
mod mapping;
mod page_map;
mod reader;
mod writer;

pub use dtype::{ByteOrder, DType, DTypeKind};
pub use error::{Error, Result, SourceError};
pub use format::{
    ALLOC_ROW_SIZE, ARGS_SIZE, FIELD_DESC_SIZE, FieldMetadata, FieldType, HEADER_SIZE, Header,
    IMAGE_MODE_JPEG, IMAGE_MODE_RAW, Layout, MAX_PAGE_SIZE, MIN_PAGE_SIZE, NAME_SIZE, NdArrayArgs,
    VERSION,
};
pub use json::{JsonValue, python_float_repr};
pub use page_map::PageMap;
pub use reader::{AllocRow, CustomField, Field, Reader, ReaderOptions};
pub use writer::{
    DEFAULT_PAGE_SIZE, DatasetWriter, FieldSpec, FieldValue, FnSource, RgbImage, SampleSource,
    WriteSummary, from_fn,
};
