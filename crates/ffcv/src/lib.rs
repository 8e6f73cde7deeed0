//! The `ffcv` facade: FFCV's loader, decoders and transforms over the ffcv-rs crates.
//!
//! # Overview
//!
//! For now this crate holds the image half of the decoders and of the writer
//! ([`image`]): JPEG decoding into caller-owned buffers, FFCV's crop rules
//! ([`image::center_crop_box`], [`image::random_resized_crop_box`]), OpenCV's
//! `INTER_AREA` resize ([`image::AreaResizer`]), and `RGBImageField`-style
//! encoding ([`image::RgbImageEncoder`]). The loader joins them to the
//! lower crates later.
//!
//! # Example
//!
//! Decode a JPEG, center-crop it as `CenterCropRGBImageDecoder` does and
//! resize the crop to 32x32:
//!
//! ```
//! use ffcv::image::{center_crop_box, decode_jpeg_into, encode_jpeg, AreaResizer, RgbImage};
//!
//! # fn main() -> Result<(), ffcv::image::ImageError> {
//! // A 48x40 gradient, written as a quality-90 JPEG like FFCV's writer does.
//! let mut pixels = Vec::new();
//! for y in 0..40u32 {
//!     for x in 0..48u32 {
//!         pixels.extend_from_slice(&[(x * 5) as u8, (y * 6) as u8, 128]);
//!     }
//! }
//! let source = RgbImage::new(48, 40, pixels)?;
//! let jpeg = encode_jpeg(&source, 90)?;
//!
//! let mut full = vec![0u8; 48 * 40 * 3];
//! let (h, w) = decode_jpeg_into(&jpeg, &mut full)?;
//! assert_eq!((h, w), (40, 48));
//!
//! let crop = center_crop_box(h, w, 224.0 / 256.0);
//! assert_eq!((crop.i, crop.j, crop.h, crop.w), (2, 6, 35, 35));
//!
//! let mut resizer = AreaResizer::new();
//! let mut out = [0u8; 32 * 32 * 3];
//! resizer.resize_crop_into(&full, h, w, crop, &mut out, 32, 32)?;
//! # Ok(())
//! # }
//! ```

pub mod image;
