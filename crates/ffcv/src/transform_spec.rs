//! Transforms named in text (`ffcv bench --transform FIELD=OP[,OP…]`, `ffcv doctor
//! --transform`), so that a training pipeline can be measured without writing Rust.
//!
//! One parser for every command, beside the decoder parser of [`crate::decode`]:
//! [`parse_transforms`] reads `OP[,OP…]` and [`FieldTransforms::parse`] reads
//! `FIELD=OP[,OP…]`. Each op maps to one of [`crate::transforms`]' constructors, with FFCV's
//! defaults where the text leaves a parameter out.

use std::sync::Arc;

use pipeline_jit::{ElemType, Operation};

use crate::decode::{DecoderChoice, PipelineSpec, default_decoder};
use crate::transforms::{self, IMAGENET_MEAN, IMAGENET_STD};

/// The op grammar, quoted in every error so that a mistyped flag shows what is accepted.
pub const TRANSFORM_GRAMMAR: &str = "flip[:P], normalize:imagenet[:DTYPE], \
     normalize:M1,M2,M3/S1,S2,S3[:DTYPE], chw, convert:DTYPE, cutout:SIZE, translate:PAD, \
     squeeze (DTYPE: u8, u16, i32, i64, f16, f32, f64)";

/// A transform op string that names no known op, or whose parameters are malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid transform {spec:?}: {reason} (ops: {TRANSFORM_GRAMMAR})")]
pub struct UnknownTransform {
    /// The op text given.
    pub spec: String,
    /// What is wrong with it.
    pub reason: String,
}

impl UnknownTransform {
    fn new(spec: &str, reason: impl Into<String>) -> UnknownTransform {
        UnknownTransform {
            spec: spec.to_owned(),
            reason: reason.into(),
        }
    }
}

/// One `FIELD=OP[,OP…]` value (a command's `--transform`): the field, the ops as written,
/// and the parsed ops in order. Commands keep the text for row names, reports and the
/// commands they recommend; the loader gets [`FieldTransforms::ops`].
#[derive(Clone)]
pub struct FieldTransforms {
    /// The field the ops run on.
    pub field: String,
    /// The `OP[,OP…]` part as written (`flip,chw`).
    pub ops_text: String,
    /// The parsed ops, in order.
    pub ops: Vec<Arc<dyn Operation>>,
}

impl FieldTransforms {
    /// Parses `FIELD=OP[,OP…]`; the error quotes the op grammar.
    ///
    /// ```
    /// use ffcv::transform_spec::FieldTransforms;
    ///
    /// let t = FieldTransforms::parse("image=flip,normalize:imagenet:f32,chw").unwrap();
    /// assert_eq!((t.field.as_str(), t.ops.len()), ("image", 3));
    /// assert_eq!(t.text(), "image=flip,normalize:imagenet:f32,chw");
    /// assert_eq!(t.describe(), "RandomHorizontalFlip -> NormalizeImage -> ToChw");
    /// assert!(FieldTransforms::parse("image=blur").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<FieldTransforms, UnknownTransform> {
        let (field, ops_text) = text.split_once('=').ok_or_else(|| {
            UnknownTransform::new(text, "not FIELD=OP[,OP…] (e.g. image=flip,chw)")
        })?;
        if field.is_empty() {
            return Err(UnknownTransform::new(text, "the field name is empty"));
        }
        Ok(FieldTransforms {
            field: field.to_owned(),
            ops_text: ops_text.to_owned(),
            ops: parse_transforms(ops_text)?,
        })
    }

    /// The value as written: `FIELD=OP[,OP…]`.
    pub fn text(&self) -> String {
        format!("{}={}", self.field, self.ops_text)
    }

    /// The ops' names joined by arrows (`RandomHorizontalFlip -> ToChw`), for reports.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self.ops.iter().map(|op| op.name()).collect();
        names.join(" -> ")
    }
}

impl std::fmt::Debug for FieldTransforms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.field, self.ops_text)
    }
}

