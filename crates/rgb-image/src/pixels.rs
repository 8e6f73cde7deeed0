//! Images beyond RGB8 for the ImageField (`beton_io::ImageArgs`: 1, 3 or 4 channels of 8 or
//! 16 bits): what a stored sample is ([`stored_header`]), how a source file or array is
//! stored ([`store_image_bytes`], [`encode_raw`]) and how the loader decodes and crops it
//! ([`PixelDecoderKernel`]). Pixels are packed `height x width x channels`, row-major,
//! 16-bit samples little-endian.
//!
//! A stored sample keeps a JPEG (8-bit gray or colour) or a PNG (gray, RGB, RGBA; 8 or 16
//! bits) as its file had it; anything else (palette or low-depth PNGs, arrays) is stored
//! raw behind beton-io's 16-byte `RawHeader`. Decoding keeps the samples as they are:
//! a gray JPEG gives one channel (libjpeg-turbo's fast decode, FFCV's, of its luma), a
//! 16-bit PNG 16-bit samples.

use beton_io::ImageArgs;
use beton_io::fields::image::{PNG_SIGNATURE, RAW_HEADER_LEN, RAW_MAGIC, RawHeader, png_header};
use rand_core::RngCore;

use super::resize_kinds::KindResizer;
use super::{
    AreaResizer, ImageError, JpegDecoder, JpegFrame, Result, RgbDecoderKind, center_crop_box,
    decode_jpeg_accurate, random_resized_crop_box,
};

/// Largest decoded image accepted from a source file (1 GiB of pixels), so a hostile
/// header cannot ask the writer for more.
const MAX_SOURCE_BYTES: usize = 1 << 30;

/// How a stored sample is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredFormat {
    /// A JPEG stream.
    Jpeg,
    /// A PNG stream.
    Png,
    /// Raw pixels behind a `RawHeader`.
    Raw,
}

/// What a stored sample's header says, read without decoding anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredHeader {
    /// How the sample is encoded.
    pub format: StoredFormat,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The image's kind: channels and bits.
    pub args: ImageArgs,
}

fn bad(message: String) -> ImageError {
    ImageError::BadSetting(message)
}

/// Reads the header of a stored sample (or of a source file): a raw header, a PNG's IHDR
/// or a JPEG's frame header. Only kinds an ImageField holds as they are pass: JPEGs of 8
/// bits with 1 or 3 components; PNGs of gray, RGB or RGBA at 8 or 16 bits.
pub fn stored_header(data: &[u8]) -> Result<StoredHeader> {
    if data.starts_with(&RAW_MAGIC) {
        let h = RawHeader::parse(data).map_err(bad)?;
        h.check_len(data.len()).map_err(bad)?;
        return Ok(StoredHeader {
            format: StoredFormat::Raw,
            width: h.width,
            height: h.height,
            args: ImageArgs::new(h.channels, h.bits).map_err(bad)?,
        });
    }
    if data.starts_with(&PNG_SIGNATURE) {
        let (width, height, channels, bits) = png_header(data).map_err(bad)?;
        return Ok(StoredHeader {
            format: StoredFormat::Png,
            width,
            height,
            args: ImageArgs::new(channels, bits).map_err(bad)?,
        });
    }
    if data.starts_with(&[0xFF, 0xD8]) {
        let frame = JpegFrame::find(data).ok_or_else(|| ImageError::JpegDecode {
            len: data.len(),
            message: "no frame header".into(),
        })?;
        if frame.precision != 8 || !matches!(frame.count, 1 | 3) {
            return Err(ImageError::UnsupportedJpeg {
                format: format!("{} components of {} bits", frame.count, frame.precision),
            });
        }
        if frame.height == 0 || frame.width == 0 {
            return Err(ImageError::BadSize {
                height: frame.height.into(),
                width: frame.width.into(),
                reason: "the JPEG frame header gives an empty image",
            });
        }
        return Ok(StoredHeader {
            format: StoredFormat::Jpeg,
            width: frame.width.into(),
            height: frame.height.into(),
            args: ImageArgs::new(frame.count, 8).map_err(bad)?,
        });
    }
    Err(ImageError::UnknownFormat {
        head: data.iter().take(8).copied().collect(),
    })
}

