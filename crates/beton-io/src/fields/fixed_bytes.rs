//! `FixedBytesField` (type id 128, an ffcv-rs extension FFCV 1.0.2 cannot read): exactly
//! `len` bytes per sample in the data region (a hash, a fixed-length token sequence, an
//! embedding stored as bytes); the argument block holds `len` as a little-endian u64 and
//! the metadata is the u64 pointer alone, like an NDArray's.

use std::borrow::Cow;

use extension_error::ExtensionError;

use super::{ExtentRule, FieldKind, put_u64, stored, u64_at, wrong_value};
use crate::format::{ARGS_SIZE, FieldMetadata, FieldType};
use crate::json::JsonValue;
use crate::value::FieldValue;

/// The type id of [`FieldType::FixedBytes`]: in 128..=254, which FFCV does not use.
pub const FIXED_BYTES_TYPE_ID: u8 = 128;

/// The kind of [`FieldType::FixedBytes`].
#[derive(Debug, Clone, Copy)]
pub struct FixedBytesKind;

fn len_of(field_type: &FieldType) -> Result<u64, String> {
    match field_type {
        FieldType::FixedBytes(len) => Ok(*len),
        other => Err(format!("a {} has no fixed length", other.type_name())),
    }
}

impl FieldKind for FixedBytesKind {
    fn type_id(&self) -> u8 {
        FIXED_BYTES_TYPE_ID
    }
    fn class_name(&self) -> &'static str {
        "FixedBytesField"
    }
    fn parse_arguments(&self, args: &[u8]) -> Result<FieldType, ExtensionError> {
        let len = u64_at(args, 0).ok_or("argument block shorter than 8 bytes")?;
        if len == 0 {
            return Err("length 0 (a fixed-size byte field stores at least one byte)".into());
        }
        if args
            .get(8..)
            .is_some_and(|rest| rest.iter().any(|&b| b != 0))
        {
            return Err("bytes after the length are not zero".into());
        }
        Ok(FieldType::FixedBytes(len))
    }
    fn encode_arguments(&self, field_type: &FieldType) -> Result<[u8; ARGS_SIZE], ExtensionError> {
        let len = len_of(field_type)?;
        if len == 0 {
            return Err("length 0 (a fixed-size byte field stores at least one byte)".into());
        }
        let mut b = [0; ARGS_SIZE];
        put_u64(&mut b, 0, len);
        Ok(b)
    }
    fn describe_arguments(&self, field_type: &FieldType) -> Vec<(&'static str, JsonValue)> {
        len_of(field_type)
            .map(|len| vec![("len", JsonValue::Int(len.into()))])
            .unwrap_or_default()
    }
    fn metadata_layout(&self) -> (u64, u64) {
        (8, 8)
    }
    fn metadata(&self, metadata: &[u8]) -> FieldMetadata {
        FieldMetadata::FixedBytes {
            ptr: u64_at(metadata, 0).expect("8 metadata bytes"),
        }
    }
    fn extent_rule(&self, field_type: &FieldType) -> ExtentRule {
        ExtentRule::Fixed {
            len: len_of(field_type).unwrap_or(0),
        }
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
        field_type: &FieldType,
        value: &'v FieldValue,
    ) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        let FieldValue::Bytes(b) = value else {
            return Err(wrong_value(value, self.class_name()));
        };
        let want = len_of(field_type)?;
        if b.len() as u64 != want {
            return Err(format!("{} bytes for a FixedBytesField of {want} bytes", b.len()).into());
        }
        Ok(Some(Cow::Borrowed(b)))
    }
    fn write_metadata(&self, _: &FieldValue, ptr: u64, _: u64, out: &mut [u8]) {
        put_u64(out, 0, ptr);
    }
}
