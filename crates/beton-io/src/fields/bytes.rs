//! `BytesField` (type id 3): variable-length bytes in the data region; the metadata is the
//! packed `{ptr: u64, size: u64}`. FFCV writes zero arguments; an argument block opening
//! with `VAR_ARRAY_MAGIC` describes a `VarArrayField` instead (`var_array.rs`), one opening
//! with `IMAGE_MAGIC` an `ImageField` (`image.rs`).

use std::borrow::Cow;

use extension_error::ExtensionError;

use super::{ExtentRule, FieldKind, put_u64, stored, u64_at, wrong_value};
use crate::format::{FieldMetadata, FieldType};
use crate::value::FieldValue;

/// The kind of [`FieldType::Bytes`].
#[derive(Debug, Clone, Copy)]
pub struct BytesKind;

impl FieldKind for BytesKind {
    fn type_id(&self) -> u8 {
        3
    }
    fn class_name(&self) -> &'static str {
        "BytesField"
    }
    fn parse_arguments(&self, args: &[u8]) -> Result<FieldType, ExtensionError> {
        // FFCV ignores a BytesField's arguments, which is what lets a VarArrayField hide its
        // dtype and shape there; any other content is FFCV's and stays a BytesField.
        if crate::format::VarArrayArgs::is_tagged(args) {
            return super::var_array::VarArrayKind.parse_arguments(args);
        }
        if crate::format::ImageArgs::is_tagged(args) {
            return super::image::ImageKind.parse_arguments(args);
        }
        Ok(FieldType::Bytes)
    }
    fn metadata_layout(&self) -> (u64, u64) {
        (16, 1)
    }
    fn metadata(&self, metadata: &[u8]) -> FieldMetadata {
        FieldMetadata::Bytes {
            ptr: u64_at(metadata, 0).expect("16 metadata bytes"),
            size: u64_at(metadata, 8).expect("16 metadata bytes"),
        }
    }
    fn extent_rule(&self, _: &FieldType) -> ExtentRule {
        ExtentRule::Sized
    }
    fn read(
        &self,
        _: &FieldType,
        _: &[u8],
        data: Option<&[u8]>,
    ) -> Result<FieldValue, ExtensionError> {
        Ok(FieldValue::Bytes(stored(data)))
    }
    fn payload<'v>(
        &self,
        _: &FieldType,
        value: &'v FieldValue,
    ) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        match value {
            FieldValue::Bytes(b) => Ok(Some(Cow::Borrowed(b))),
            other => Err(wrong_value(other, self.class_name())),
        }
    }
    fn write_metadata(&self, _: &FieldValue, ptr: u64, len: u64, out: &mut [u8]) {
        put_u64(out, 0, ptr);
        put_u64(out, 8, len);
    }
}