/// An image of any ImageField kind, its pixels in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PixelImage {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Channels and bits.
    pub args: ImageArgs,
    /// `height x width x channels` samples, 16-bit ones little-endian.
    pub pixels: Vec<u8>,
}

impl PixelImage {
    /// Wraps `pixels`, checking their length against the size and kind.
    pub fn new(width: u32, height: u32, args: ImageArgs, pixels: Vec<u8>) -> Result<PixelImage> {
        let want = args.pixels_len(height, width);
        if width == 0 || height == 0 || want != Some(pixels.len() as u64) {
            return Err(bad(format!(
                "{} pixel bytes for a {height}x{width} image of {} channels and {} bits",
                pixels.len(),
                args.channels,
                args.bits
            )));
        }
        Ok(PixelImage {
            width,
            height,
            args,
            pixels,
        })
    }
}

/// A stored raw sample: the 16-byte header, then the pixels.
pub fn encode_raw(image: &PixelImage) -> Vec<u8> {
    let header = RawHeader {
        width: image.width,
        height: image.height,
        channels: image.args.channels,
        bits: image.args.bits,
    };
    let mut out = Vec::with_capacity(RAW_HEADER_LEN + image.pixels.len());
    out.extend_from_slice(&header.encode());
    out.extend_from_slice(&image.pixels);
    out
}

/// A PNG of `image` (colour type gray, RGB or RGBA by its channels; its bit depth), which
/// an ImageField of the image's kind stores as it is: lossless, and smaller than raw for
/// most photographs.
pub fn encode_png(image: &PixelImage) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, image.width, image.height);
    enc.set_color(match image.args.channels {
        1 => png::ColorType::Grayscale,
        3 => png::ColorType::Rgb,
        _ => png::ColorType::Rgba,
    });
    let wide = image.args.bits == 16;
    enc.set_depth(if wide {
        png::BitDepth::Sixteen
    } else {
        png::BitDepth::Eight
    });
    let mut writer = enc.write_header().map_err(png_error)?;
    if wide {
        // PNG samples are big-endian.
        let be: Vec<u8> = image
            .pixels
            .chunks_exact(2)
            .flat_map(|s| [s[1], s[0]])
            .collect();
        writer.write_image_data(&be).map_err(png_error)?;
    } else {
        writer.write_image_data(&image.pixels).map_err(png_error)?;
    }
    writer.finish().map_err(png_error)?;
    Ok(out)
}

/// The kind a JPEG or PNG file has as it is: a JPEG's components (1 or 3) at 8 bits; a
/// PNG's colour type and depth (palettes as RGB, or RGBA with transparency; 1-, 2- and
/// 4-bit gray as 8-bit gray). Gray+alpha PNGs (2 channels) have no ImageField kind.
pub fn native_args(bytes: &[u8]) -> Result<ImageArgs> {
    if bytes.starts_with(&PNG_SIGNATURE) {
        let reader = png_reader(bytes)?;
        let (color, depth) = reader.output_color_type();
        return png_args(color, depth);
    }
    stored_header(bytes).map(|h| h.args)
}

fn png_error(e: impl std::fmt::Display) -> ImageError {
    ImageError::PngDecode {
        message: e.to_string(),
    }
}

/// A PNG reader that expands palettes, transparency and low gray depths, keeping 16 bits.
fn png_reader(bytes: &[u8]) -> Result<png::Reader<std::io::Cursor<&[u8]>>> {
    let mut decoder = png::Decoder::new_with_limits(
        std::io::Cursor::new(bytes),
        png::Limits {
            bytes: MAX_SOURCE_BYTES,
        },
    );
    decoder.set_transformations(png::Transformations::EXPAND);
    decoder.read_info().map_err(png_error)
}

fn png_args(color: png::ColorType, depth: png::BitDepth) -> Result<ImageArgs> {
    let channels = match color {
        png::ColorType::Grayscale => 1,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => {
            return Err(bad(format!(
                "a PNG of colour type {other:?}, which has no ImageField kind (1, 3 or 4 \
                 channels)"
            )));
        }
    };
    let bits = if depth == png::BitDepth::Sixteen {
        16
    } else {
        8
    };
    ImageArgs::new(channels, bits).map_err(bad)
}

