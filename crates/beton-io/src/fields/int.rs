//! `IntField` (type id 1): an int64 scalar kept in the metadata.

use std::borrow::Cow;

use extension_error::ExtensionError;

use super::{ExtentRule, FieldKind, put_u64, u64_at, wrong_value};
use crate::format::{FieldMetadata, FieldType};
use crate::value::FieldValue;

/// The kind of [`FieldType::Int`].
#[derive(Debug, Clone, Copy)]
pub struct IntKind;

impl IntKind {
    /// The value in an Int field's metadata bytes (`None` when shorter than 8 bytes).
    pub fn value(metadata: &[u8]) -> Option<i64> {
        u64_at(metadata, 0).map(|x| x as i64)
    }
}

impl FieldKind for IntKind {
    fn type_id(&self) -> u8 {
        1
    }
    fn class_name(&self) -> &'static str {
        "IntField"
    }
    fn parse_arguments(&self, _: &[u8]) -> Result<FieldType, ExtensionError> {
        Ok(FieldType::Int)
    }
    fn metadata_layout(&self) -> (u64, u64) {
        (8, 8)
    }
    fn metadata(&self, metadata: &[u8]) -> FieldMetadata {
        FieldMetadata::Int(IntKind::value(metadata).expect("8 metadata bytes"))
    }
    fn extent_rule(&self, _: &FieldType) -> ExtentRule {
        ExtentRule::None
    }
    fn read(
        &self,
        _: &FieldType,
        metadata: &[u8],
        _: Option<&[u8]>,
    ) -> Result<FieldValue, ExtensionError> {
        IntKind::value(metadata)
            .map(FieldValue::Int)
            .ok_or_else(|| "metadata too short for an IntField".into())
    }
    fn payload<'v>(
        &self,
        _: &FieldType,
        value: &'v FieldValue,
    ) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        match value {
            FieldValue::Int(_) => Ok(None),
            other => Err(wrong_value(other, self.class_name())),
        }
    }
    fn write_metadata(&self, value: &FieldValue, _: u64, _: u64, out: &mut [u8]) {
        if let FieldValue::Int(x) = value {
            put_u64(out, 0, *x as u64);
        }
    }
}
