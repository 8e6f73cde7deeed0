//! `FloatField` (type id 0): a float64 scalar kept in the metadata.

use std::borrow::Cow;

use extension_error::ExtensionError;

use super::{ExtentRule, FieldKind, put_u64, u64_at, wrong_value};
use crate::format::{FieldMetadata, FieldType};
use crate::value::FieldValue;

/// The kind of [`FieldType::Float`].
#[derive(Debug, Clone, Copy)]
pub struct FloatKind;

impl FloatKind {
    /// The value in a Float field's metadata bytes (`None` when shorter than 8 bytes).
    pub fn value(metadata: &[u8]) -> Option<f64> {
        u64_at(metadata, 0).map(f64::from_bits)
    }
}

impl FieldKind for FloatKind {
    fn type_id(&self) -> u8 {
        0
    }
    fn class_name(&self) -> &'static str {
        "FloatField"
    }
    fn parse_arguments(&self, _: &[u8]) -> Result<FieldType, ExtensionError> {
        Ok(FieldType::Float)
    }
    fn metadata_layout(&self) -> (u64, u64) {
        (8, 8)
    }
    fn metadata(&self, metadata: &[u8]) -> FieldMetadata {
        FieldMetadata::Float(FloatKind::value(metadata).expect("8 metadata bytes"))
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
        FloatKind::value(metadata)
            .map(FieldValue::Float)
            .ok_or_else(|| "metadata too short for a FloatField".into())
    }
    fn payload<'v>(
        &self,
        _: &FieldType,
        value: &'v FieldValue,
    ) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        match value {
            FieldValue::Float(_) => Ok(None),
            other => Err(wrong_value(other, self.class_name())),
        }
    }
    fn write_metadata(&self, value: &FieldValue, _: u64, _: u64, out: &mut [u8]) {
        if let FieldValue::Float(x) = value {
            put_u64(out, 0, x.to_bits());
        }
    }
}
