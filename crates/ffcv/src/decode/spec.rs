//! Decoders named in text (`ffcv bench --decoder FIELD=SPEC`, `ffcv dump --decoder`).
//!
//! One parser for every command: [`DecoderChoice`]'s `FromStr` reads a SPEC and
//! [`parse_field_decoder`] reads `FIELD=SPEC`.

use std::str::FromStr;
use std::sync::Arc;

use super::image::{
    CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder, SimpleRGBImageDecoder,
};
use super::var_array::{OverCap, VarArrayDecoder};
use super::{
    BytesDecoder, Decoder, FloatDecoder, IntDecoder, JsonDecoder, NdArrayDecoder, RawBytesDecoder,
};

/// A field's decoder chosen by name: `default`, `none` (disable the field), `raw-bytes`
/// (the stored bytes of any field), `int`, `float`, `bytes`, `json`, `ndarray`, and the
/// image decoders `simple`, `center-crop:HxW[:RATIO]` (ratio 224/256 by default) and
/// `random-resized-crop:HxW[:SCALE_LO,SCALE_HI[:RATIO_LO,RATIO_HI]]` (FFCV's defaults
/// `0.08,1` and `0.75,1.3333`), and `var-array[:CAP[:truncate]]` (a `VarArrayField`
/// padded to the file's largest array or to CAP rows; over CAP is an error unless
/// `truncate`). A crop decoder's SPEC may end in `:dct-scale`, the opt-in
/// DCT-domain downscaling ([`CenterCropRGBImageDecoder::dct_downscale`]; not FFCV's
/// pixels): `center-crop:112x112:dct-scale`. An `ImageField` (1, 3 or 4 channels of 8 or
/// 16 bits) takes `image`, `image-center-crop:HxW[:RATIO]` and
/// `image-random-resized-crop:HxW[:LO,HI[:LO,HI]]` ([`super::ImageDecoder`]).
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

impl DecoderChoice {
    /// Every decoder SPEC [`FromStr`] accepts, as one line (the aliases `raw`, `disabled`
    /// and `off` left out). The parse errors quote it and the command lines' `--decoder`
    /// help is built from it, so that the list users read is the one kept beside the
    /// parser.
    pub const GRAMMAR: &'static str = "default, none, raw-bytes, int, float, bytes, json, \
         ndarray, simple, center-crop:HxW[:RATIO][:dct-scale], \
         random-resized-crop:HxW[:LO,HI[:LO,HI]][:dct-scale], var-array[:CAP[:truncate]], \
         image, image-center-crop:HxW[:RATIO], image-random-resized-crop:HxW[:LO,HI[:LO,HI]]";
}

/// A decoder SPEC that names no known decoder, or whose parameters are malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid decoder {spec:?}: {reason} (expected one of {})",
    DecoderChoice::GRAMMAR
)]
pub struct UnknownDecoder {
    /// The text given.
    pub spec: String,
    /// What is wrong with it.
    pub reason: String,
}

impl UnknownDecoder {
    fn new(spec: &str, reason: impl Into<String>) -> UnknownDecoder {
        UnknownDecoder {
            spec: spec.to_owned(),
            reason: reason.into(),
        }
    }
}

/// `HxW` as `(height, width)`, both positive.
fn parse_size(spec: &str, text: &str) -> Result<(u32, u32), UnknownDecoder> {
    let bad = || UnknownDecoder::new(spec, format!("size {text:?} is not HxW (e.g. 224x224)"));
    let (h, w) = text.split_once(['x', 'X']).ok_or_else(bad)?;
    let h: u32 = h.trim().parse().map_err(|_| bad())?;
    let w: u32 = w.trim().parse().map_err(|_| bad())?;
    if h == 0 || w == 0 {
        return Err(UnknownDecoder::new(
            spec,
            format!("size {text:?} has a zero side"),
        ));
    }
    Ok((h, w))
}

/// A positive finite number.
fn parse_positive(spec: &str, text: &str) -> Result<f64, UnknownDecoder> {
    match text.trim().parse::<f64>() {
        Ok(x) if x > 0.0 && x.is_finite() => Ok(x),
        _ => Err(UnknownDecoder::new(
            spec,
            format!("{text:?} is not a positive number"),
        )),
    }
}

/// `LO,HI` with `0 < LO <= HI`.
fn parse_range(spec: &str, text: &str) -> Result<(f64, f64), UnknownDecoder> {
    let (lo, hi) = text
        .split_once(',')
        .ok_or_else(|| UnknownDecoder::new(spec, format!("range {text:?} is not LO,HI")))?;
    let (lo, hi) = (parse_positive(spec, lo)?, parse_positive(spec, hi)?);
    if lo > hi {
        return Err(UnknownDecoder::new(
            spec,
            format!("range {text:?} has LO above HI"),
        ));
    }
    Ok((lo, hi))
}

