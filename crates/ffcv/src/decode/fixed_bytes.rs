//! The default decoder of `FixedBytesField` (ffcv-rs's type id 128): each sample's bytes
//! as one `u8` row of the field's length.

use beton_io::{FieldType, NumpyDtype};

use super::copy::copy_exact;
use super::{CopyRule, Decoder, DecoderOutput, FieldInfo, OutputKind, SampleInput};

/// A `FixedBytesField`'s stored bytes as `u8 [B, len]` (an array output: every row is
/// full, so there are no per-sample lengths).
#[derive(Debug, Clone, Copy, Default)]
pub struct FixedBytesDecoder;

impl Decoder for FixedBytesDecoder {
    fn name(&self) -> String {
        "FixedBytesDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        let FieldType::FixedBytes(len) = info.field.field_type else {
            return Err(format!(
                "decodes FixedBytesField fields, but {:?} is a {}",
                info.field.name,
                info.field.field_type.type_name()
            )
            .into());
        };
        let len = usize::try_from(len).map_err(|_| format!("length {len} exceeds memory"))?;
        Ok(DecoderOutput::new(
            vec![len],
            NumpyDtype::u8(),
            OutputKind::Array,
        ))
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
