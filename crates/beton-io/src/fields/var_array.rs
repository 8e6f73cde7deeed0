//! `VarArrayField` (an ffcv-rs extension stored as FFCV's `BytesField`, type id 3): each
//! sample is an array of one dtype and one inner shape with a leading dimension of its own
//! (boxes `(K, 4)` float32, tokens `(L,)` int32). The metadata is the Bytes field's packed
//! `{ptr: u64, size: u64}`, `size = K * row_bytes`; the stored bytes are the array in C
//! order. FFCV's `BytesField` ignores its argument block, so the dtype and inner shape live
//! there behind a magic tag: FFCV 1.0.2 opens such a file and reads the field as bytes,
//! and our reader recognises the tag (`docs/format.md`, "VarArrayField").
//!
//! Argument block (1024 bytes, little-endian):
//!
//! | bytes | content |
//! |---|---|
//! | 0..8 | [`VAR_ARRAY_MAGIC`] |
//! | 8..12 | u32 layout version, 1 |
//! | 12..16 | u32 number of inner dimensions, 0 to [`MAX_INNER_DIMS`] |
//! | 16..24 | u64 length of the dtype description |
//! | 24..24 + 8 * 31 | the inner dimensions (u64, each at least 1), then zeros |
//! | 272.. | the dtype description, numpy's descr JSON as an NDArray field's (`[["", "<f4"]]`), then zeros |

use std::borrow::Cow;

use extension_error::ExtensionError;

use super::Extent;
use super::{ExtentRule, FieldKind, StoredLen, put_u64, stored, u64_at, wrong_value};
use crate::dtype::{NumpyDtype, NumpyKind};
use crate::format::{ARGS_SIZE, FieldMetadata, FieldType, VarArrayArgs};
use crate::json::JsonValue;
use crate::value::FieldValue;

/// The tag opening a VarArrayField's argument block. FFCV writes zeros there for a
/// `BytesField`, so an FFCV file never carries it.
pub const VAR_ARRAY_MAGIC: [u8; 8] = *b"FFRSVARR";
/// The argument block's layout version.
pub const VAR_ARRAY_LAYOUT: u32 = 1;
/// Most inner dimensions (the leading, variable one not counted).
pub const MAX_INNER_DIMS: usize = 31;
const DIMS_AT: usize = 24;
const DESCR_AT: usize = DIMS_AT + 8 * MAX_INNER_DIMS;

impl VarArrayArgs {
    /// `dtype` and `inner_shape`, checked: a plain numeric dtype, at most 31 dimensions,
    /// none of them 0, a row size that fits 64 bits.
    pub fn new(dtype: NumpyDtype, inner_shape: Vec<u64>) -> Result<VarArrayArgs, String> {
        let args = VarArrayArgs { dtype, inner_shape };
        args.check()?;
        Ok(args)
    }

    fn check(&self) -> Result<(), String> {
        if !matches!(
            self.dtype.kind(),
            NumpyKind::Bool | NumpyKind::Int | NumpyKind::UInt | NumpyKind::Float
        ) {
            return Err(format!(
                "dtype {} is not a bool, integer or float type",
                self.dtype.descr()
            ));
        }
        if self.inner_shape.len() > MAX_INNER_DIMS {
            return Err(format!(
                "inner shape {:?} has more than {MAX_INNER_DIMS} dimensions",
                self.inner_shape
            ));
        }
        if self.inner_shape.contains(&0) {
            return Err(format!(
                "inner shape {:?} has a zero dimension (every row would be empty)",
                self.inner_shape
            ));
        }
        if self.row_bytes().is_none() {
            return Err(format!(
                "inner shape {:?} of {} overflows 64 bits",
                self.inner_shape,
                self.dtype.descr()
            ));
        }
        Ok(())
    }

    /// Bytes of one row (`item_size * prod(inner_shape)`, at least 1), `None` on overflow.
    pub fn row_bytes(&self) -> Option<u64> {
        self.inner_shape
            .iter()
            .try_fold(self.dtype.item_size(), |acc, &d| acc.checked_mul(d))
    }

    /// The rows a stored length holds, or why it is not a whole number of rows.
    pub fn rows_of(&self, size: u64) -> Result<u64, String> {
        let row = self.row_bytes().unwrap_or(u64::MAX).max(1);
        if !size.is_multiple_of(row) {
            return Err(format!(
                "size {size} is not a multiple of the {row}-byte row of {} {:?}",
                self.dtype.descr(),
                self.inner_shape
            ));
        }
        Ok(size / row)
    }