/// The pipeline of `field` in `reader`'s file: its decoder (`choice`, or the field type's
/// default when `choice` is `None` or [`DecoderChoice::Default`]) followed by `ops`. This is
/// how a command joins `--decoder FIELD=SPEC` and `--transform FIELD=OPS`; the error names
/// the field and says what is wrong.
pub fn field_pipeline(
    reader: &beton_io::Reader,
    field: &str,
    choice: Option<&DecoderChoice>,
    ops: &[Arc<dyn Operation>],
) -> Result<PipelineSpec, String> {
    let decoder = match choice {
        Some(DecoderChoice::Decoder(d)) => Arc::clone(d),
        Some(DecoderChoice::Disabled) => {
            return Err(format!(
                "field {field:?} has transforms but its decoder is `none` (disabled)"
            ));
        }
        Some(DecoderChoice::Default) | None => {
            let index = reader.field_index(field).ok_or_else(|| {
                let names: Vec<&str> = reader.fields().iter().map(|f| f.name.as_str()).collect();
                format!(
                    "transforms name field {field:?}, which the file does not have (fields: {})",
                    names.join(", ")
                )
            })?;
            default_decoder(&reader.fields()[index].field_type).ok_or_else(|| {
                format!("field {field:?} is a custom field: it has no default decoder")
            })?
        }
    };
    Ok(ops
        .iter()
        .fold(PipelineSpec::from_arc(decoder), |spec, op| {
            spec.then_arc(Arc::clone(op))
        }))
}

/// Parses `OP[,OP…]` into transforms, in order.
///
/// The ops are separated by commas; `normalize` takes commas inside its mean and std lists,
/// so the splitter keeps a comma that follows a digit-list of `normalize:` together with
/// it (see [`split_ops`]).
pub fn parse_transforms(text: &str) -> Result<Vec<Arc<dyn Operation>>, UnknownTransform> {
    if text.is_empty() {
        return Err(UnknownTransform::new(text, "no op given"));
    }
    split_ops(text).iter().map(|op| parse_op(op)).collect()
}

/// Splits `OP[,OP…]` at the commas that separate ops. A comma separates ops unless the text
/// after it starts with a digit, a sign or a dot: those only continue a number list, which
/// only `normalize:M1,M2,M3/S1,S2,S3` has (no op name starts with a digit).
fn split_ops(text: &str) -> Vec<String> {
    let mut ops: Vec<String> = Vec::new();
    for part in text.split(',') {
        let continues_numbers = part
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.'));
        match ops.last_mut() {
            Some(last) if continues_numbers => {
                last.push(',');
                last.push_str(part);
            }
            _ => ops.push(part.to_owned()),
        }
    }
    ops
}

fn parse_op(op: &str) -> Result<Arc<dyn Operation>, UnknownTransform> {
    let (name, rest) = match op.split_once(':') {
        Some((n, r)) => (n, Some(r)),
        None => (op, None),
    };
    let no_params = |made: Arc<dyn Operation>| match rest {
        None => Ok(made),
        Some(_) => Err(UnknownTransform::new(
            op,
            format!("{name} takes no parameter"),
        )),
    };
    match name {
        "flip" => {
            let p = match rest {
                None => 0.5,
                Some(t) => number(op, "flip probability", t)?,
            };
            let flip = transforms::random_horizontal_flip(p).map_err(|e| rejected(op, e))?;
            Ok(Arc::new(flip))
        }
        "normalize" => normalize(op, rest),
        "chw" => no_params(Arc::new(transforms::to_torch_image())),
        "squeeze" => no_params(Arc::new(transforms::squeeze())),
        "convert" => {
            let t = rest.ok_or_else(|| UnknownTransform::new(op, "convert needs :DTYPE"))?;
            Ok(Arc::new(transforms::convert(dtype(op, t)?)))
        }
        "cutout" => {
            let t = rest.ok_or_else(|| UnknownTransform::new(op, "cutout needs :SIZE"))?;
            let size: usize = positive(op, "cutout size", t)?;
            Ok(Arc::new(transforms::cutout(size, [0, 0, 0])))
        }
        "translate" => {
            let t = rest.ok_or_else(|| UnknownTransform::new(op, "translate needs :PAD"))?;
            let pad: usize = positive(op, "translate padding", t)?;
            Ok(Arc::new(transforms::random_translate(pad, [0, 0, 0])))
        }
        "" => Err(UnknownTransform::new(
            op,
            "an op is empty (two commas in a row?)",
        )),
        other => Err(UnknownTransform::new(op, format!("unknown op {other:?}"))),
    }
}

