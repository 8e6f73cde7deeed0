//! `_native.write_dataset`: beton-io's `DatasetWriter` fed by a Python callable.
//!
//! The writer threads call the callable (taking the GIL) for one sample's plain values
//! (`ffcv_rs/writer.py` turns dataset items into ints, floats, bytes, JSON text and raw
//! pixels), then encode images and fill pages without the GIL. The call that starts the
//! write releases the GIL until the file is complete.

use std::sync::Mutex;

use ffcv::format::{
    DatasetWriter, FieldSpec, FieldType, FieldValue, JsonValue, NdArrayArgs, NumpyDtype, RgbImage,
    SampleSource, SourceError,
};
use ffcv::image::{ImageMode, RgbImageEncoder, WriteMode};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors;

/// How one field's plain value becomes a [`FieldValue`].
enum Column {
    Int,
    Float,
    Bytes,
    /// NDArray or TorchTensor: exactly this many bytes.
    Array(usize),
    Json,
    Image(RgbImageEncoder),
}

/// The samples: `get(index)` returns one plain value per field.
struct PySource {
    get: Py<PyAny>,
    len: u64,
    columns: Vec<Column>,
    names: Vec<String>,
    /// The first Python exception the dataset raised, re-raised after the write stops.
    failure: Mutex<Option<PyErr>>,
}

fn source_error(message: String) -> SourceError {
    message.into()
}

impl PySource {
    fn convert(&self, index: u64, f: usize, v: &Bound<'_, PyAny>) -> Result<FieldValue, String> {
        let name = &self.names[f];
        let bad = |what: &str| format!("sample {index}, field {name:?}: {what}");
        Ok(match &self.columns[f] {
            Column::Int => FieldValue::Int(v.extract::<i64>().map_err(|_| bad("expected an int"))?),
            Column::Float => {
                FieldValue::Float(v.extract::<f64>().map_err(|_| bad("expected a float"))?)
            }
            Column::Bytes => FieldValue::Bytes(
                v.cast::<PyBytes>()
                    .map_err(|_| bad("expected bytes"))?
                    .as_bytes()
                    .to_vec(),
            ),
            Column::Array(n) => {
                let b = v
                    .cast::<PyBytes>()
                    .map_err(|_| bad("expected array bytes"))?;
                if b.as_bytes().len() != *n {
                    return Err(bad(&format!(
                        "array has {} bytes, the field's dtype and shape need {n}",
                        b.as_bytes().len()
                    )));
                }
                FieldValue::NdArray(b.as_bytes().to_vec())
            }
            Column::Json => {
                let text: String = v.extract().map_err(|_| bad("expected JSON text"))?;
                FieldValue::Json(JsonValue::parse(&text).map_err(|e| bad(&e))?)
            }
            Column::Image(_) => {
                let (h, w, pixels): (u32, u32, Vec<u8>) = v
                    .extract()
                    .map_err(|_| bad("expected (height, width, RGB bytes)"))?;
                // Encoded below, without the GIL; carry the pixels as a raw image for now.
                let (Ok(width), Ok(height)) = (u16::try_from(w), u16::try_from(h)) else {
                    return Ok(FieldValue::Bytes(encode_marker(h, w, pixels)));
                };
                FieldValue::RgbImage(RgbImage::Raw {
                    width,
                    height,
                    pixels,
                })
            }
        })
    }
}

/// An image larger than u16 sides still goes to the encoder (which may downscale it with
/// `max_resolution`): its size travels in front of the pixels.
fn encode_marker(h: u32, w: u32, pixels: Vec<u8>) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + pixels.len());
    v.extend_from_slice(&h.to_le_bytes());
    v.extend_from_slice(&w.to_le_bytes());
    v.extend_from_slice(&pixels);
    v
}

impl SampleSource for PySource {
    fn num_samples(&self) -> u64 {
        self.len
    }