    /// Whether `args` (a type id 3 argument block) opens with [`VAR_ARRAY_MAGIC`].
    pub fn is_tagged(args: &[u8]) -> bool {
        args.get(..8) == Some(&VAR_ARRAY_MAGIC[..])
    }

    /// The 1024-byte argument block.
    pub fn encode(&self) -> Result<[u8; ARGS_SIZE], String> {
        self.check()?;
        let json = self.dtype.descr_json();
        if json.len() > ARGS_SIZE - DESCR_AT {
            return Err(format!("dtype description {json:?} is too long"));
        }
        let mut b = [0u8; ARGS_SIZE];
        b[..8].copy_from_slice(&VAR_ARRAY_MAGIC);
        b[8..12].copy_from_slice(&VAR_ARRAY_LAYOUT.to_le_bytes());
        b[12..16].copy_from_slice(&(self.inner_shape.len() as u32).to_le_bytes());
        put_u64(&mut b, 16, json.len() as u64);
        for (i, &d) in self.inner_shape.iter().enumerate() {
            put_u64(&mut b, DIMS_AT + 8 * i, d);
        }
        b[DESCR_AT..DESCR_AT + json.len()].copy_from_slice(json.as_bytes());
        Ok(b)
    }

    /// Decodes a tagged argument block; `Err` with the reason when any part is malformed.
    pub fn decode(b: &[u8]) -> Result<VarArrayArgs, String> {
        if b.len() != ARGS_SIZE || !VarArrayArgs::is_tagged(b) {
            return Err("argument block does not open with the VarArrayField tag".into());
        }
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let layout = u32_at(8);
        if layout != VAR_ARRAY_LAYOUT {
            return Err(format!(
                "VarArrayField layout version {layout} (this reader knows {VAR_ARRAY_LAYOUT})"
            ));
        }
        let ndim = u32_at(12) as usize;
        if ndim > MAX_INNER_DIMS {
            return Err(format!(
                "{ndim} inner dimensions, more than {MAX_INNER_DIMS}"
            ));
        }
        let len = u64_at(b, 16).expect("8 bytes");
        let room = (ARGS_SIZE - DESCR_AT) as u64;
        if len == 0 || len > room {
            return Err(format!(
                "dtype description length {len} is not in 1..={room}"
            ));
        }
        let len = len as usize;
        let inner_shape: Vec<u64> = (0..ndim)
            .map(|i| u64_at(b, DIMS_AT + 8 * i).expect("8 bytes"))
            .collect();
        let unused_dims = &b[DIMS_AT + 8 * ndim..DESCR_AT];
        let unused_tail = &b[DESCR_AT + len..];
        if unused_dims.iter().chain(unused_tail).any(|&x| x != 0) {
            return Err("bytes past the inner shape or the dtype description are not zero".into());
        }
        let dtype = NumpyDtype::from_descr_json(&b[DESCR_AT..DESCR_AT + len])?;
        VarArrayArgs::new(dtype, inner_shape)
    }
}

/// The kind of [`FieldType::VarArray`]. It shares type id 3 with `BytesKind`, which
/// parses a tagged argument block into this type; so it is not in the by-id table.
#[derive(Debug, Clone, Copy)]
pub struct VarArrayKind;

fn args(field_type: &FieldType) -> Result<&VarArrayArgs, String> {
    match field_type {
        FieldType::VarArray(a) => Ok(a),
        other => Err(format!(
            "a {} has no VarArrayField arguments",
            other.type_name()
        )),
    }
}

