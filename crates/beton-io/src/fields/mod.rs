//! Field types, one module each: everything beton-io knows about a type sits in its module
//! behind the [`FieldKind`] trait (type id, FFCV class name, argument block, metadata layout,
//! where a sample's stored bytes are, its typed value, how a value is written).
//!
//! The reader, the writer and [`crate::FieldType`]'s methods only dispatch through
//! [`FieldType::kind`]; nothing else interprets metadata bytes. User-defined field types
//! (FFCV's custom `Field` subclasses, type id 255) implement [`CustomHandler`] instead and
//! are registered per field name ([`crate::ReaderOptions::custom_handler`],
//! [`crate::FieldSpec::custom`]).
//!
//! The trait and the extents it describes live in `kind.rs`, below the kinds (which
//! import them through this module's re-exports); this module is the table above them:
//! [`BUILTIN`], [`kind_by_id`], and `FieldType`'s methods that dispatch to a kind.
//!
//! Adding a built-in type: a module here implementing [`FieldKind`], a [`FieldType`]
//! variant with its arm in [`FieldType::kind`], a [`FieldMetadata`] variant, and its entry
//! in [`BUILTIN`].

use crate::format::{FieldMetadata, FieldType};

pub mod bytes;
pub mod custom;
pub mod fixed_bytes;
pub mod float;
pub mod image;
pub mod int;
pub mod json;
mod kind;
pub mod ndarray;
pub mod rgb_image;
pub mod var_array;

pub use custom::{CustomField, CustomHandler};
pub use kind::{Extent, ExtentRule, FieldKind, StoredLen, u64_at};
pub(crate) use kind::{put_u64, stored, wrong_value};

/// Every built-in kind, looked up by type id when a file is opened. `VarArrayField` is not
/// here: it shares type id 3 with `BytesField`, whose kind parses its tagged arguments.
pub(crate) static BUILTIN: [&dyn FieldKind; 8] = [
    &float::FloatKind,
    &int::IntKind,
    &rgb_image::RgbImageKind,
    &bytes::BytesKind,
    &ndarray::NDARRAY,
    &json::JsonKind,
    &ndarray::TORCH_TENSOR,
    &fixed_bytes::FixedBytesKind,
];

/// The built-in kind with FFCV type id `type_id`, if any (255, custom, has none).
pub fn kind_by_id(type_id: u8) -> Option<&'static dyn FieldKind> {
    BUILTIN.iter().copied().find(|k| k.type_id() == type_id)
}

// The methods of `FieldType` and `FieldMetadata` that dispatch to the kinds: here, above
// the kinds, so that `format.rs` (which the kinds build on) does not depend on them.
impl FieldType {
    /// The module that knows this type; `None` for custom fields, whose handler is
    /// registered per field ([`crate::Reader::custom_handler`]).
    pub fn kind(&self) -> Option<&'static dyn FieldKind> {
        Some(match self {
            FieldType::Float => &float::FloatKind,
            FieldType::Int => &int::IntKind,
            FieldType::RgbImage => &rgb_image::RgbImageKind,
            FieldType::Bytes => &bytes::BytesKind,
            FieldType::NdArray(_) => &ndarray::NDARRAY,
            FieldType::Json => &json::JsonKind,
            FieldType::TorchTensor(_) => &ndarray::TORCH_TENSOR,
            FieldType::FixedBytes(_) => &fixed_bytes::FixedBytesKind,
            FieldType::VarArray(_) => &var_array::VarArrayKind,
            FieldType::Image(_) => &image::ImageKind,
            FieldType::Custom => return None,
        })
    }

    /// FFCV's type id.
    pub fn type_id(&self) -> u8 {
        self.kind().map_or(custom::CUSTOM_TYPE_ID, |k| k.type_id())
    }

    /// FFCV's class name (`"IntField"`, ...).
    pub fn type_name(&self) -> &'static str {
        self.kind().map_or("CustomField", |k| k.class_name())
    }

    /// `(itemsize, alignment)` of this field's metadata as numpy lays it out. `None` for custom
    /// fields, whose layout comes from the registered handler.
    ///
    /// The Bytes/JSON `{ptr, size}` and RGBImage `{mode, width, height, data_ptr}` structs are
    /// numpy structs built without `align=True`: packed, with alignment 1.
    pub fn metadata_layout(&self) -> Option<(u64, u64)> {
        self.kind().map(|k| k.metadata_layout())
    }

    /// Where a sample's stored bytes are ([`ExtentRule::None`] for custom fields: their
    /// handler's rule is [`crate::Reader::extent_rule`]'s).
    pub fn extent_rule(&self) -> ExtentRule {
        self.kind()
            .map_or(ExtentRule::None, |k| k.extent_rule(self))
    }

    /// Whether the value is the metadata itself (Int, Float): a built-in type that stores
    /// nothing in the data region.
    pub fn value_in_metadata(&self) -> bool {
        // A built-in type that stores nothing keeps its value in the metadata.
        self.kind()
            .is_some_and(|k| k.extent_rule(self) == ExtentRule::None)
    }

    /// The arguments as named values (`dtype`, `shape`, ...), for printing.
    pub fn describe_arguments(&self) -> Vec<(&'static str, crate::JsonValue)> {
        self.kind()
            .map(|k| k.describe_arguments(self))
            .unwrap_or_default()
    }
}

impl FieldMetadata {
    /// Decodes `bytes` (exactly the field's metadata bytes) as `field_type`.
    pub(crate) fn decode(field_type: &FieldType, b: &[u8]) -> FieldMetadata {
        field_type
            .kind()
            .map_or(FieldMetadata::Custom, |k| k.metadata(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_kind_is_found_by_its_id_and_ids_are_distinct() {
        for kind in BUILTIN {
            let found = kind_by_id(kind.type_id()).unwrap();
            assert_eq!(found.class_name(), kind.class_name());
        }
        assert!(kind_by_id(255).is_none());
        assert!(kind_by_id(7).is_none());
        assert_eq!(kind_by_id(128).unwrap().class_name(), "FixedBytesField");
    }
}
