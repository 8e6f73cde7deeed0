//! JPEG decoding to packed RGB (pure Rust) and encoding (libjpeg-turbo's
//! bytes, [`super::encode_like_libjpeg`]) the way FFCV's writer calls
//! `cv2.imencode`.
//!
//! Baseline JPEGs (all FFCV's writer produces) go through [`super::turbo`],
//! which reproduces libjpeg-turbo's `TJFLAG_FASTDCT` output; everything else
//! (progressive, arithmetic, 12-bit, unusual sampling) through the
//! `jpeg-decoder` crate. Why not a crate alone: against the fixture's
//! libjpeg-turbo decodes, `jpeg-decoder` differs by 1.06–1.11 on average and
//! at most 6 per byte, `zune-jpeg` 0.5 by 1.26–1.34 and up to 17, both with a
//! systematic +1.2 (red) / +1.4 (blue) bias: the fast IDCT truncates where
//! accurate IDCTs round, and that bias survives the resize (end-to-end mean
//! 1.26 / 0.34 / 1.45 per channel with `jpeg-decoder`, over the 1.0 target).

use super::frame::JpegFrame;
use super::turbo::{Outcome, TurboDecoder};
use super::{CropBox, ImageError, Result, RgbImage, rgb_len};
use jpeg_decoder::{Decoder, PixelFormat};

/// A JPEG decoder that keeps its working buffers between images: one per
/// worker thread, so decoding a dataset allocates only while the buffers
/// grow to the largest image.
#[derive(Default)]
pub struct JpegDecoder {
    turbo: TurboDecoder,
}

impl std::fmt::Debug for JpegDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JpegDecoder")
    }
}

impl JpegDecoder {
    /// A decoder with empty buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes `jpeg` into `out` as packed RGB and returns `(height, width)`;
    /// see [`decode_jpeg_into`].
    pub fn decode_into(&mut self, jpeg: &[u8], out: &mut [u8]) -> Result<(u32, u32)> {
        match self.turbo.decode_into(jpeg, out)? {
            Outcome::Decoded(h, w) => Ok((h, w)),
            Outcome::Unsupported => decode_general_into(jpeg, out),
        }
    }

    /// [`Self::decode_into`] for a caller that reads only the pixels inside
    /// `crop` (then resizes them, as the crop decoders do): those pixels are
    /// exactly what [`Self::decode_into`] gives, while the rest of the
    /// `height x width` image in `out` is left unspecified. The baseline path
    /// skips the IDCT, upsampling and colour conversion the crop does not
    /// depend on and stops reading the scan below the crop (so a damaged
    /// scan below the crop is not reported); other JPEGs are decoded whole. A crop that does not fit the
    /// JPEG's size decodes the whole image (the caller's size check then
    /// reports the mismatch).
    pub fn decode_region_into(
        &mut self,
        jpeg: &[u8],
        crop: CropBox,
        out: &mut [u8],
    ) -> Result<(u32, u32)> {
        match self.turbo.decode_region_into(jpeg, Some(crop), out)? {
            Outcome::Decoded(h, w) => Ok((h, w)),
            Outcome::Unsupported => decode_general_into(jpeg, out),
        }
    }

    /// The opt-in DCT-domain downscaled decode (see [`crate::dct_scaled_crop`]): `jpeg`
    /// decoded at `1 / 2^shift` scale (`shift` 1 to 3) into `out` as a
    /// `ceil(height / 2^shift) x ceil(width / 2^shift)` RGB image, of which only the
    /// pixels inside `crop` (in the reduced image's coordinates) are specified. Its
    /// pixels are not FFCV's: each 8x8 block is reduced from its low-frequency DCT
    /// coefficients. Returns the reduced `(height, width)`, or `None` for a JPEG only
    /// the general decoder reads (progressive, arithmetic, ...), which has no scaled
    /// path here: the caller decodes it exactly instead.
    pub fn decode_scaled_region_into(
        &mut self,
        jpeg: &[u8],
        crop: CropBox,
        shift: u32,
        out: &mut [u8],
    ) -> Result<Option<(u32, u32)>> {
        match self.turbo.decode_at_scale(jpeg, Some(crop), shift, out)? {
            Outcome::Decoded(h, w) => Ok(Some((h, w))),
            Outcome::Unsupported => Ok(None),
        }
    }
}

/// What a JPEG header says, read without decoding the scans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JpegInfo {
    /// Height in pixels.
    pub height: u32,
    /// Width in pixels.
    pub width: u32,
    /// Number of colour components (1 grayscale, 3 YCbCr/RGB, 4 CMYK).
    pub components: u8,
}

fn decode_error(len: usize, e: impl std::fmt::Display) -> ImageError {
    ImageError::JpegDecode {
        len,
        message: e.to_string(),
    }
}

/// Reads the frame header of `jpeg` ([`JpegFrame::find`]) without decoding the scans.
pub fn jpeg_info(jpeg: &[u8]) -> Result<JpegInfo> {
    let frame = JpegFrame::find(jpeg)
        .ok_or_else(|| decode_error(jpeg.len(), "no frame header before the first scan"))?;
    Ok(JpegInfo {
        height: frame.height.into(),
        width: frame.width.into(),
        components: frame.count,
    })
}

