//! The default decoders of the field types, as FFCV's: Int → `i64 [B, 1]`,
//! Float → `f64 [B, 1]`, Bytes → `u8 [B, max_size]` plus lengths, NDArray/TorchTensor → the
//! stored dtype and shape, JSON → bytes plus lengths (unpacked with
//! [`crate::BatchOutput::json`]), RGB images → `SimpleRGBImageDecoder` (constant-size
//! datasets; it refuses varying sizes when the loader is built, naming two samples); and
//! [`RawBytesDecoder`], the stored bytes of any field. [`default_decoder`] is the table
//! from field type to default decoder; a type's decoder may live in its own module
//! (`fixed_bytes.rs`).

use std::sync::Arc;

use beton_io::{FieldType, NumpyDtype, Reader};

use super::copy::{copy_exact, copy_padded};
use super::{CopyRule, Decoder, DecoderOutput, FieldInfo, OutputKind, SampleInput};

/// The decoder FFCV uses by default for a field of this type; `None` for custom fields
/// (give them a decoder with [`crate::LoaderBuilder::pipeline`] or
/// [`crate::LoaderBuilder::decoder`]).
///
/// RGB images get FFCV's `SimpleRGBImageDecoder`, which only serves datasets whose images
/// all have one size: for others the loader's build fails and names the sizes, and the
/// user picks a crop decoder (`CenterCropRGBImageDecoder`,
/// `RandomResizedCropRGBImageDecoder`) or disables the field.
pub fn default_decoder(field_type: &FieldType) -> Option<Arc<dyn Decoder>> {
    Some(match field_type {
        FieldType::Int => Arc::new(IntDecoder),
        FieldType::Float => Arc::new(FloatDecoder),
        FieldType::Bytes => Arc::new(BytesDecoder),
        FieldType::Json => Arc::new(JsonDecoder),
        FieldType::NdArray(_) | FieldType::TorchTensor(_) => Arc::new(NdArrayDecoder),
        FieldType::RgbImage => Arc::new(super::image::SimpleRGBImageDecoder),
        FieldType::FixedBytes(_) => Arc::new(super::fixed_bytes::FixedBytesDecoder),
        FieldType::VarArray(_) => Arc::new(super::var_array::VarArrayDecoder::new()),
        FieldType::Image(_) => Arc::new(super::image_kinds::ImageDecoder::simple()),
        _ => return None,
    })
}

fn little(kind: beton_io::NumpyKind, size: u64) -> NumpyDtype {
    NumpyDtype::numeric(kind, size, beton_io::ByteOrder::Little).expect("valid numeric dtype")
}

fn expect_type(info: &FieldInfo<'_>, ok: bool, want: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!(
            "decodes {want} fields, but {:?} is a {}",
            info.field.name,
            info.field.field_type.type_name()
        ))
    }
}

/// FFCV's `IntDecoder`: the value as `i64`, shape `[1]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct IntDecoder;

impl Decoder for IntDecoder {
    fn name(&self) -> String {
        "IntDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        expect_type(info, info.field.field_type == FieldType::Int, "IntField")?;
        Ok(DecoderOutput::new(
            vec![1],
            little(beton_io::NumpyKind::Int, 8),
            OutputKind::Scalar,
        ))
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        let v = input.int().ok_or("metadata too short for an IntField")?;
        out.copy_from_slice(&v.to_ne_bytes());
        Ok(())
    }

    fn copy_rule(&self) -> Option<CopyRule> {
        cfg!(target_endian = "little").then_some(CopyRule::Metadata)
    }
}

/// FFCV's `FloatDecoder`: the value as `f64` (bit for bit), shape `[1]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FloatDecoder;

impl Decoder for FloatDecoder {
    fn name(&self) -> String {
        "FloatDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        expect_type(
            info,
            info.field.field_type == FieldType::Float,
            "FloatField",
        )?;
        Ok(DecoderOutput::new(
            vec![1],
            little(beton_io::NumpyKind::Float, 8),
            OutputKind::Scalar,
        ))
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        let v = input.float().ok_or("metadata too short for a FloatField")?;
        out.copy_from_slice(&v.to_bits().to_ne_bytes());
        Ok(())
    }

    fn copy_rule(&self) -> Option<CopyRule> {
        cfg!(target_endian = "little").then_some(CopyRule::Metadata)
    }
}

