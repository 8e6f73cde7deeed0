//! Reading JPEG and PNG files into RGB for `ffcv write image-folder`.

use super::{ImageError, Result, RgbImage, decode_jpeg_accurate, rgb_len};
use std::path::Path;

/// Largest decoded image accepted from a file: 1 GiB of RGB pixels
/// (about 18k x 18k), so a hostile header cannot ask for more.
const MAX_DECODED_BYTES: usize = 1 << 30;

/// Reads and decodes an image file (JPEG or PNG, recognised by content, not
/// by extension) to RGB as `PIL.Image.open(p).convert("RGB")` does: see
/// [`read_image_bytes`].
pub fn read_image_file(path: impl AsRef<Path>) -> Result<RgbImage> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    read_image_bytes(&bytes).map_err(|e| ImageError::File {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
}

/// Decodes JPEG or PNG bytes (recognised by their signature) to RGB, the
/// pixels `PIL.Image.open(p).convert("RGB")` gives (Pillow 13):
///
/// - JPEG: [`super::decode_jpeg_accurate`] (libjpeg's accurate IDCT and fancy
///   upsampling; baseline and progressive; gray, YCbCr, RGB, CMYK, YCCK);
/// - PNG: every colour type and bit depth; palettes expanded, transparency
///   and alpha dropped, sub-byte gray scaled to 0..=255 (as PIL's `L;2`,
///   `L;4`), and 16-bit samples reduced to their high byte. That is PIL's
///   rule for 16-bit RGB(A) and gray+alpha; for 16-bit gray PIL clips the
///   value to 255 instead (`I;16` to `L`), which turns almost every such
///   image white, so we keep the high byte there too: the one documented
///   difference from PIL.
///
/// EXIF orientation is not applied (PIL's `convert` does not apply it).
pub fn read_image_bytes(bytes: &[u8]) -> Result<RgbImage> {
    if bytes.starts_with(&[0xFF, 0xD8]) {
        decode_jpeg_accurate(bytes, MAX_DECODED_BYTES)
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        decode_png(bytes)
    } else {
        Err(ImageError::UnknownFormat {
            head: bytes.iter().take(8).copied().collect(),
        })
    }
}

fn png_error(e: impl std::fmt::Display) -> ImageError {
    ImageError::PngDecode {
        message: e.to_string(),
    }
}

fn decode_png(bytes: &[u8]) -> Result<RgbImage> {
    let mut decoder = png::Decoder::new_with_limits(
        std::io::Cursor::new(bytes),
        png::Limits {
            bytes: MAX_DECODED_BYTES,
        },
    );
    // Palette -> RGB(A), 16-bit -> 8-bit, sub-byte gray -> 8-bit.
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().map_err(png_error)?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| png_error("image too large"))?;
    let mut buf = vec![0u8; size];
    let frame = reader.next_frame(&mut buf).map_err(png_error)?;
    let (w, h) = (frame.width, frame.height);
    let data = &buf[..frame.buffer_size()];
    let mut rgb = Vec::with_capacity(rgb_len(h, w));
    match frame.color_type {
        png::ColorType::Rgb => rgb.extend_from_slice(data),
        png::ColorType::Rgba => {
            for p in data.chunks_exact(4) {
                rgb.extend_from_slice(&p[..3]);
            }
        }
        png::ColorType::Grayscale => {
            for &l in data {
                rgb.extend_from_slice(&[l, l, l]);
            }
        }
        png::ColorType::GrayscaleAlpha => {
            for p in data.chunks_exact(2) {
                rgb.extend_from_slice(&[p[0], p[0], p[0]]);
            }
        }
        png::ColorType::Indexed => return Err(png_error("palette was not expanded")),
    }
    RgbImage::new(w, h, rgb)
}