/// Decodes `jpeg` into `out` as packed RGB and returns `(height, width)`.
///
/// Baseline JPEGs decode exactly as libjpeg-turbo with `TJFLAG_FASTDCT`
/// (FFCV's decode); others through `jpeg-decoder`. This one-shot form
/// allocates its buffers each call: keep a [`JpegDecoder`] per thread in hot
/// loops.
///
/// `out` must hold at least `height * width * 3` bytes (the loader sizes it
/// from the largest image in the file's metadata); the header is checked
/// against it before any pixel memory is allocated, so a corrupt header
/// cannot make the decoder allocate more than `out` could take. Grayscale
/// JPEGs are expanded to RGB (as libjpeg-turbo's `TJPF_RGB` does).
/// Corrupt or truncated input gives [`ImageError::JpegDecode`], never a panic.
pub fn decode_jpeg_into(jpeg: &[u8], out: &mut [u8]) -> Result<(u32, u32)> {
    JpegDecoder::new().decode_into(jpeg, out)
}

/// The `jpeg-decoder` path (accurate IDCT).
fn decode_general_into(jpeg: &[u8], out: &mut [u8]) -> Result<(u32, u32)> {
    let mut decoder = Decoder::new(jpeg);
    decoder
        .read_info()
        .map_err(|e| decode_error(jpeg.len(), e))?;
    let info = decoder
        .info()
        .ok_or_else(|| decode_error(jpeg.len(), "no frame header before the first scan"))?;
    let (height, width) = (u32::from(info.height), u32::from(info.width));
    let needed = rgb_len(height, width);
    if out.len() < needed {
        return Err(ImageError::BufferTooSmall {
            height,
            width,
            needed,
            got: out.len(),
        });
    }
    match info.pixel_format {
        PixelFormat::RGB24 | PixelFormat::L8 => {}
        other => {
            return Err(ImageError::UnsupportedJpeg {
                format: format!("{other:?}"),
            });
        }
    }
    // The decoder's own buffers are bounded by the output it would produce.
    decoder.set_max_decoding_buffer_size(needed);
    let pixels = decoder.decode().map_err(|e| decode_error(jpeg.len(), e))?;
    let out = &mut out[..needed];
    match info.pixel_format {
        PixelFormat::RGB24 if pixels.len() == needed => out.copy_from_slice(&pixels),
        PixelFormat::L8 if pixels.len() * 3 == needed => {
            for (rgb, &l) in out.chunks_exact_mut(3).zip(&pixels) {
                rgb.fill(l);
            }
        }
        _ => {
            return Err(decode_error(
                jpeg.len(),
                format!(
                    "decoder returned {} bytes for a {height}x{width} {:?} image",
                    pixels.len(),
                    info.pixel_format
                ),
            ));
        }
    }
    Ok((height, width))
}

/// Decodes `jpeg` into a new [`RgbImage`], refusing images whose RGB pixels
/// would exceed `max_bytes`.
pub fn decode_jpeg(jpeg: &[u8], max_bytes: usize) -> Result<RgbImage> {
    let info = jpeg_info(jpeg)?;
    let needed = rgb_len(info.height, info.width);
    if needed > max_bytes || needed == 0 {
        return Err(ImageError::BadSize {
            height: info.height.into(),
            width: info.width.into(),
            reason: "the decoded image would be empty or exceed the size limit",
        });
    }
    let mut pixels = Vec::new();
    pixels
        .try_reserve_exact(needed)
        .map_err(|_| ImageError::BadSize {
            height: info.height.into(),
            width: info.width.into(),
            reason: "not enough memory for the decoded image",
        })?;
    pixels.resize(needed, 0);
    let (h, w) = decode_jpeg_into(jpeg, &mut pixels)?;
    RgbImage::new(w, h, pixels)
}

/// Encodes `image` as a baseline JPEG with 4:2:0 chroma subsampling at
/// `quality` (1..=100): the bytes `cv2.imencode('.jpg', ...)` writes in
/// FFCV's writer (which defaults to quality 90), reproduced by
/// [`super::encode_like_libjpeg`].
pub fn encode_jpeg(image: &RgbImage, quality: u8) -> Result<Vec<u8>> {
    let (height, width) = (image.height(), image.width());
    super::encode_like_libjpeg(image.pixels(), width, height, quality).map_err(|e| match e {
        super::LibjpegEncodeError::Quality(q) => {
            ImageError::BadSetting(format!("jpeg_quality {q} is not in 1..=100"))
        }
        super::LibjpegEncodeError::Size { .. } => ImageError::BadSize {
            height: height.into(),
            width: width.into(),
            reason: "JPEG sides are at most 65500 (libjpeg's limit, which cv2.imencode enforces)",
        },
        other => ImageError::JpegEncode {
            height,
            width,
            message: other.to_string(),
        },
    })
}