/// An op whose parameters the transform's constructor refused: its reason, for `op`.
fn rejected(op: &str, e: transforms::BadParameter) -> UnknownTransform {
    UnknownTransform::new(op, e.reason)
}

/// `normalize:imagenet[:DTYPE]` or `normalize:M1,M2,M3/S1,S2,S3[:DTYPE]` (DTYPE f32 by
/// default, as FFCV's `NormalizeImage` examples use).
fn normalize(op: &str, rest: Option<&str>) -> Result<Arc<dyn Operation>, UnknownTransform> {
    let rest = rest.ok_or_else(|| {
        UnknownTransform::new(op, "normalize needs :imagenet or :M1,M2,M3/S1,S2,S3")
    })?;
    let (stats, ty) = match rest.split_once(':') {
        Some((s, t)) => (s, Some(t)),
        None => (rest, None),
    };
    let (mean, std) = if stats == "imagenet" {
        (IMAGENET_MEAN.to_vec(), IMAGENET_STD.to_vec())
    } else {
        let (m, s) = stats.split_once('/').ok_or_else(|| {
            UnknownTransform::new(
                op,
                "normalize's statistics are imagenet or M1,M2,M3/S1,S2,S3",
            )
        })?;
        (channels(op, "mean", m)?, channels(op, "std", s)?)
    };
    let dt = match ty {
        None => ElemType::F32,
        Some(t) => dtype(op, t)?,
    };
    let normalize = transforms::normalize_channels(&mean, &std, dt).map_err(|e| rejected(op, e))?;
    Ok(Arc::new(normalize))
}

/// One number per channel: 3 for RGB, 1 or 4 for the other image kinds.
fn channels(op: &str, what: &str, text: &str) -> Result<Vec<f64>, UnknownTransform> {
    let values: Vec<&str> = text.split(',').collect();
    if !matches!(values.len(), 1 | 3 | 4) {
        return Err(UnknownTransform::new(
            op,
            format!(
                "{what} needs 1, 3 or 4 comma-separated numbers (one per channel), got {}",
                values.len()
            ),
        ));
    }
    values.into_iter().map(|v| number(op, what, v)).collect()
}

fn number<T: std::str::FromStr>(op: &str, what: &str, text: &str) -> Result<T, UnknownTransform> {
    text.parse()
        .map_err(|_| UnknownTransform::new(op, format!("{what} {text:?} is not a number")))
}

fn positive(op: &str, what: &str, text: &str) -> Result<usize, UnknownTransform> {
    let n: usize = number(op, what, text)?;
    if n == 0 {
        return Err(UnknownTransform::new(
            op,
            format!("{what} must be at least 1"),
        ));
    }
    Ok(n)
}

