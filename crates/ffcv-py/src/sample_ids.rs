//! `SampleIdDecoder`: each sample's id as a `uint64 [B, 1]` output, whatever the field.
//!
//! The Python package decodes some fields itself (fields written by a `Field` class of the
//! user's, decoders of the user's); batches and their sample ids still come from the Rust
//! loader. When no field is left for it to decode, `ffcv_rs/loader/loader.py` gives it this
//! decoder on one field and does not hand the output out: the facade refuses a loader
//! whose every field is disabled, and this output costs 8 bytes a sample.

use ffcv::Decoder;
use ffcv::decode::{DecoderOutput, FieldInfo, OutputKind, SampleInput};
use ffcv::format::{ByteOrder, NumpyDtype, NumpyKind};

/// See the module documentation.
#[derive(Debug, Clone, Copy, Default)]
pub struct SampleIdDecoder;

impl Decoder for SampleIdDecoder {
    fn name(&self) -> String {
        "SampleIdDecoder".into()
    }

    fn declare(&self, _field: &FieldInfo<'_>) -> Result<DecoderOutput, ffcv::ExtensionError> {
        let dtype =
            NumpyDtype::numeric(NumpyKind::UInt, 8, ByteOrder::Little).ok_or("no uint64 dtype")?;
        Ok(DecoderOutput::new(vec![1], dtype, OutputKind::Scalar))
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        let bytes = input.sample.to_le_bytes();
        let row = out.get_mut(..8).ok_or("row shorter than 8 bytes")?;
        row.copy_from_slice(&bytes);
        Ok(())
    }
}