/// Decodes a JPEG or PNG file to its pixels as they are ([`native_args`]' kind): JPEGs
/// with the accurate decoder (`PIL.Image.open(p)`'s pixels, gray kept as one channel).
pub fn read_pixels_bytes(bytes: &[u8]) -> Result<PixelImage> {
    if bytes.starts_with(&PNG_SIGNATURE) {
        let mut reader = png_reader(bytes)?;
        let (color, depth) = reader.output_color_type();
        let args = png_args(color, depth)?;
        let size = reader
            .output_buffer_size()
            .ok_or_else(|| png_error("image too large"))?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(size)
            .map_err(|_| png_error("not enough memory for the decoded image"))?;
        buf.resize(size, 0);
        let frame = reader.next_frame(&mut buf).map_err(png_error)?;
        buf.truncate(frame.buffer_size());
        if args.bits == 16 {
            // PNG samples are big-endian; an ImageField's are little-endian.
            for s in buf.chunks_exact_mut(2) {
                s.swap(0, 1);
            }
        }
        return PixelImage::new(frame.width, frame.height, args, buf);
    }
    let header = stored_header(bytes)?;
    let rgb = decode_jpeg_accurate(bytes, MAX_SOURCE_BYTES)?;
    let (w, h) = (rgb.width(), rgb.height());
    let pixels = if header.args.channels == 1 {
        rgb.pixels().iter().step_by(3).copied().collect()
    } else {
        rgb.into_pixels()
    };
    PixelImage::new(w, h, header.args, pixels)
}

/// What an ImageField of kind `args` stores for a JPEG or PNG source file: the file's
/// bytes as they are when it is a JPEG or a PNG of exactly that kind, otherwise the
/// decoded pixels raw ([`encode_raw`]) when they are of that kind. A file of another
/// kind is an error naming both.
pub fn store_image_bytes(bytes: &[u8], args: ImageArgs) -> Result<Vec<u8>> {
    let mismatch = |found: ImageArgs| {
        bad(format!(
            "the image has {} channels of {} bits, the field {} of {}",
            found.channels, found.bits, args.channels, args.bits
        ))
    };
    // A sample already stored (raw pixels behind their header), or a file of the kind;
    // a raw sample or a JPEG of another kind has nothing to convert.
    match stored_header(bytes) {
        Ok(h) if h.args == args => return Ok(bytes.to_vec()),
        Ok(h) if h.format != StoredFormat::Png => return Err(mismatch(h.args)),
        _ => {}
    }
    let image = read_pixels_bytes(bytes)?;
    if image.args != args {
        return Err(mismatch(image.args));
    }
    Ok(encode_raw(&image))
}

/// Per-thread state of the ImageField decoders: the JPEG decoder, both resizers and the
/// full-size scratch images, reused between samples.
#[derive(Debug, Default)]
pub struct PixelDecoderKernel {
    jpeg: JpegDecoder,
    rgb_resizer: AreaResizer,
    resizer: KindResizer,
    full: Vec<u8>,
    rgb: Vec<u8>,
}

/// Grows `buf` to `needed` bytes, fallibly (the size comes from a file).
fn grow(buf: &mut Vec<u8>, needed: usize, h: u32, w: u32) -> Result<()> {
    if buf.len() < needed {
        buf.try_reserve_exact(needed - buf.len())
            .map_err(|_| ImageError::BadSize {
                height: h.into(),
                width: w.into(),
                reason: "not enough memory for the decoded image",
            })?;
        buf.resize(needed, 0);
    }
    Ok(())
}

