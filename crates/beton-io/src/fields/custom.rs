//! User-defined field types: FFCV's custom `Field` subclasses, read through its
//! `Reader(custom_handlers={name: Class})` and written with type id 255.
//!
//! A [`CustomHandler`] is registered per field name, for reading with
//! [`crate::ReaderOptions::custom_handler`] and for writing with [`crate::FieldSpec::custom`].
//! It plays the part of FFCV's `Field`: `metadata_type` ([`CustomHandler::metadata_layout`]),
//! `from_binary`/`to_binary` ([`CustomHandler::accept_arguments`],
//! [`CustomHandler::arguments`]) and `encode` ([`CustomHandler::payload`] then
//! [`CustomHandler::write_metadata`], the writer's page allocator in between); reading adds
//! where the stored bytes are ([`CustomHandler::extent`]) and the value
//! ([`CustomHandler::read`]). A value is opaque bytes ([`crate::FieldValue::Custom`]) whose
//! meaning the handler defines.
//!
//! A handler fails with an [`ExtensionError`]: a message, and the error behind it when
//! there is one (a file the handler reads, a codec it calls). The reader's and writer's
//! [`crate::Error`] (`InvalidFieldArguments`, `InvalidMetadata`, `InvalidValue`) name the
//! file, field and sample, with the message as their `reason` and the handler's error as
//! their source when it carries a cause. A `String` converts into it, so
//! `Err(format!(...).into())` works.

use std::borrow::Cow;

use extension_error::ExtensionError;

use super::{Extent, ExtentRule};
use crate::format::ARGS_SIZE;

/// The type id the writer gives custom fields (FFCV's readers need a handler for them).
pub const CUSTOM_TYPE_ID: u8 = 255;

/// A user-defined field type (see the module documentation).
pub trait CustomHandler: Send + Sync + std::fmt::Debug {
    /// A name for messages (FFCV's class name).
    fn class_name(&self) -> &str {
        "CustomField"
    }

    /// `(itemsize, alignment)` of the field's metadata in a row (numpy `metadata_type`:
    /// alignment 1 for a struct built without `align=True`, the item size for a scalar).
    fn metadata_layout(&self) -> (u64, u64);

    /// Checks the field's 1024-byte argument block when a file is opened (FFCV's
    /// `from_binary`); the default accepts any.
    fn accept_arguments(&self, arguments: &[u8]) -> Result<(), ExtensionError> {
        let _ = arguments;
        Ok(())
    }

    /// The argument block the writer stores (FFCV's `to_binary`); zeros by default.
    fn arguments(&self) -> [u8; ARGS_SIZE] {
        [0; ARGS_SIZE]
    }

    /// Where the stored bytes are for every sample; `None` (nothing stored) by default.
    /// `Fixed` and `Sized` let the loader find them without a call per sample.
    fn extent_rule(&self) -> ExtentRule {
        ExtentRule::None
    }

    /// The stored bytes of one sample from its metadata bytes, or why they are invalid.
    /// The default applies [`CustomHandler::extent_rule`]; override it for `Computed`.
    /// The reader checks at open that the extent lies in an allocation.
    fn extent(&self, metadata: &[u8]) -> Result<Option<Extent>, ExtensionError> {
        Ok(self.extent_rule().apply(metadata))
    }

    /// The value of one sample, from its metadata bytes and stored bytes.
    fn read(&self, metadata: &[u8], data: Option<&[u8]>) -> Result<Vec<u8>, ExtensionError> {
        let _ = (metadata, data);
        Err(format!("the {} handler does not read values", self.class_name()).into())
    }

    /// The bytes `value` stores in a page (`None`: nothing), or why it cannot be written.
    fn payload<'v>(&self, value: &'v [u8]) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        let _ = value;
        Err(format!("the {} handler does not write values", self.class_name()).into())
    }

    /// Writes `value`'s metadata into `out` (exactly the layout's itemsize), given where its
    /// payload was placed (`ptr`, `len`; 0 and 0 without one).
    fn write_metadata(
        &self,
        value: &[u8],
        ptr: u64,
        len: u64,
        out: &mut [u8],
    ) -> Result<(), ExtensionError> {
        let _ = (value, ptr, len, out);
        Err(format!("the {} handler does not write values", self.class_name()).into())
    }
}

/// The metadata layout alone of a custom field ([`crate::ReaderOptions::custom_field`]):
/// enough to open a file and read the field's metadata bytes, not its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CustomField {
    /// Bytes of the field's metadata in a row (numpy `metadata_type.itemsize`).
    pub metadata_itemsize: u64,
    /// Alignment of the field's metadata (numpy `metadata_type.alignment`: 1 for a struct
    /// built without `align=True`, the item size for a scalar).
    pub metadata_alignment: u64,
}

impl CustomHandler for CustomField {
    fn metadata_layout(&self) -> (u64, u64) {
        (self.metadata_itemsize, self.metadata_alignment)
    }
}