fn dtype(op: &str, text: &str) -> Result<ElemType, UnknownTransform> {
    Ok(match text {
        "u8" | "uint8" => ElemType::U8,
        "u16" | "uint16" => ElemType::U16,
        "i32" | "int32" => ElemType::I32,
        "i64" | "int64" => ElemType::I64,
        "f32" | "float32" => ElemType::F32,
        "f64" | "float64" => ElemType::F64,
        "f16" | "float16" => ElemType::F16,
        other => {
            return Err(UnknownTransform::new(
                op,
                format!("unknown dtype {other:?}"),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        parse_transforms(text)
            .unwrap()
            .iter()
            .map(|o| o.name())
            .collect()
    }

    #[test]
    fn the_imagenet_training_pipeline_parses_in_order() {
        let got = names("flip,normalize:imagenet:f32,chw");
        assert_eq!(got.len(), 3);
        assert!(got[0].contains("Flip"), "{got:?}");
        assert!(got[1].contains("Normalize"), "{got:?}");
        assert!(got[2].contains("Chw") || got[2].contains("CHW"), "{got:?}");
    }

    #[test]
    fn explicit_statistics_keep_their_commas() {
        assert_eq!(
            split_ops("flip:0.25,normalize:1,2,3/4,5,6:f64,chw"),
            vec!["flip:0.25", "normalize:1,2,3/4,5,6:f64", "chw"]
        );
        assert_eq!(
            split_ops("normalize:-1.5,.5,+2/1,1,1,squeeze"),
            vec!["normalize:-1.5,.5,+2/1,1,1", "squeeze"]
        );
        assert_eq!(names("normalize:1,2,3/4,5,6:f64,chw").len(), 2);
        // One mean and std per channel: gray and RGBA images too.
        assert_eq!(names("normalize:1/2:f32,chw").len(), 2);
        assert_eq!(names("normalize:1,2,3,4/5,6,7,8,convert:u16").len(), 2);
    }

    #[test]
    fn every_op_of_the_grammar_parses() {
        for op in [
            "flip",
            "flip:1",
            "normalize:imagenet",
            "normalize:imagenet:f64",
            "normalize:imagenet:f16",
            "normalize:0,0,0/1,1,1:float16",
            "chw",
            "convert:f32",
            "convert:u8",
            "convert:f16",
            "cutout:8",
            "translate:4",
            "squeeze",
        ] {
            assert_eq!(names(op).len(), 1, "{op}");
        }
    }

    /// The help texts of `--transform` quote [`TRANSFORM_GRAMMAR`]: each op it names
    /// parses, its placeholders filled in.
    #[test]
    fn every_entry_of_the_grammar_text_parses() {
        let (ops, dtypes) = TRANSFORM_GRAMMAR.split_once(" (DTYPE: ").unwrap();
        for dtype in dtypes.trim_end_matches(')').split(", ") {
            assert_eq!(names(&format!("convert:{dtype}")).len(), 1, "{dtype}");
        }
        let entries: Vec<&str> = ops.split(", ").collect();
        assert_eq!(entries.len(), 8, "{entries:?}");
        for entry in entries {
            for optional in [false, true] {
                let text = if optional {
                    entry.replace(['[', ']'], "")
                } else {
                    entry.split('[').next().unwrap().to_owned()
                };
                let text = text
                    .replace("M1,M2,M3/S1,S2,S3", "1,2,3/4,5,6")
                    .replace("DTYPE", "f32")
                    .replace("SIZE", "4")
                    .replace("PAD", "2")
                    .replace(":P", ":0.5");
                assert_eq!(names(&text).len(), 1, "{entry}: {text}");
            }
        }
    }

    #[test]
    fn bad_ops_say_what_is_wrong() {
        for (text, reason) in [
            ("blur", "unknown op"),
            ("flip:2", "not in [0, 1]"),
            ("flip:x", "not a number"),
            ("chw:1", "takes no parameter"),
            ("normalize", "needs :imagenet"),
            ("normalize:1,2/3,4,5", "1, 3 or 4 comma-separated"),
            ("normalize:1/2,3,4", "1 means but 3 stds"),
            ("normalize:1,2,3/0,1,1", "non-zero"),
            ("normalize:imagenet:u8", "not f16, f32 or f64"),
            ("convert", "needs :DTYPE"),
            ("convert:f8", "unknown dtype"),
            ("cutout:0", "at least 1"),
            ("translate", "needs :PAD"),
            ("flip,,chw", "empty"),
            ("", "no op"),
        ] {
            let err = match parse_transforms(text) {
                Ok(ops) => panic!("{text:?} parsed into {} ops", ops.len()),
                Err(e) => e,
            };
            assert!(err.reason.contains(reason), "{text:?}: {err}");
            assert!(err.to_string().contains(TRANSFORM_GRAMMAR), "{err}");
        }
    }

    #[test]
    fn field_syntax_is_checked() {
        assert!(FieldTransforms::parse("flip").is_err());
        assert!(FieldTransforms::parse("=flip").is_err());
        let t = FieldTransforms::parse("label=squeeze").unwrap();
        assert_eq!(
            (t.field.as_str(), t.ops_text.as_str(), t.ops.len()),
            ("label", "squeeze", 1)
        );
        assert_eq!(format!("{t:?}"), "label=squeeze");
    }
}
