//! The values a sample's fields take: what [`crate::DatasetWriter`] writes and what
//! [`crate::Reader`] reads back, one [`FieldValue`] per field. Below both, and below the
//! field types that encode and decode them ([`crate::fields`]).

use crate::json::JsonValue;

/// An RGB image value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RgbImage {
    /// Raw pixels, `height * width * 3` bytes in H x W x RGB order (metadata mode 1).
    Raw {
        /// Width in pixels.
        width: u16,
        /// Height in pixels.
        height: u16,
        /// The pixels.
        pixels: Vec<u8>,
    },
    /// An already-encoded JPEG of an image of the given size (metadata mode 0).
    Jpeg {
        /// Width in pixels.
        width: u16,
        /// Height in pixels.
        height: u16,
        /// The JPEG file bytes.
        bytes: Vec<u8>,
    },
}

/// One field's value in a sample, matched by position to the writer's fields.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FieldValue {
    /// For an Int field.
    Int(i64),
    /// For a Float field.
    Float(f64),
    /// For a Bytes field.
    Bytes(Vec<u8>),
    /// For an NDArray or TorchTensor field: exactly `item_size * prod(shape)` bytes, C order, in
    /// the dtype's byte order. For a VarArray field: any whole number of rows of
    /// `item_size * prod(inner_shape)` bytes (none for an empty array).
    NdArray(Vec<u8>),
    /// For a JSON field: stored as Python's `json.dumps(value)` plus a NUL byte.
    Json(JsonValue),
    /// For an RGBImage field.
    RgbImage(RgbImage),
    /// For a custom field: bytes whose meaning its [`crate::CustomHandler`] defines.
    Custom(Vec<u8>),
}

impl FieldValue {
    /// The variant's name, for errors.
    pub fn kind_name(&self) -> &'static str {
        match self {
            FieldValue::Int(_) => "Int",
            FieldValue::Float(_) => "Float",
            FieldValue::Bytes(_) => "Bytes",
            FieldValue::NdArray(_) => "NdArray",
            FieldValue::Json(_) => "Json",
            FieldValue::RgbImage(_) => "RgbImage",
            FieldValue::Custom(_) => "Custom",
        }
    }
}
