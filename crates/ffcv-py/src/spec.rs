//! Pipelines as the Python package describes them: per field, `None` (disabled) or a list
//! of `(name, params)` pairs whose first entry is the decoder and the rest built-in
//! transforms. `ffcv_rs/loader/plan.py` builds these from FFCV-style objects; this module
//! turns them into the facade's [`PipelineSpec`]s (and [`operation`] into the operations of
//! `crate::kernels`), refusing bad parameters with a `ValueError`.

use std::sync::Arc;

use ffcv::decode::{
    BytesDecoder, CenterCropRGBImageDecoder, FloatDecoder, IntDecoder, JsonDecoder, NdArrayDecoder,
    OverCap, RandomResizedCropRGBImageDecoder, SimpleRGBImageDecoder, VarArrayDecoder,
};
use ffcv::jit::{ElemType, Operation};
use ffcv::transforms::{self, colour};
use ffcv::{Decoder, PipelineSpec};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// One `(name, params)` pair.
pub type Op<'py> = (String, Bound<'py, PyDict>);

/// Parameter `key` of `op`, or `default` when absent or `None`.
fn param<'py, T: FromPyObjectOwned<'py>>(
    op: &str,
    params: &Bound<'py, PyDict>,
    key: &str,
    default: Option<T>,
) -> PyResult<T> {
    match params.get_item(key)? {
        Some(v) if !v.is_none() => v.extract::<T>().map_err(|e| {
            PyTypeError::new_err(format!(
                "{op}: parameter {key:?}: {}",
                Into::<PyErr>::into(e)
            ))
        }),
        _ => {
            default.ok_or_else(|| PyTypeError::new_err(format!("{op}: missing parameter {key:?}")))
        }
    }
}

fn size(op: &str, params: &Bound<'_, PyDict>) -> PyResult<(u32, u32)> {
    let (h, w): (u32, u32) = param(op, params, "output_size", None)?;
    if h == 0 || w == 0 {
        return Err(PyValueError::new_err(format!(
            "{op}: output_size ({h}, {w}) has a zero side"
        )));
    }
    Ok((h, w))
}

fn range(
    op: &str,
    params: &Bound<'_, PyDict>,
    key: &str,
    default: (f64, f64),
) -> PyResult<(f64, f64)> {
    let (lo, hi): (f64, f64) = param(op, params, key, Some(default))?;
    if !(lo > 0.0 && lo <= hi && hi.is_finite()) {
        return Err(PyValueError::new_err(format!(
            "{op}: {key} ({lo}, {hi}) must satisfy 0 < low <= high"
        )));
    }
    Ok((lo, hi))
}

/// The pipeline-jit element type named by a NumPy dtype name.
pub fn dtype(op: &str, name: &str) -> PyResult<ElemType> {
    Ok(match name {
        "uint8" | "u1" | "|u1" => ElemType::U8,
        "uint16" | "u2" | "<u2" => ElemType::U16,
        "float16" | "f2" | "<f2" => ElemType::F16,
        "int32" | "i4" | "<i4" => ElemType::I32,
        "int64" | "i8" | "<i8" => ElemType::I64,
        "float32" | "f4" | "<f4" => ElemType::F32,
        "float64" | "f8" | "<f8" => ElemType::F64,
        other => {
            return Err(PyValueError::new_err(format!(
                "{op}: dtype {other:?} is not supported here (uint8, int32, int64, float16, \
                 float32, float64)"
            )));
        }
    })
}

