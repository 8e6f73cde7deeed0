//! One field of one sample as `ffcv dump` prints it: the context a printer needs
//! ([`SampleField`]: the reader, the field, the sample, `--raw`, the image size cap) with
//! the helpers every printer shares (stored bytes, digests, the error naming the sample),
//! and the JSON values they build. The printers (`dump.rs` for the built-in types, one
//! module per extension type) build on it.

use base64::Engine as _;
use beton_io::{Field, IMAGE_MODE_JPEG, JsonValue, Reader};
use sha2::{Digest, Sha256};

use crate::error::{CliError, Result};

/// An integer value.
pub(super) fn int(value: impl Into<i128>) -> JsonValue {
    JsonValue::Int(value.into())
}

/// A string value.
pub(super) fn string(value: impl Into<String>) -> JsonValue {
    JsonValue::String(value.into())
}

/// A float as a JSON number, or `"NaN"`, `"inf"`, `"-inf"`, which JSON cannot hold.
pub(super) fn float_value(x: f64) -> JsonValue {
    if x.is_nan() {
        string("NaN")
    } else if x.is_infinite() {
        string(if x > 0.0 { "inf" } else { "-inf" })
    } else {
        JsonValue::Float(x)
    }
}

/// The context needed to decode one field of one sample, and to name it in errors.
pub(super) struct SampleField<'a> {
    pub(super) reader: &'a Reader,
    pub(super) index: usize,
    pub(super) field: &'a Field,
    pub(super) sample: u64,
    pub(super) raw: bool,
    pub(super) max_image_pixels: u64,
}

impl SampleField<'_> {
    /// A field type this command has no printer for: its class name, its stored bytes'
    /// length and digest (if it stores any) and its metadata's digest.
    pub(super) fn generic(&self) -> Result<JsonValue> {
        let mut object = vec![("type".into(), string(self.field.field_type.type_name()))];
        if let Some(stored) = self.reader.field_data(self.sample, self.index)? {
            object.push(("len".into(), int(stored.len() as u64)));
            self.digest_into(&mut object, "", stored);
        }
        let metadata = self.reader.metadata_bytes(self.sample, self.index)?;
        self.digest_into(&mut object, "metadata_", metadata);
        Ok(JsonValue::Object(object))
    }

    /// The full-resolution RGB pixels of a stored JPEG, which must have the size its
    /// metadata records (checked from the JPEG header before anything is allocated), at
    /// most `--max-image-pixels`.
    pub(super) fn decode_jpeg(&self, jpeg: &[u8], height: u16, width: u16) -> Result<Vec<u8>> {
        // The loader's checks (area cap, header against metadata, a stream long enough for
        // its frame) before anything is sized from the claimed size.
        ffcv::decode::check_stored_image(
            jpeg,
            IMAGE_MODE_JPEG,
            height,
            width,
            self.max_image_pixels,
        )
        .map_err(|reason| self.bad(format!("cannot decode the JPEG: {reason}")))?;
        let cannot =
            |err: ffcv::image::ImageError| self.bad(format!("cannot decode the JPEG: {err}"));
        let pixels = usize::from(height) * usize::from(width) * 3;
        let image = ffcv::image::decode_jpeg(jpeg, pixels).map_err(cannot)?;
        Ok(image.into_pixels())
    }

    /// The field's stored bytes for this sample (validated against the allocation table).
    pub(super) fn stored(&self) -> Result<&[u8]> {
        Ok(self
            .reader
            .field_data(self.sample, self.index)?
            .unwrap_or_default())
    }

    /// Adds `{prefix}sha256` and, with `--raw`, `{prefix}b64` of `bytes`.
    pub(super) fn digest_into(
        &self,
        object: &mut Vec<(String, JsonValue)>,
        prefix: &str,
        bytes: &[u8],
    ) {
        object.push((format!("{prefix}sha256"), string(sha256_hex(bytes))));
        if self.raw {
            let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
            object.push((format!("{prefix}b64"), string(b64)));
        }
    }

    pub(super) fn bad(&self, reason: String) -> CliError {
        CliError::BadValue {
            path: self.reader.path().to_path_buf(),
            sample: self.sample,
            field: self.field.name.clone(),
            reason,
        }
    }
}

/// A shape as a JSON list of integers.
pub(super) fn shape(dims: &[u64]) -> JsonValue {
    JsonValue::Array(dims.iter().map(|&d| int(d)).collect())
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}