/// Largest stored length of `field` over every sample (what a padded row must hold).
fn max_stored_len(reader: &Reader, field: usize) -> Result<usize, String> {
    let mut max = 0u64;
    for sample in 0..reader.num_samples() {
        // From the metadata alone (beton-io's extent of the sample), so a remote dataset,
        // whose data is not in memory at build time, is not read here.
        let meta = reader
            .metadata_bytes(sample, field)
            .map_err(|e| e.to_string())?;
        let len = reader
            .stored_extent(field, meta)
            .map_err(|reason| format!("sample {sample}: invalid metadata: {reason}"))?
            .map_or(0, |(_, len)| len);
        max = max.max(len);
    }
    usize::try_from(max).map_err(|_| format!("largest sample of {max} bytes exceeds memory"))
}

/// `u8` rows as wide as the field's largest stored sample in the whole file (FFCV's width
/// for byte and JSON fields), each row its sample's bytes followed by zeros.
fn padded_rows(info: &FieldInfo<'_>, kind: OutputKind) -> Result<DecoderOutput, String> {
    let max = max_stored_len(info.reader, info.index)?;
    Ok(DecoderOutput::new(vec![max], NumpyDtype::u8(), kind))
}

/// FFCV's `BytesDecoder`: `u8` rows as wide as the largest sample of the whole file, plus
/// the per-sample lengths (which FFCV does not give).
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesDecoder;

impl Decoder for BytesDecoder {
    fn name(&self) -> String {
        "BytesDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        expect_type(
            info,
            info.field.field_type == FieldType::Bytes,
            "BytesField",
        )?;
        padded_rows(info, OutputKind::Bytes).map_err(Into::into)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        copy_padded(input.data, out).map_err(Into::into)
    }

    fn copy_rule(&self) -> Option<CopyRule> {
        Some(CopyRule::Padded)
    }
}

/// FFCV's JSON decoding: the stored text (with its NUL) as bytes rows like
/// [`BytesDecoder`]; [`crate::BatchOutput::json`] parses a row.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonDecoder;

impl Decoder for JsonDecoder {
    fn name(&self) -> String {
        "JSONDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        expect_type(info, info.field.field_type == FieldType::Json, "JSONField")?;
        padded_rows(info, OutputKind::Json).map_err(Into::into)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        copy_padded(input.data, out).map_err(Into::into)
    }

    fn copy_rule(&self) -> Option<CopyRule> {
        Some(CopyRule::Padded)
    }
}

/// FFCV's `NDArrayDecoder` (also for TorchTensor fields): the stored array, in its dtype
/// and shape.
#[derive(Debug, Clone, Copy, Default)]
pub struct NdArrayDecoder;

impl Decoder for NdArrayDecoder {
    fn name(&self) -> String {
        "NDArrayDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        let args = info.field.field_type.ndarray_args().ok_or_else(|| {
            format!(
                "decodes NDArrayField and TorchTensorField fields, but {:?} is a {}",
                info.field.name,
                info.field.field_type.type_name()
            )
        })?;
        let shape = args
            .shape
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|_| format!("shape {:?} exceeds memory", args.shape))?;
        let out = DecoderOutput::new(shape, args.dtype.clone(), OutputKind::Array);
        if out.row_bytes().is_none() {
            return Err(format!("shape {:?} exceeds memory", args.shape).into());
        }
        Ok(out)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        copy_exact(input.data, out).map_err(Into::into)
    }

    fn copy_rule(&self) -> Option<CopyRule> {
        Some(CopyRule::Exact)
    }
}

/// The stored bytes of any field that has data (Bytes, JSON, NDArray, images: raw pixels or
/// the JPEG file, fixed bytes, custom fields whose handler stores some) as padded `u8` rows plus lengths, like [`BytesDecoder`]. Useful to measure
/// the data path without decoding, or to decode images elsewhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawBytesDecoder;

impl Decoder for RawBytesDecoder {
    fn name(&self) -> String {
        "RawBytesDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        expect_type(
            info,
            info.reader.stores_data(info.index),
            "fields with stored bytes (Bytes, JSON, NDArray, TorchTensor, RGBImage, ...)",
        )?;
        let max = max_stored_len(info.reader, info.index)?;
        Ok(DecoderOutput::new(
            vec![max],
            NumpyDtype::u8(),
            OutputKind::Bytes,
        ))
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        copy_padded(input.data, out).map_err(Into::into)
    }

    fn copy_rule(&self) -> Option<CopyRule> {
        Some(CopyRule::Padded)
    }
}