/// The facade decoder named `name` with `params` (a `ValueError`/`TypeError` for bad ones).
pub fn decoder(name: &str, params: &Bound<'_, PyDict>) -> PyResult<Arc<dyn Decoder>> {
    Ok(match name {
        "IntDecoder" => Arc::new(IntDecoder),
        "SampleIdDecoder" => Arc::new(crate::sample_ids::SampleIdDecoder),
        "FloatDecoder" => Arc::new(FloatDecoder),
        "BytesDecoder" => Arc::new(BytesDecoder),
        "JSONDecoder" => Arc::new(JsonDecoder),
        "NDArrayDecoder" => Arc::new(NdArrayDecoder),
        "VarArrayDecoder" => {
            let cap: Option<u64> = param(name, params, "cap", Some(None))?;
            let truncate: bool = param(name, params, "truncate", Some(false))?;
            let mut d = VarArrayDecoder::new();
            if let Some(cap) = cap {
                d = d.cap(cap).over_cap(if truncate {
                    OverCap::Truncate
                } else {
                    OverCap::Error
                });
            }
            Arc::new(d)
        }
        "SimpleRGBImageDecoder" => Arc::new(SimpleRGBImageDecoder),
        "SimpleImageDecoder" => Arc::new(ffcv::decode::ImageDecoder::simple()),
        "CenterCropImageDecoder" => {
            let ratio: f64 = param(name, params, "ratio", Some(224.0 / 256.0))?;
            if !(ratio > 0.0 && ratio <= 1.0) {
                return Err(PyValueError::new_err(format!(
                    "{name}: ratio {ratio} must be in (0, 1]"
                )));
            }
            Arc::new(ffcv::decode::ImageDecoder::center_crop(
                size(name, params)?,
                ratio,
            ))
        }
        "RandomResizedCropImageDecoder" => {
            let (slo, shi) = range(name, params, "scale", (0.08, 1.0))?;
            let (rlo, rhi) = range(name, params, "ratio", (3.0 / 4.0, 4.0 / 3.0))?;
            let crop = ffcv::image::RandomResizedCrop {
                scale: (slo, shi),
                ratio: (rlo, rhi),
            };
            Arc::new(ffcv::decode::ImageDecoder::random_resized_crop_with(
                size(name, params)?,
                crop,
            ))
        }
        "CenterCropRGBImageDecoder" => {
            let ratio: f64 = param(
                name,
                params,
                "ratio",
                Some(CenterCropRGBImageDecoder::DEFAULT_RATIO),
            )?;
            if !(ratio > 0.0 && ratio <= 1.0) {
                return Err(PyValueError::new_err(format!(
                    "{name}: ratio {ratio} must be in (0, 1]"
                )));
            }
            let dct: bool = param(name, params, "dct_downscale", Some(false))?;
            Arc::new(CenterCropRGBImageDecoder::new(size(name, params)?, ratio).dct_downscale(dct))
        }
        "RandomResizedCropRGBImageDecoder" => {
            let (slo, shi) = range(name, params, "scale", (0.08, 1.0))?;
            let (rlo, rhi) = range(name, params, "ratio", (3.0 / 4.0, 4.0 / 3.0))?;
            let dct: bool = param(name, params, "dct_downscale", Some(false))?;
            Arc::new(
                RandomResizedCropRGBImageDecoder::new(size(name, params)?)
                    .scale(slo, shi)
                    .ratio(rlo, rhi)
                    .dct_downscale(dct),
            )
        }
        other => {
            return Err(PyTypeError::new_err(format!(
                "{other} is not a decoder ffcv_rs knows"
            )));
        }
    })
}

fn fill(op: &str, params: &Bound<'_, PyDict>) -> PyResult<[u8; 3]> {
    let (r, g, b): (u8, u8, u8) = param(op, params, "fill", Some((0, 0, 0)))?;
    Ok([r, g, b])
}

