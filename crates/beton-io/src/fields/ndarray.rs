//! `NDArrayField` (type id 4) and `TorchTensorField` (type id 6): a fixed-shape array in the
//! data region, dtype and shape in the argument block ([`NdArrayArgs`]); the metadata is the
//! u64 pointer alone. The two are stored identically and differ only in type id and name.

use std::borrow::Cow;

use extension_error::ExtensionError;

use super::{ExtentRule, FieldKind, put_u64, stored, u64_at, wrong_value};
use crate::format::{ARGS_SIZE, FieldMetadata, FieldType, NdArrayArgs};
use crate::json::JsonValue;
use crate::value::FieldValue;

/// The kind of [`FieldType::NdArray`] (`torch == false`) and [`FieldType::TorchTensor`].
#[derive(Debug, Clone, Copy)]
pub struct NdArrayKind {
    torch: bool,
}

/// The NDArray kind.
pub(crate) static NDARRAY: NdArrayKind = NdArrayKind { torch: false };
/// The TorchTensor kind.
pub(crate) static TORCH_TENSOR: NdArrayKind = NdArrayKind { torch: true };

fn args(field_type: &FieldType) -> Result<&NdArrayArgs, String> {
    field_type
        .ndarray_args()
        .ok_or_else(|| format!("a {} has no array arguments", field_type.type_name()))
}

impl FieldKind for NdArrayKind {
    fn type_id(&self) -> u8 {
        if self.torch { 6 } else { 4 }
    }
    fn class_name(&self) -> &'static str {
        if self.torch {
            "TorchTensorField"
        } else {
            "NDArrayField"
        }
    }
    fn parse_arguments(&self, block: &[u8]) -> Result<FieldType, ExtensionError> {
        let a = NdArrayArgs::decode(block)?;
        Ok(if self.torch {
            FieldType::TorchTensor(a)
        } else {
            FieldType::NdArray(a)
        })
    }
    fn encode_arguments(&self, field_type: &FieldType) -> Result<[u8; ARGS_SIZE], ExtensionError> {
        Ok(args(field_type)?.encode()?)
    }
    fn describe_arguments(&self, field_type: &FieldType) -> Vec<(&'static str, JsonValue)> {
        let Ok(a) = args(field_type) else {
            return Vec::new();
        };
        let shape = a.shape.iter().map(|&d| JsonValue::Int(d.into())).collect();
        vec![
            ("dtype", JsonValue::String(a.dtype.descr())),
            ("shape", JsonValue::Array(shape)),
        ]
    }
    fn metadata_layout(&self) -> (u64, u64) {
        (8, 8)
    }
    fn metadata(&self, metadata: &[u8]) -> FieldMetadata {
        let ptr = u64_at(metadata, 0).expect("8 metadata bytes");
        if self.torch {
            FieldMetadata::TorchTensor { ptr }
        } else {
            FieldMetadata::NdArray { ptr }
        }
    }
    fn extent_rule(&self, field_type: &FieldType) -> ExtentRule {
        // Checked when the field was parsed or specified: the length fits 64 bits.
        let len = args(field_type)
            .ok()
            .and_then(NdArrayArgs::byte_len)
            .unwrap_or(0);
        ExtentRule::Fixed { len }
    }
    fn read(
        &self,
        _: &FieldType,
        _: &[u8],
        data: Option<&[u8]>,
    ) -> Result<FieldValue, ExtensionError> {
        Ok(FieldValue::NdArray(stored(data)))
    }
    fn payload<'v>(
        &self,
        field_type: &FieldType,
        value: &'v FieldValue,
    ) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        let FieldValue::NdArray(b) = value else {
            return Err(wrong_value(value, self.class_name()));
        };
        let a = args(field_type)?;
        let want = a.byte_len().ok_or("the array size overflows 64 bits")?;
        if b.len() as u64 != want {
            return Err(format!(
                "array of {} bytes, but dtype {} and shape {:?} take {want}",
                b.len(),
                a.dtype,
                a.shape
            )
            .into());
        }
        Ok(Some(Cow::Borrowed(b)))
    }
    fn write_metadata(&self, _: &FieldValue, ptr: u64, _: u64, out: &mut [u8]) {
        put_u64(out, 0, ptr);
    }
}
