//! RGB images as FFCV handles them: JPEG decode, crop rules, `INTER_AREA` resize, encoding.
//!
//! Everything here works on packed RGB (`HxWx3`, `u8`, row-major) buffers.
//! The per-sample functions the loader calls as native kernels take
//! caller-owned output and scratch buffers, so the hot path allocates nothing
//! once the buffers have grown to the largest image:
//!
//! - [`JpegDecoder::decode_into`] / [`decode_jpeg_into`]: JPEG bytes to RGB,
//!   bit-identical to libjpeg-turbo's `TJFLAG_FASTDCT` decode for baseline
//!   files (FFCV's decode), with `jpeg-decoder` for other kinds;
//! - [`center_crop_box`] and [`random_resized_crop_box`]: FFCV's
//!   `get_center_crop` and `get_random_crop` rules;
//! - [`AreaResizer`]: `cv::resize(..., INTER_AREA)` reproduced bit for bit,
//!   with its coefficient tables kept between calls of the same size;
//! - [`RgbDecoderKernel::decode_sample`]: the three together as FFCV's
//!   `SimpleRGBImageDecoder`, `CenterCropRGBImageDecoder` and
//!   `RandomResizedCropRGBImageDecoder` do per sample ([`RgbDecoderKind`]).
//!
//! The writer side is [`RgbImageEncoder`] (FFCV's `RGBImageField.encode`:
//! raw / jpg / smart / proportion, `max_resolution`, `jpeg_quality`), plus
//! [`ImageFolder`] and [`read_image_file`] for image folders (decoded as
//! `PIL.Image.open(p).convert("RGB")` does, JPEGs by
//! [`decode_jpeg_accurate`], not the loader's fast IDCT) and
//! [`synthetic_image`] for generated datasets.

mod accurate;
mod crop;
mod encode;
mod file;
mod folder;
mod jpeg;
mod kernel;
mod libjpeg_enc;
mod resize;
mod simd;
#[cfg(all(test, target_arch = "x86_64"))]
mod simd_tests;
mod synthetic;
mod turbo;

pub use accurate::decode_jpeg_accurate;
pub use crop::{CropBox, RandomResizedCrop, center_crop_box, random_resized_crop_box};
pub use encode::{
    EncodedImage, ImageMode, RgbImageEncoder, WriteMode, downscale_to_max_resolution,
};
pub use file::{read_image_bytes, read_image_file};
pub use folder::{FolderError, FolderImage, ImageFolder, Unreadable};
pub use jpeg::{JpegDecoder, JpegInfo, decode_jpeg, decode_jpeg_into, encode_jpeg, jpeg_info};
pub use kernel::{RgbDecoderKernel, RgbDecoderKind};
pub use libjpeg_enc::{LibjpegEncodeError, MAX_SIDE as JPEG_MAX_SIDE, encode_like_libjpeg};
pub use resize::{AreaResizer, resize_area_into};
pub use synthetic::{SyntheticImageSpec, synthetic_image, synthetic_jpeg};

use std::path::PathBuf;

/// Errors of the image functions. Messages name what failed and where; the
/// loader adds the field and sample around them.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The JPEG bytes could not be decoded (corrupt, truncated, or a feature
    /// the decoder does not support).
    #[error("JPEG decode failed ({len} bytes of input): {message}")]
    JpegDecode {
        /// Length of the JPEG input.
        len: usize,
        /// What the decoder reported.
        message: String,
    },
    /// The JPEG decodes to a pixel format that has no RGB conversion here
    /// (16-bit samples, CMYK).
    #[error(
        "unsupported JPEG pixel format {format} (only 8-bit grayscale and YCbCr/RGB are decoded)"
    )]
    UnsupportedJpeg {
        /// The pixel format the decoder reported.
        format: String,
    },
    /// An output buffer is smaller than the image written into it.
    #[error(
        "output buffer too small: {height}x{width} RGB needs {needed} bytes, the buffer has {got}"
    )]
    BufferTooSmall {
        /// Image height.
        height: u32,
        /// Image width.
        width: u32,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// An input pixel buffer does not hold the `h x w x 3` bytes it claims.
    #[error(
        "pixel buffer of {got} bytes does not match a {height}x{width} RGB image ({needed} bytes)"
    )]
    PixelCount {
        /// Image height.
        height: u32,
        /// Image width.
        width: u32,
        /// Bytes expected.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// A crop box is empty or does not lie inside its image.
    #[error("crop box (i={i}, j={j}, h={h}, w={w}) is empty or outside the {height}x{width} image")]
    BadCrop {
        /// Top row of the crop.
        i: u32,
        /// Left column of the crop.
        j: u32,
        /// Crop height.
        h: u32,
        /// Crop width.
        w: u32,
        /// Image height.
        height: u32,
        /// Image width.
        width: u32,
    },
    /// A size is zero or too large (image sides are stored as `u16` in a
    /// .beton file).
    #[error("invalid image size {height}x{width}: {reason}")]
    BadSize {
        /// Height.
        height: u64,
        /// Width.
        width: u64,
        /// Why it is refused.
        reason: &'static str,
    },
    /// JPEG encoding failed.
    #[error("JPEG encode of a {height}x{width} image failed: {message}")]
    JpegEncode {
        /// Height.
        height: u32,
        /// Width.
        width: u32,
        /// What the encoder reported.
        message: String,
    },
    /// A PNG could not be decoded.
    #[error("PNG decode failed: {message}")]
    PngDecode {
        /// What the decoder reported.
        message: String,
    },
    /// An image file could not be read.
    #[error("cannot read image file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An image file failed to decode; wraps the decoder's error with the path.
    #[error("image file {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: Box<ImageError>,
    },
    /// The bytes are neither JPEG nor PNG.
    #[error("not a JPEG or PNG image (starts with {head:02x?})")]
    UnknownFormat {
        /// The first bytes of the input.
        head: Vec<u8>,
    },
    /// An encoder parameter is out of range.
    #[error("invalid image encoder setting: {0}")]
    BadSetting(String),
}

/// Result of the image functions.
pub type Result<T> = std::result::Result<T, ImageError>;

/// An owned packed RGB image (`height x width x 3` bytes, row-major).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RgbImage {
    width: u32,
    height: u32,
    pixels: Vec<u8>,
}

impl RgbImage {
    /// Wraps `pixels` as a `height x width` RGB image; fails unless it holds
    /// exactly `width * height * 3` bytes and both sides are non-zero.
    pub fn new(width: u32, height: u32, pixels: Vec<u8>) -> Result<Self> {
        if width == 0 || height == 0 {
            return Err(ImageError::BadSize {
                height: height.into(),
                width: width.into(),
                reason: "an image side is zero",
            });
        }
        let needed = rgb_len(height, width);
        if pixels.len() != needed {
            return Err(ImageError::PixelCount {
                height,
                width,
                needed,
                got: pixels.len(),
            });
        }
        Ok(Self {
            width,
            height,
            pixels,
        })
    }

    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// The packed RGB bytes.
    pub fn pixels(&self) -> &[u8] {
        &self.pixels
    }

    /// Gives the pixel bytes back.
    pub fn into_pixels(self) -> Vec<u8> {
        self.pixels
    }
}

/// Bytes of a `h x w` RGB image. `u32 * u32 * 3` fits in `usize` on the
/// 64-bit targets this crate builds for.
pub(crate) fn rgb_len(h: u32, w: u32) -> usize {
    h as usize * w as usize * 3
}
