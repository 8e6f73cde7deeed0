//! RGB images as FFCV handles them: JPEG decode bit-identical to FFCV's, its crop rules,
//! OpenCV-exact `INTER_AREA` resize, `RGBImageField` encoding and synthetic images.
//!
//! The crate has no tie to the loader: it works on packed RGB (`HxWx3`, `u8`, row-major)
//! buffers and JPEG bytes, so it serves a writer, a viewer or a test on its own. The
//! `ffcv` facade's image decoders are thin wrappers over [`RgbDecoderKernel`]; its only
//! workspace dependency is beton-io, for the value an encoded image becomes in a
//! `DatasetWriter` (`From<EncodedImage> for beton_io::FieldValue`).
//!
//! # Overview
//!
//! The per-sample functions the loader calls take caller-owned output and scratch
//! buffers, so the hot path allocates nothing once the buffers have grown to the largest
//! image:
//!
//! - [`JpegDecoder::decode_into`] / [`decode_jpeg_into`]: JPEG bytes to RGB,
//!   bit-identical to libjpeg-turbo's `TJFLAG_FASTDCT` decode for baseline
//!   files (FFCV's decode), with `jpeg-decoder` for other kinds;
//! - [`JpegFrame`]: a JPEG's frame header (size, components, sampling), parsed in one
//!   place for every decoder here and for the loader's pre-decode checks;
//! - [`JpegFrame`]: a JPEG's frame header (size, components, sampling), parsed in one
//!   place for every decoder here and for the loader's pre-decode checks;
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
//!
//! # Example
//!
//! ```
//! use rgb_image::{
//!     AreaResizer, JpegDecoder, JpegFrame, SyntheticImageSpec, center_crop_box, synthetic_jpeg,
//! };
//!
//! // A deterministic test image, JPEG-encoded as FFCV's writer would (quality 90).
//! let spec = SyntheticImageSpec { min_side: 40, max_side: 64 };
//! let (jpeg, width, height) = synthetic_jpeg(0, 7, spec, 90)?;
//! let frame = JpegFrame::find(&jpeg).expect("a frame header");
//! assert_eq!((u32::from(frame.width), u32::from(frame.height)), (width, height));
//! assert_eq!(frame.min_scan_bytes().map(|min| min < jpeg.len() as u64), Some(true));
//!
//! // Decode at full size (libjpeg-turbo's fast IDCT, bit for bit) ...
//! let mut pixels = vec![0u8; height as usize * width as usize * 3];
//! let (h, w) = JpegDecoder::new().decode_into(&jpeg, &mut pixels)?;
//! assert_eq!((h, w), (height, width));
//!
//! // ... then FFCV's centre crop, resized to 32x32 with OpenCV's INTER_AREA.
//! let crop = center_crop_box(h, w, 224.0 / 256.0);
//! let mut out = vec![0u8; 32 * 32 * 3];
//! AreaResizer::new().resize_crop_into(&pixels, h, w, crop, &mut out, 32, 32)?;
//! assert!(out.iter().any(|&v| v != out[0]));
//! # Ok::<(), rgb_image::ImageError>(())
//! ```

mod accurate;
mod crop;
mod encode;
mod entropy;
mod file;
mod folder;
mod frame;
mod ifast_idct;
mod jpeg;
mod kernel;
mod libjpeg_enc;
mod pixels;
mod resize;
mod resize_kinds;
mod resize_rows;
mod scaled_idct;
mod segments;
mod simd;
mod simd_resize;
#[cfg(all(test, target_arch = "x86_64"))]
mod simd_tests;
mod synthetic;
mod turbo;
mod views;

pub use accurate::decode_jpeg_accurate;
pub use crop::{CropBox, RandomResizedCrop, center_crop_box, random_resized_crop_box};
pub use encode::{
    EncodedImage, ImageMode, RgbImageEncoder, WriteMode, downscale_to_max_resolution,
    sample_generator,
};
pub use file::{read_image_bytes, read_image_file};
pub use folder::{FolderError, FolderImage, ImageFolder, Unreadable};
pub use frame::{FrameComponent, JpegFrame};
pub use jpeg::{JpegDecoder, JpegInfo, decode_jpeg, decode_jpeg_into, encode_jpeg, jpeg_info};
pub use kernel::{ImageOut, RgbDecoderKernel, RgbDecoderKind, StoredImage};
pub use libjpeg_enc::{LibjpegEncodeError, MAX_SIDE as JPEG_MAX_SIDE, encode_like_libjpeg};
pub use pixels::{
    PixelDecoderKernel, PixelImage, StoredFormat, StoredHeader, encode_png, encode_raw,
    native_args, read_pixels_bytes, store_image_bytes, stored_header,
};
pub use resize::{AreaResizer, resize_area_into};
pub use resize_kinds::KindResizer;
pub use scaled_idct::dct_scaled_crop;
pub use synthetic::{SyntheticImageSpec, synthetic_image, synthetic_jpeg};
pub use views::{
    ENTROPY_COST, ImageView, PIXEL_COST, ViewsDecode, ViewsKernel, ViewsPolicy, prefers_once,
    union_box,
};

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