/// A parameter the transform's constructor refused, as Python's `ValueError`.
fn value_error(e: transforms::BadParameter) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The built-in transform `name` with `params`, as a pipeline-jit operation: for the
/// loader's pipelines ([`pipeline`]) and for the Python part's native runs
/// (`crate::kernels::BatchTransforms`).
pub fn operation(name: &str, params: &Bound<'_, PyDict>) -> PyResult<Arc<dyn Operation>> {
    Ok(match name {
        "RandomHorizontalFlip" => {
            let p: f64 = param(name, params, "flip_prob", Some(0.5))?;
            Arc::new(transforms::random_horizontal_flip(p).map_err(value_error)?)
        }
        "NormalizeImage" => {
            // One mean and std per channel: 3 for RGB, 1 or 4 for an ImageField's kinds.
            let mean: Vec<f64> = param(name, params, "mean", None)?;
            let std: Vec<f64> = param(name, params, "std", None)?;
            let t: String = param(name, params, "dtype", Some("float32".into()))?;
            let dt = dtype(name, &t)?;
            Arc::new(transforms::normalize_channels(&mean, &std, dt).map_err(value_error)?)
        }
        "Cutout" => {
            let crop: usize = param(name, params, "crop_size", None)?;
            Arc::new(transforms::cutout(crop, fill(name, params)?))
        }
        "RandomTranslate" => {
            let padding: usize = param(name, params, "padding", None)?;
            Arc::new(transforms::random_translate(padding, fill(name, params)?))
        }
        "Squeeze" => Arc::new(transforms::squeeze()),
        "Convert" => {
            let t: String = param(name, params, "dtype", None)?;
            Arc::new(transforms::convert(dtype(name, &t)?))
        }
        "ReplaceLabel" => {
            let indices: Vec<u64> = param(name, params, "indices", None)?;
            let label: i64 = param(name, params, "new_label", None)?;
            Arc::new(transforms::ReplaceLabel::new(indices, label))
        }
        "ToCHW" => Arc::new(transforms::to_torch_image()),
        "RandomBrightness" | "RandomContrast" | "RandomSaturation" => {
            let magnitude: f64 = param(name, params, "magnitude", None)?;
            let p: f64 = param(name, params, "p", Some(0.5))?;
            let made = match name {
                "RandomBrightness" => colour::random_brightness(magnitude, p),
                "RandomContrast" => colour::random_contrast(magnitude, p),
                _ => colour::random_saturation(magnitude, p),
            };
            Arc::new(made.map_err(value_error)?)
        }
        "RandomResizedCrop" => {
            let scale = range(name, params, "scale", (0.08, 1.0))?;
            let ratio = range(name, params, "ratio", (3.0 / 4.0, 4.0 / 3.0))?;
            let size: usize = param(name, params, "size", None)?;
            Arc::new(
                transforms::resized_crop::random_resized_crop(size, scale, ratio)
                    .map_err(value_error)?,
            )
        }
        "View" => {
            let t: String = param(name, params, "dtype", None)?;
            Arc::new(transforms::view::View(dtype(name, &t)?))
        }
        "Poison" => {
            let (h, w): (usize, usize) = param(name, params, "size", None)?;
            let mask: Vec<f64> = param(name, params, "mask", None)?;
            let alpha: Vec<f64> = param(name, params, "alpha", None)?;
            let indices: Vec<u64> = param(name, params, "indices", None)?;
            let clamp: (f64, f64) = param(name, params, "clamp", Some((0.0, 255.0)))?;
            let single: bool = param(name, params, "alpha_float32", Some(false))?;
            let poison = transforms::Poison::new(h, w, &mask, &alpha, indices, clamp)
                .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))?;
            Arc::new(if single {
                poison.alpha_in_float32()
            } else {
                poison
            })
        }
        other => {
            return Err(PyTypeError::new_err(format!(
                "{other} is not a built-in transform ffcv_rs knows"
            )));
        }
    })
}

/// The facade pipeline for `ops` (decoder first). `json`: the field is a JSONField, whose
/// decoder in FFCV is the `BytesDecoder` (here the JSON decoder, with the same rows).
pub fn pipeline(field: &str, ops: &[Op<'_>], json: bool) -> PyResult<PipelineSpec> {
    let Some(((dname, dparams), rest)) = ops.split_first() else {
        return Err(PyValueError::new_err(format!(
            "field {field:?}: a pipeline starts with a decoder"
        )));
    };
    let dname = if json && dname == "BytesDecoder" {
        "JSONDecoder"
    } else {
        dname.as_str()
    };
    let mut spec = PipelineSpec::from_arc(decoder(dname, dparams)?);
    for (name, params) in rest {
        spec = spec.then_arc(operation(name, params)?);
    }
    Ok(spec)
}