fn parse_image(
    spec: &str,
    name: &str,
    params: &[&str],
) -> Result<Arc<dyn Decoder>, UnknownDecoder> {
    let too_many =
        |most: usize| UnknownDecoder::new(spec, format!("{name} takes at most {most} parameters"));
    // A last parameter `dct-scale` turns on the crop decoders' DCT-domain downscaling; no
    // other parameter is a word, so it cannot be mistaken for one.
    let (params, dct) = match params.split_last() {
        Some((&"dct-scale", rest)) => (rest, true),
        _ => (params, false),
    };
    if dct && name == "simple" {
        return Err(UnknownDecoder::new(
            spec,
            "dct-scale applies to the crop decoders (center-crop, random-resized-crop), not simple",
        ));
    }
    match name {
        "simple" => {
            if !params.is_empty() {
                return Err(too_many(0));
            }
            Ok(Arc::new(SimpleRGBImageDecoder))
        }
        "center-crop" => {
            let size = params
                .first()
                .ok_or_else(|| UnknownDecoder::new(spec, "center-crop needs an output size HxW"))?;
            let size = parse_size(spec, size)?;
            let ratio = match params.get(1) {
                Some(r) => parse_positive(spec, r)?,
                None => CenterCropRGBImageDecoder::DEFAULT_RATIO,
            };
            if params.len() > 2 {
                return Err(too_many(2));
            }
            Ok(Arc::new(
                CenterCropRGBImageDecoder::new(size, ratio).dct_downscale(dct),
            ))
        }
        _ => {
            let size = params.first().ok_or_else(|| {
                UnknownDecoder::new(spec, "random-resized-crop needs an output size HxW")
            })?;
            let mut d =
                RandomResizedCropRGBImageDecoder::new(parse_size(spec, size)?).dct_downscale(dct);
            if let Some(scale) = params.get(1) {
                d.params.scale = parse_range(spec, scale)?;
            }
            if let Some(ratio) = params.get(2) {
                d.params.ratio = parse_range(spec, ratio)?;
            }
            if params.len() > 3 {
                return Err(too_many(3));
            }
            Ok(Arc::new(d))
        }
    }
}

/// `image`, `image-center-crop:HxW[:RATIO]` and
/// `image-random-resized-crop:HxW[:LO,HI[:LO,HI]]`: the ImageField decoders
/// ([`super::ImageDecoder`]), with the RGB crop decoders' parameters (no `dct-scale`).
fn parse_image_kinds(
    spec: &str,
    name: &str,
    params: &[&str],
) -> Result<Arc<dyn Decoder>, UnknownDecoder> {
    use super::ImageDecoder;
    let most = match name {
        "image" => 0,
        "image-center-crop" => 2,
        _ => 3,
    };
    if params.len() > most {
        return Err(UnknownDecoder::new(
            spec,
            format!("{name} takes at most {most} parameters"),
        ));
    }
    if name == "image" {
        return Ok(Arc::new(ImageDecoder::simple()));
    }
    let size = params
        .first()
        .ok_or_else(|| UnknownDecoder::new(spec, format!("{name} needs an output size HxW")))?;
    let size = parse_size(spec, size)?;
    if name == "image-center-crop" {
        let ratio = match params.get(1) {
            Some(r) => parse_positive(spec, r)?,
            None => CenterCropRGBImageDecoder::DEFAULT_RATIO,
        };
        return Ok(Arc::new(ImageDecoder::center_crop(size, ratio)));
    }
    let mut crop = rgb_image::RandomResizedCrop::default();
    if let Some(scale) = params.get(1) {
        crop.scale = parse_range(spec, scale)?;
    }
    if let Some(ratio) = params.get(2) {
        crop.ratio = parse_range(spec, ratio)?;
    }
    Ok(Arc::new(ImageDecoder::random_resized_crop_with(size, crop)))
}

/// `var-array[:CAP[:truncate]]`'s parameters.
fn parse_var_array(spec: &str, params: &[&str]) -> Result<Arc<dyn Decoder>, UnknownDecoder> {
    let mut d = VarArrayDecoder::new();
    if let Some(cap) = params.first() {
        let cap: u64 = cap.trim().parse().map_err(|_| {
            UnknownDecoder::new(spec, format!("cap {cap:?} is not a whole number of rows"))
        })?;
        d = d.cap(cap);
    }
    match params.get(1..).unwrap_or_default() {
        [] => {}
        ["truncate"] => d = d.over_cap(OverCap::Truncate),
        ["error"] => d = d.over_cap(OverCap::Error),
        _ => {
            return Err(UnknownDecoder::new(
                spec,
                "var-array takes a cap, then `truncate` or `error`",
            ));
        }
    }
    Ok(Arc::new(d))
}

