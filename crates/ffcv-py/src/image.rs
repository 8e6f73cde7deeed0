//! `_native.encode_jpeg` and `_native.downscale`: the writer's JPEG encoder and its
//! `max_resolution` resize, for `ffcv_rs.fields.rgb_image.encode_jpeg` and `resizer`
//! (FFCV's public helpers of the same names) and for users' own `Field.encode`.

use ffcv::image::{RgbImage, downscale_to_max_resolution};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

fn image(pixels: &[u8], height: u32, width: u32) -> PyResult<RgbImage> {
    RgbImage::new(width, height, pixels.to_vec()).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The packed RGB `height x width` image `pixels` as a baseline 4:2:0 JPEG at `quality`
/// (1..=100): the bytes FFCV's writer gets from OpenCV's `imencode`.
#[pyfunction]
pub fn encode_jpeg<'py>(
    py: Python<'py>,
    pixels: &[u8],
    height: u32,
    width: u32,
    quality: u8,
) -> PyResult<Bound<'py, PyBytes>> {
    let image = image(pixels, height, width)?;
    let jpeg = py
        .detach(|| ffcv::image::encode_jpeg(&image, quality))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyBytes::new(py, &jpeg))
}

/// FFCV's `resizer(image, max_resolution)`: `None` when the longest side is at most
/// `max_resolution`, else `(height, width, pixels)` scaled down with `INTER_AREA`.
#[pyfunction]
pub fn downscale<'py>(
    py: Python<'py>,
    pixels: &[u8],
    height: u32,
    width: u32,
    max_resolution: u32,
) -> PyResult<Option<(u32, u32, Bound<'py, PyBytes>)>> {
    let image = image(pixels, height, width)?;
    let smaller = py
        .detach(|| downscale_to_max_resolution(&image, max_resolution))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(smaller.map(|s| (s.height(), s.width(), PyBytes::new(py, s.pixels()))))
}

/// The kind of a writer's `ImageField` from its `channels` (default 3) and `bits`
/// (default 8), checked.
pub(crate) fn image_kind(
    channels: Option<u8>,
    bits: Option<u8>,
) -> Result<ffcv::format::ImageArgs, String> {
    ffcv::format::ImageArgs::new(channels.unwrap_or(3), bits.unwrap_or(8))
}

/// What an `ImageField` of kind `args` stores for `bytes` (a JPEG or PNG file, or a raw
/// sample from `ImageField._plain`): see `ffcv::image::store_image_bytes`.
pub(crate) fn stored_image(
    bytes: &[u8],
    args: ffcv::format::ImageArgs,
) -> Result<ffcv::format::FieldValue, String> {
    ffcv::image::store_image_bytes(bytes, args)
        .map(ffcv::format::FieldValue::Bytes)
        .map_err(|e| e.to_string())
}
