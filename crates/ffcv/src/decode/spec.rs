//! Decoders named in text (`ffcv bench --decoder FIELD=SPEC`, `ffcv dump --decoder`).

use std::str::FromStr;
use std::sync::Arc;

use super::{
    BytesDecoder, Decoder, FloatDecoder, IntDecoder, JsonDecoder, NdArrayDecoder, RawBytesDecoder,
};

/// A field's decoder chosen by name: `default`, `none` (disable the field), `raw-bytes`
/// (the stored bytes of any field), `int`, `float`, `bytes`, `json`, `ndarray`.
#[derive(Clone)]
pub enum DecoderChoice {
    /// The field type's default decoder.
    Default,
    /// Leave the field out of the batches.
    Disabled,
    /// This decoder.
    Decoder(Arc<dyn Decoder>),
}

impl std::fmt::Debug for DecoderChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecoderChoice::Default => f.write_str("Default"),
            DecoderChoice::Disabled => f.write_str("Disabled"),
            DecoderChoice::Decoder(d) => write!(f, "Decoder({})", d.name()),
        }
    }
}

/// A decoder name none of the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown decoder {0:?}: expected default, none, raw-bytes, int, float, bytes, json or ndarray"
)]
pub struct UnknownDecoder(pub String);

impl FromStr for DecoderChoice {
    type Err = UnknownDecoder;

    fn from_str(text: &str) -> Result<DecoderChoice, UnknownDecoder> {
        let d: Arc<dyn Decoder> = match text.trim().to_ascii_lowercase().as_str() {
            "default" => return Ok(DecoderChoice::Default),
            "none" | "disabled" | "off" => return Ok(DecoderChoice::Disabled),
            "raw-bytes" | "raw" => Arc::new(RawBytesDecoder),
            "int" => Arc::new(IntDecoder),
            "float" => Arc::new(FloatDecoder),
            "bytes" => Arc::new(BytesDecoder),
            "json" => Arc::new(JsonDecoder),
            "ndarray" => Arc::new(NdArrayDecoder),
            _ => return Err(UnknownDecoder(text.to_owned())),
        };
        Ok(DecoderChoice::Decoder(d))
    }
}
