//! `RGBImageField` (type id 2): raw H x W x 3 pixels or a JPEG stream in the data region;
//! the metadata is the packed `{mode: u8, width: u16, height: u16, data_ptr: u64}`.

use std::borrow::Cow;

use extension_error::ExtensionError;

use super::{Extent, ExtentRule, FieldKind, StoredLen, put_u64, stored, u64_at, wrong_value};
use crate::format::{FieldMetadata, FieldType, IMAGE_MODE_JPEG, IMAGE_MODE_RAW};
use crate::value::{FieldValue, RgbImage};

/// The kind of [`FieldType::RgbImage`].
#[derive(Debug, Clone, Copy)]
pub struct RgbImageKind;

impl RgbImageKind {
    /// `(mode, width, height)` of an image's metadata bytes (`None` when shorter than 5).
    pub fn header(metadata: &[u8]) -> Option<(u8, u16, u16)> {
        let m = metadata.get(..5)?;
        Some((
            m[0],
            u16::from_le_bytes([m[1], m[2]]),
            u16::from_le_bytes([m[3], m[4]]),
        ))
    }
}

impl FieldKind for RgbImageKind {
    fn type_id(&self) -> u8 {
        2
    }
    fn class_name(&self) -> &'static str {
        "RGBImageField"
    }
    fn parse_arguments(&self, _: &[u8]) -> Result<FieldType, ExtensionError> {
        Ok(FieldType::RgbImage)
    }
    fn metadata_layout(&self) -> (u64, u64) {
        (13, 1)
    }
    fn metadata(&self, metadata: &[u8]) -> FieldMetadata {
        let (mode, width, height) = RgbImageKind::header(metadata).expect("13 metadata bytes");
        FieldMetadata::RgbImage {
            mode,
            width,
            height,
            data_ptr: u64_at(metadata, 5).expect("13 metadata bytes"),
        }
    }
    fn extent_rule(&self, _: &FieldType) -> ExtentRule {
        ExtentRule::Computed
    }
    fn extent(&self, _: &FieldType, metadata: &[u8]) -> Result<Option<Extent>, ExtensionError> {
        let (mode, width, height) =
            RgbImageKind::header(metadata).ok_or("metadata too short for an RGBImageField")?;
        let ptr = u64_at(metadata, 5).ok_or("metadata too short for an RGBImageField")?;
        let len = match mode {
            IMAGE_MODE_RAW => StoredLen::Bytes(u64::from(width) * u64::from(height) * 3),
            // A JPEG stream's length is not in the metadata: it is its allocation.
            IMAGE_MODE_JPEG => StoredLen::WholeAllocation,
            other => {
                return Err(format!("image mode {other} is neither 0 (jpg) nor 1 (raw)").into());
            }
        };
        Ok(Some(Extent { ptr, len }))
    }
    fn read(
        &self,
        _: &FieldType,
        metadata: &[u8],
        data: Option<&[u8]>,
    ) -> Result<FieldValue, ExtensionError> {
        let (mode, width, height) =
            RgbImageKind::header(metadata).ok_or("metadata too short for an RGBImageField")?;
        let data = stored(data);
        Ok(FieldValue::RgbImage(if mode == IMAGE_MODE_RAW {
            RgbImage::Raw {
                width,
                height,
                pixels: data,
            }
        } else {
            RgbImage::Jpeg {
                width,
                height,
                bytes: data,
            }
        }))
    }
    fn payload<'v>(
        &self,
        _: &FieldType,
        value: &'v FieldValue,
    ) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        match value {
            FieldValue::RgbImage(RgbImage::Raw {
                width,
                height,
                pixels,
            }) => {
                let want = u64::from(*width) * u64::from(*height) * 3;
                if pixels.len() as u64 != want {
                    return Err(format!(
                        "{} pixel bytes for a {width}x{height} RGB image, which takes {want}",
                        pixels.len()
                    )
                    .into());
                }
                Ok(Some(Cow::Borrowed(pixels)))
            }
            FieldValue::RgbImage(RgbImage::Jpeg { bytes, .. }) => Ok(Some(Cow::Borrowed(bytes))),
            other => Err(wrong_value(other, self.class_name())),
        }
    }
    fn write_metadata(&self, value: &FieldValue, ptr: u64, _: u64, out: &mut [u8]) {
        let FieldValue::RgbImage(img) = value else {
            return;
        };
        let (mode, w, h) = match img {
            RgbImage::Raw { width, height, .. } => (IMAGE_MODE_RAW, width, height),
            RgbImage::Jpeg { width, height, .. } => (IMAGE_MODE_JPEG, width, height),
        };
        out[0] = mode;
        out[1..3].copy_from_slice(&w.to_le_bytes());
        out[3..5].copy_from_slice(&h.to_le_bytes());
        put_u64(out, 5, ptr);
    }
}