    fn sample(&self, index: u64) -> Result<Vec<FieldValue>, SourceError> {
        let plain = Python::attach(|py| -> Result<Vec<FieldValue>, String> {
            let got = self.get.bind(py).call1((index,)).map_err(|e| {
                let message = e.to_string();
                let mut first = self.failure.lock().unwrap_or_else(|p| p.into_inner());
                first.get_or_insert(e);
                message
            })?;
            let items: Vec<Bound<'_, PyAny>> = got
                .extract()
                .map_err(|_| format!("sample {index}: expected one value per field"))?;
            if items.len() != self.columns.len() {
                return Err(format!(
                    "sample {index}: {} values for {} fields",
                    items.len(),
                    self.columns.len()
                ));
            }
            items
                .iter()
                .enumerate()
                .map(|(f, v)| self.convert(index, f, v))
                .collect()
        })
        .map_err(source_error)?;
        // Image encoding (resize, JPEG) runs here, on the writer thread, without the GIL.
        plain
            .into_iter()
            .zip(&self.columns)
            .enumerate()
            .map(|(f, (value, column))| match column {
                Column::Image(encoder) => encode_image(encoder, index, &self.names[f], value),
                _ => Ok(value),
            })
            .collect()
    }
}

fn encode_image(
    encoder: &RgbImageEncoder,
    index: u64,
    name: &str,
    value: FieldValue,
) -> Result<FieldValue, SourceError> {
    let bad = |e: String| source_error(format!("sample {index}, field {name:?}: {e}"));
    let (w, h, pixels) = match value {
        FieldValue::RgbImage(RgbImage::Raw {
            width,
            height,
            pixels,
        }) => (u32::from(width), u32::from(height), pixels),
        FieldValue::Bytes(marked) if marked.len() >= 8 => {
            let h = u32::from_le_bytes(marked[0..4].try_into().expect("4 bytes"));
            let w = u32::from_le_bytes(marked[4..8].try_into().expect("4 bytes"));
            (w, h, marked[8..].to_vec())
        }
        _ => return Err(bad("not an image".into())),
    };
    let image = ffcv::image::RgbImage::new(w, h, pixels).map_err(|e| bad(e.to_string()))?;
    // Only `write_mode="proportion"` draws; one generator per sample keeps the choice
    // independent of the thread that writes it.
    let mut rng =
        rand_pcg::Pcg64::new(u128::from(index), 0xa02b_dbf7_bb3c_0a7a_c28f_a16a_64ab_f96d);
    let encoded = encoder
        .encode(&image, &mut rng)
        .map_err(|e| bad(e.to_string()))?;
    Ok(FieldValue::RgbImage(match encoded.mode {
        ImageMode::Raw => RgbImage::Raw {
            width: encoded.width,
            height: encoded.height,
            pixels: encoded.data,
        },
        ImageMode::Jpeg => RgbImage::Jpeg {
            width: encoded.width,
            height: encoded.height,
            bytes: encoded.data,
        },
    }))
}

fn get<'py, T: FromPyObjectOwned<'py>>(
    field: &str,
    params: &Bound<'py, PyDict>,
    key: &str,
) -> PyResult<Option<T>> {
    match params.get_item(key)? {
        Some(v) if !v.is_none() => v.extract::<T>().map(Some).map_err(|e| {
            PyValueError::new_err(format!(
                "field {field:?}: {key}: {}",
                Into::<PyErr>::into(e)
            ))
        }),
        _ => Ok(None),
    }
}

