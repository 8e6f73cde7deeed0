//! `JSONField` (type id 5): `json.dumps(value)` plus a NUL byte in the data region; the
//! metadata is the packed `{ptr: u64, size: u64}`, `size` counting the NUL.

use std::borrow::Cow;

use extension_error::ExtensionError;

use super::{ExtentRule, FieldKind, put_u64, u64_at, wrong_value};
use crate::format::{FieldMetadata, FieldType};
use crate::json::JsonValue;
use crate::value::FieldValue;

/// The kind of [`FieldType::Json`].
#[derive(Debug, Clone, Copy)]
pub struct JsonKind;

impl JsonKind {
    /// The value of stored JSON bytes: the text up to the first NUL, parsed as Python's
    /// `json.loads` would; `Err` with the reason when it is not UTF-8 or does not parse.
    pub fn parse_stored(data: &[u8]) -> Result<JsonValue, String> {
        let text = data.split(|&b| b == 0).next().unwrap_or_default();
        let text =
            std::str::from_utf8(text).map_err(|e| format!("stored JSON is not UTF-8: {e}"))?;
        JsonValue::parse(text).map_err(|e| format!("stored JSON does not parse: {e}"))
    }
}

impl FieldKind for JsonKind {
    fn type_id(&self) -> u8 {
        5
    }
    fn class_name(&self) -> &'static str {
        "JSONField"
    }
    fn parse_arguments(&self, _: &[u8]) -> Result<FieldType, ExtensionError> {
        Ok(FieldType::Json)
    }
    fn metadata_layout(&self) -> (u64, u64) {
        (16, 1)
    }
    fn metadata(&self, metadata: &[u8]) -> FieldMetadata {
        FieldMetadata::Json {
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
        Ok(FieldValue::Json(JsonKind::parse_stored(
            data.unwrap_or_default(),
        )?))
    }
    fn payload<'v>(
        &self,
        _: &FieldType,
        value: &'v FieldValue,
    ) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        match value {
            FieldValue::Json(j) => {
                let mut text = j.to_python_json().into_bytes();
                text.push(0);
                Ok(Some(Cow::Owned(text)))
            }
            other => Err(wrong_value(other, self.class_name())),
        }
    }
    fn write_metadata(&self, _: &FieldValue, ptr: u64, len: u64, out: &mut [u8]) {
        put_u64(out, 0, ptr);
        put_u64(out, 8, len);
    }
}