impl PixelDecoderKernel {
    /// Empty buffers; they grow to the largest image seen.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes one stored sample of an ImageField of kind `args` into `out`, a packed
    /// `out_h x out_w x channels` image: the whole image for [`RgbDecoderKind::Simple`]
    /// (which must be `out_h x out_w`), else FFCV's crop box (drawn from `rng` for the
    /// random crop) resized. The sample's header is checked against `args` and its area
    /// against `max_pixels` before anything is sized from it. 8-bit RGB crops are
    /// resized OpenCV-exactly, so they equal an `RGBImageField`'s of the same JPEG.
    #[allow(clippy::too_many_arguments)] // the sample, its kind, the crop and the output
    pub fn decode_sample(
        &mut self,
        kind: &RgbDecoderKind,
        args: ImageArgs,
        data: &[u8],
        max_pixels: u64,
        rng: &mut impl RngCore,
        out: &mut [u8],
        (out_h, out_w): (u32, u32),
    ) -> Result<()> {
        let header = stored_header(data)?;
        let (h, w) = (header.height, header.width);
        if header.args != args {
            return Err(bad(format!(
                "the stored image has {} channels of {} bits, the field {} of {}",
                header.args.channels, header.args.bits, args.channels, args.bits
            )));
        }
        if u64::from(h) * u64::from(w) > max_pixels {
            return Err(bad(format!(
                "the image claims {h}x{w} pixels, over the loader's max_image_pixels of \
                 {max_pixels}"
            )));
        }
        let pixel = args.pixel_bytes();
        let needed = h as usize * w as usize * pixel;
        let out_needed = out_h as usize * out_w as usize * pixel;
        if out.len() < out_needed {
            return Err(ImageError::BufferTooSmall {
                height: out_h,
                width: out_w,
                needed: out_needed,
                got: out.len(),
            });
        }
        let crop = match kind {
            RgbDecoderKind::Simple => {
                if (h, w) != (out_h, out_w) {
                    return Err(ImageError::BadSize {
                        height: h.into(),
                        width: w.into(),
                        reason: "the simple decoder needs every image at the output size",
                    });
                }
                None
            }
            RgbDecoderKind::CenterCrop { ratio } => Some(center_crop_box(h, w, *ratio)),
            RgbDecoderKind::RandomResizedCrop(params) => {
                Some(random_resized_crop_box(h, w, params, rng))
            }
        };
        let pixels: &[u8] = match header.format {
            StoredFormat::Raw => &data[RAW_HEADER_LEN..],
            StoredFormat::Png => {
                grow(&mut self.full, needed, h, w)?;
                decode_png_into(data, args, (h, w), &mut self.full[..needed])?;
                &self.full[..needed]
            }
            StoredFormat::Jpeg => {
                let rgb_needed = h as usize * w as usize * 3;
                grow(&mut self.rgb, rgb_needed, h, w)?;
                let rgb = &mut self.rgb[..rgb_needed];
                let got = match crop {
                    Some(c) => self.jpeg.decode_region_into(data, c, rgb)?,
                    None => self.jpeg.decode_into(data, rgb)?,
                };
                if got != (h, w) {
                    return Err(ImageError::JpegDecode {
                        len: data.len(),
                        message: format!(
                            "JPEG decodes to {}x{}, its header says {h}x{w}",
                            got.0, got.1
                        ),
                    });
                }
                if args.channels == 3 {
                    &self.rgb[..rgb_needed]
                } else {
                    // A gray JPEG decodes to R = G = B = its luma: keep one of them.
                    grow(&mut self.full, needed, h, w)?;
                    for (g, p) in self.full[..needed].iter_mut().zip(rgb.chunks_exact(3)) {
                        *g = p[0];
                    }
                    &self.full[..needed]
                }
            }
        };
        let Some(crop) = crop else {
            out[..needed].copy_from_slice(&pixels[..needed]);
            return Ok(());
        };
        if args
            == (ImageArgs {
                channels: 3,
                bits: 8,
            })
        {
            return self
                .rgb_resizer
                .resize_crop_into(pixels, h, w, crop, out, out_h, out_w);
        }
        self.resizer.resize_crop_into(
            pixels,
            (h, w, usize::from(args.channels), args.bits),
            crop,
            out,
            out_h,
            out_w,
        )
    }
}

/// Decodes a stored PNG (of exactly the field's kind: `stored_header` checked it) into
/// `out`, 16-bit samples turned little-endian.
fn decode_png_into(data: &[u8], args: ImageArgs, (h, w): (u32, u32), out: &mut [u8]) -> Result<()> {
    let mut decoder = png::Decoder::new_with_limits(
        std::io::Cursor::new(data),
        png::Limits {
            bytes: out.len().max(1 << 20),
        },
    );
    decoder.set_transformations(png::Transformations::IDENTITY);
    let mut reader = decoder.read_info().map_err(png_error)?;
    if reader.output_buffer_size() != Some(out.len()) {
        return Err(png_error(format!(
            "the PNG's {h}x{w} pixels do not fill {} bytes",
            out.len()
        )));
    }
    reader.next_frame(out).map_err(png_error)?;
    if args.bits == 16 {
        for s in out.chunks_exact_mut(2) {
            s.swap(0, 1);
        }
    }
    Ok(())
}