fn column(
    py: Python<'_>,
    name: &str,
    kind: &str,
    params: &Bound<'_, PyDict>,
) -> PyResult<(FieldType, Column)> {
    let array = |torch: bool| -> PyResult<(FieldType, Column)> {
        let descr: String = get(name, params, "descr")?
            .ok_or_else(|| PyValueError::new_err(format!("field {name:?}: no dtype")))?;
        let shape: Vec<u64> = get(name, params, "shape")?.unwrap_or_default();
        let dtype = NumpyDtype::from_descr_json(descr.as_bytes())
            .map_err(|e| errors::config(py, format!("field {name:?}: dtype: {e}")))?;
        let n = shape
            .iter()
            .try_fold(dtype.item_size(), |a, &d| a.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| errors::config(py, format!("field {name:?}: shape too large")))?;
        let args = NdArrayArgs::new(dtype, shape);
        let t = if torch {
            FieldType::TorchTensor(args)
        } else {
            FieldType::NdArray(args)
        };
        Ok((t, Column::Array(n)))
    };
    Ok(match kind {
        "int" => (FieldType::Int, Column::Int),
        "float" => (FieldType::Float, Column::Float),
        "bytes" => (FieldType::Bytes, Column::Bytes),
        "json" => (FieldType::Json, Column::Json),
        "ndarray" => array(false)?,
        "torch" => array(true)?,
        "rgb" => {
            let mode: String = get(name, params, "write_mode")?.unwrap_or_else(|| "raw".into());
            let write_mode = match mode.as_str() {
                "raw" => WriteMode::Raw,
                "jpg" => WriteMode::Jpg,
                "smart" => WriteMode::Smart {
                    threshold: get(name, params, "smart_threshold")?,
                },
                "proportion" => WriteMode::Proportion {
                    compress_probability: get(name, params, "compress_probability")?.unwrap_or(0.5),
                },
                other => {
                    return Err(errors::config(
                        py,
                        format!(
                            "field {name:?}: write_mode {other:?} is not raw, jpg, smart or \
                             proportion"
                        ),
                    ));
                }
            };
            let jpeg_quality: u8 = get(name, params, "jpeg_quality")?.unwrap_or(90);
            if !(1..=100).contains(&jpeg_quality) {
                return Err(errors::config(
                    py,
                    format!("field {name:?}: jpeg_quality {jpeg_quality} is not in 1..=100"),
                ));
            }
            let encoder = RgbImageEncoder {
                write_mode,
                max_resolution: get(name, params, "max_resolution")?,
                jpeg_quality,
            };
            (FieldType::RgbImage, Column::Image(encoder))
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "field {name:?}: unknown field kind {other:?}"
            )));
        }
    })
}

/// Writes `num_samples` samples, sample `i` being `get(i)`, to `path`; calls
/// `progress(samples_done)` after each chunk. Returns `(samples, pages, file size)`.
#[pyfunction]
#[pyo3(signature = (path, fields, get, num_samples, page_size, num_workers, chunksize, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn write_dataset(
    py: Python<'_>,
    path: String,
    fields: Vec<(String, String, Bound<'_, PyDict>)>,
    get: Py<PyAny>,
    num_samples: u64,
    page_size: u64,
    num_workers: usize,
    chunksize: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<(u64, u64, u64)> {
    let mut specs = Vec::new();
    let mut columns = Vec::new();
    let mut names = Vec::new();
    for (name, kind, params) in &fields {
        let (t, c) = column(py, name, kind, params)?;
        specs.push(FieldSpec::new(name.clone(), t));
        columns.push(c);
        names.push(name.clone());
    }
    let mut writer = DatasetWriter::new(&path, specs)
        .and_then(|w| w.with_page_size(page_size))
        .map_err(|e| errors::from_format(py, e))?
        .with_num_workers(num_workers)
        .with_chunk_size(chunksize);
    if let Some(p) = progress {
        writer = writer.with_progress(move |done| {
            Python::attach(|py| {
                // A failing progress bar must not fail the write.
                let _ = p.bind(py).call1((done,));
            });
        });
    }
    let source = PySource {
        get,
        len: num_samples,
        columns,
        names,
        failure: Mutex::new(None),
    };
    let written = py.detach(|| writer.write(&source));
    match written {
        Ok(s) => Ok((s.num_samples, s.num_pages, s.file_size)),
        Err(e) => {
            let first = source
                .failure
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            match first {
                // The dataset's own exception, as FFCV would let it through.
                Some(original) => Err(original),
                None => Err(errors::from_format(py, e)),
            }
        }
    }
}