impl FieldKind for VarArrayKind {
    fn type_id(&self) -> u8 {
        // BytesField's id, so that FFCV opens the file and reads the field as bytes (the
        // unit tests check it against `BytesKind`).
        3
    }
    fn class_name(&self) -> &'static str {
        "VarArrayField"
    }
    fn parse_arguments(&self, block: &[u8]) -> Result<FieldType, ExtensionError> {
        Ok(FieldType::VarArray(VarArrayArgs::decode(block)?))
    }
    fn encode_arguments(&self, field_type: &FieldType) -> Result<[u8; ARGS_SIZE], ExtensionError> {
        Ok(args(field_type)?.encode()?)
    }
    fn describe_arguments(&self, field_type: &FieldType) -> Vec<(&'static str, JsonValue)> {
        let Ok(a) = args(field_type) else {
            return Vec::new();
        };
        let shape = a
            .inner_shape
            .iter()
            .map(|&d| JsonValue::Int(d.into()))
            .collect();
        vec![
            ("dtype", JsonValue::String(a.dtype.descr())),
            ("inner_shape", JsonValue::Array(shape)),
        ]
    }
    fn metadata_layout(&self) -> (u64, u64) {
        // BytesField's `{ptr: u64, size: u64}` rows, alignment 1.
        (16, 1)
    }
    fn metadata(&self, metadata: &[u8]) -> FieldMetadata {
        FieldMetadata::VarArray {
            ptr: u64_at(metadata, 0).expect("16 metadata bytes"),
            size: u64_at(metadata, 8).expect("16 metadata bytes"),
        }
    }
    fn extent_rule(&self, _: &FieldType) -> ExtentRule {
        // Computed, not Sized: every extent (at open, and per sample in the loader) goes
        // through `extent`, which refuses a size that is not a whole number of rows.
        ExtentRule::Computed
    }
    fn extent(
        &self,
        field_type: &FieldType,
        metadata: &[u8],
    ) -> Result<Option<Extent>, ExtensionError> {
        let a = args(field_type)?;
        let (Some(ptr), Some(size)) = (u64_at(metadata, 0), u64_at(metadata, 8)) else {
            return Err("metadata shorter than 16 bytes".into());
        };
        a.rows_of(size)?;
        Ok(Some(Extent {
            ptr,
            len: StoredLen::Bytes(size),
        }))
    }
    fn read(
        &self,
        field_type: &FieldType,
        _: &[u8],
        data: Option<&[u8]>,
    ) -> Result<FieldValue, ExtensionError> {
        let data = stored(data);
        args(field_type)?.rows_of(data.len() as u64)?;
        Ok(FieldValue::NdArray(data))
    }
    fn payload<'v>(
        &self,
        field_type: &FieldType,
        value: &'v FieldValue,
    ) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        let FieldValue::NdArray(b) = value else {
            return Err(wrong_value(value, self.class_name()));
        };
        args(field_type)?.rows_of(b.len() as u64)?;
        Ok(Some(Cow::Borrowed(b)))
    }
    fn write_metadata(&self, _: &FieldValue, ptr: u64, len: u64, out: &mut [u8]) {
        put_u64(out, 0, ptr);
        put_u64(out, 8, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxes() -> VarArrayArgs {
        VarArrayArgs::new(NumpyDtype::f32(), vec![4]).unwrap()
    }

    #[test]
    fn the_kind_is_stored_as_bytesfield_is() {
        use super::super::bytes::BytesKind;
        assert_eq!(VarArrayKind.type_id(), BytesKind.type_id());
        assert_eq!(VarArrayKind.metadata_layout(), BytesKind.metadata_layout());
    }

    #[test]
    fn arguments_round_trip_and_open_with_the_tag() {
        let b = boxes().encode().unwrap();
        assert!(VarArrayArgs::is_tagged(&b));
        assert_eq!(VarArrayArgs::decode(&b).unwrap(), boxes());
        let tokens = VarArrayArgs::new("<i4".parse().unwrap(), vec![]).unwrap();
        assert_eq!(
            VarArrayArgs::decode(&tokens.encode().unwrap()).unwrap(),
            tokens
        );
        assert_eq!(boxes().row_bytes(), Some(16));
        assert_eq!(boxes().rows_of(48), Ok(3));
        assert!(boxes().rows_of(47).unwrap_err().contains("not a multiple"));
    }

    #[test]
    fn malformed_blocks_are_refused_with_the_reason() {
        let dt: NumpyDtype = "<M8[ns]".parse().unwrap();
        assert!(
            VarArrayArgs::new(dt, vec![2])
                .unwrap_err()
                .contains("not a bool")
        );
        let good = boxes().encode().unwrap();
        let with = |at: usize, bytes: &[u8]| {
            let mut b = good;
            b[at..at + bytes.len()].copy_from_slice(bytes);
            VarArrayArgs::decode(&b).unwrap_err()
        };
        assert!(with(8, &2u32.to_le_bytes()).contains("layout version 2"));
        assert!(with(12, &40u32.to_le_bytes()).contains("40 inner dimensions"));
        assert!(with(16, &u64::MAX.to_le_bytes()).contains("description length"));
        assert!(with(16, &0u64.to_le_bytes()).contains("description length 0"));
        assert!(with(DIMS_AT, &0u64.to_le_bytes()).contains("zero dimension"));
        assert!(with(DIMS_AT + 8, &1u64.to_le_bytes()).contains("not zero"));
        assert!(with(1000, &[1]).contains("not zero"));
        assert!(with(DIMS_AT, &u64::MAX.to_le_bytes()).contains("overflows"));
    }
}