impl FromStr for DecoderChoice {
    type Err = UnknownDecoder;

    fn from_str(text: &str) -> Result<DecoderChoice, UnknownDecoder> {
        let lower = text.trim().to_ascii_lowercase();
        let mut parts = lower.split(':');
        let name = parts.next().unwrap_or_default();
        let params: Vec<&str> = parts.collect();
        let d: Arc<dyn Decoder> = match name {
            "simple" | "center-crop" | "random-resized-crop" => parse_image(text, name, &params)?,
            "var-array" => parse_var_array(text, &params)?,
            "image" | "image-center-crop" | "image-random-resized-crop" => {
                parse_image_kinds(text, name, &params)?
            }
            _ if !params.is_empty() => {
                return Err(UnknownDecoder::new(
                    text,
                    format!("{name:?} takes no parameters"),
                ));
            }
            "default" => return Ok(DecoderChoice::Default),
            "none" | "disabled" | "off" => return Ok(DecoderChoice::Disabled),
            "raw-bytes" | "raw" => Arc::new(RawBytesDecoder),
            "int" => Arc::new(IntDecoder),
            "float" => Arc::new(FloatDecoder),
            "bytes" => Arc::new(BytesDecoder),
            "json" => Arc::new(JsonDecoder),
            "ndarray" => Arc::new(NdArrayDecoder),
            _ => return Err(UnknownDecoder::new(text, "no decoder has this name")),
        };
        Ok(DecoderChoice::Decoder(d))
    }
}

/// Parses `FIELD=SPEC` (as `--decoder` takes it) into the field name and its decoder.
///
/// ```
/// let (field, choice) = ffcv::decode::parse_field_decoder("image=center-crop:32x32").unwrap();
/// assert_eq!(field, "image");
/// assert!(matches!(choice, ffcv::DecoderChoice::Decoder(d) if d.name() == "CenterCropRGBImageDecoder"));
/// ```
pub fn parse_field_decoder(text: &str) -> Result<(String, DecoderChoice), UnknownDecoder> {
    let (field, spec) = text.split_once('=').ok_or_else(|| {
        UnknownDecoder::new(
            text,
            "not FIELD=SPEC (e.g. image=center-crop:224x224, label=none)",
        )
    })?;
    if field.is_empty() {
        return Err(UnknownDecoder::new(text, "the field name is empty"));
    }
    Ok((field.to_owned(), spec.parse()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An example of each entry of [`DecoderChoice::GRAMMAR`]: the optional parts dropped,
    /// the size filled in.
    fn examples() -> Vec<String> {
        DecoderChoice::GRAMMAR
            .split(", ")
            .map(|entry| {
                let mut plain = String::new();
                let mut depth = 0;
                for c in entry.chars() {
                    match c {
                        '[' => depth += 1,
                        ']' => depth -= 1,
                        _ if depth == 0 => plain.push(c),
                        _ => {}
                    }
                }
                plain.replace("HxW", "8x8")
            })
            .collect()
    }

    #[test]
    fn every_entry_of_the_grammar_names_a_decoder() {
        let examples = examples();
        assert_eq!(examples.len(), 15, "{examples:?}");
        for spec in &examples {
            assert!(spec.parse::<DecoderChoice>().is_ok(), "{spec}");
        }
        for spec in [
            "center-crop:8x8:0.5:dct-scale",
            "random-resized-crop:8x8:0.1,1:0.5,2:dct-scale",
            "var-array:5",
            "var-array:5:truncate",
            "image-center-crop:8x8:0.5",
            "image-random-resized-crop:8x8:0.1,1:0.5,2",
        ] {
            assert!(spec.parse::<DecoderChoice>().is_ok(), "{spec}");
        }
        for spec in [
            "var-array:x",
            "var-array:5:cut",
            "var-array:5:truncate:1",
            "image:8x8",
            "image-center-crop",
            "image-center-crop:8x8:0.5:dct-scale",
        ] {
            assert!(spec.parse::<DecoderChoice>().is_err(), "{spec}");
        }
        let err = "blur".parse::<DecoderChoice>().unwrap_err();
        assert!(err.to_string().contains(DecoderChoice::GRAMMAR), "{err}");
    }
}
