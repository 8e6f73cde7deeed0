//! `RGBImageField.encode` as FFCV 1.0.2 does it: optional `max_resolution`
//! area downscale, then raw pixels or a JPEG by `write_mode`.

use super::{AreaResizer, ImageError, Result, RgbImage, encode_jpeg, rgb_len};
use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64;

/// How an image is stored (the `mode` byte of the field's metadata).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageMode {
    /// JPEG bytes (`mode = 0`).
    Jpeg,
    /// Packed RGB pixels, `height * width * 3` bytes (`mode = 1`).
    Raw,
}

impl ImageMode {
    /// The `mode` byte FFCV writes in the metadata row.
    pub fn as_byte(self) -> u8 {
        match self {
            ImageMode::Jpeg => 0,
            ImageMode::Raw => 1,
        }
    }

    /// The mode for a metadata `mode` byte, if it is one FFCV writes.
    pub fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(ImageMode::Jpeg),
            1 => Some(ImageMode::Raw),
            _ => None,
        }
    }
}

/// FFCV's `write_mode`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WriteMode {
    /// Always raw pixels (FFCV's default).
    Raw,
    /// Always JPEG.
    Jpg,
    /// JPEG only when the raw pixels take more than `smart_threshold` bytes
    /// (with no threshold, always raw — as FFCV).
    Smart {
        /// FFCV's `smart_threshold`.
        threshold: Option<u64>,
    },
    /// JPEG with probability `compress_probability` per image (FFCV's
    /// default 0.5), drawn from the per-sample generator.
    Proportion {
        /// FFCV's `compress_probability`.
        compress_probability: f64,
    },
}

/// One encoded image: what a .beton `RGBImageField` stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedImage {
    /// Raw or JPEG.
    pub mode: ImageMode,
    /// Width after any `max_resolution` downscale.
    pub width: u16,
    /// Height after any `max_resolution` downscale.
    pub height: u16,
    /// The stored bytes: packed RGB or a JPEG file.
    pub data: Vec<u8>,
}

/// FFCV's `RGBImageField(write_mode, max_resolution, smart_threshold,
/// jpeg_quality, compress_probability)` encoder.
#[derive(Clone, Debug, PartialEq)]
pub struct RgbImageEncoder {
    /// Raw, JPEG, smart or proportion.
    pub write_mode: WriteMode,
    /// Longest side after encoding; larger images are area-downscaled
    /// keeping the aspect ratio (FFCV's `resizer`).
    pub max_resolution: Option<u32>,
    /// JPEG quality, 1..=100 (FFCV's default 90).
    pub jpeg_quality: u8,
}

impl Default for RgbImageEncoder {
    /// FFCV's defaults: raw, no `max_resolution`, quality 90.
    fn default() -> Self {
        Self {
            write_mode: WriteMode::Raw,
            max_resolution: None,
            jpeg_quality: 90,
        }
    }
}

/// SplitMix64's output function: one well-mixed `u64` from any input.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The generator sample `sample` of a dataset written with `seed` draws its
/// [`WriteMode::Proportion`] choice from: PCG-64 (`Pcg64::seed_from_u64`) seeded with
/// `splitmix64(splitmix64(seed) ^ sample)`.
///
/// This is the one seeding rule of the writers: `ffcv write image-folder --seed` (0 by
/// default) and the Python writer (`ffcv_rs` `RGBImageField(write_mode="proportion")`,
/// seed 0) both reach it through [`RgbImageEncoder::encode_sample`], so the same images in
/// the same order give the same file whichever writes it. The choice depends on the seed
/// and the sample's index only, not on the thread that encodes it or on the samples
/// before it.
pub fn sample_generator(seed: u64, sample: u64) -> Pcg64 {
    Pcg64::seed_from_u64(splitmix64(splitmix64(seed) ^ sample))
}

impl RgbImageEncoder {
    /// Encodes sample `sample` (its index in the dataset) of a dataset written with `seed`:
    /// [`RgbImageEncoder::encode`] with the sample's own generator,
    /// [`sample_generator`]`(seed, sample)`. The writers call this, not `encode`, so that
    /// `proportion` files do not depend on which front end wrote them.
    pub fn encode_sample(&self, image: &RgbImage, seed: u64, sample: u64) -> Result<EncodedImage> {
        self.encode(image, &mut sample_generator(seed, sample))
    }

    /// Encodes `image`. `rng` is drawn from only by
    /// [`WriteMode::Proportion`] (one `u64` per image).
    pub fn encode(&self, image: &RgbImage, rng: &mut impl RngCore) -> Result<EncodedImage> {
        let resized;
        let image = match self.max_resolution {
            Some(max) => match downscale_to_max_resolution(image, max)? {
                Some(smaller) => {
                    resized = smaller;
                    &resized
                }
                None => image,
            },
            None => image,
        };
        let (Ok(width), Ok(height)) = (u16::try_from(image.width()), u16::try_from(image.height()))
        else {
            return Err(ImageError::BadSize {
                height: image.height().into(),
                width: image.width().into(),
                reason: "RGBImageField stores sides as u16 (at most 65535); set max_resolution",
            });
        };
        let jpeg = match self.write_mode {
            WriteMode::Raw => false,
            WriteMode::Jpg => true,
            // FFCV encodes the JPEG first and may then discard it; the
            // decision only depends on the raw size, so we skip that work.
            WriteMode::Smart { threshold } => {
                threshold.is_some_and(|t| image.pixels().len() as u64 > t)
            }
            WriteMode::Proportion {
                compress_probability,
            } => {
                if !(0.0..=1.0).contains(&compress_probability) {
                    return Err(ImageError::BadSetting(format!(
                        "compress_probability {compress_probability} is not in [0, 1]"
                    )));
                }
                let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
                u < compress_probability
            }
        };
        let (mode, data) = if jpeg {
            (ImageMode::Jpeg, encode_jpeg(image, self.jpeg_quality)?)
        } else {
            (ImageMode::Raw, image.pixels().to_vec())
        };
        Ok(EncodedImage {
            mode,
            width,
            height,
            data,
        })
    }
}

/// FFCV's `resizer(image, max_resolution)`: if the longest side exceeds
/// `max_resolution`, scale both sides by `max_resolution / longest`
/// (truncated, as numpy's `astype(int)`) with `INTER_AREA`. Returns `None`
/// when the image is already small enough.
pub fn downscale_to_max_resolution(
    image: &RgbImage,
    max_resolution: u32,
) -> Result<Option<RgbImage>> {
    let (w, h) = (image.width(), image.height());
    let ratio = f64::from(max_resolution) / f64::from(w.max(h));
    if ratio >= 1.0 {
        return Ok(None);
    }
    let nw = (ratio * f64::from(w)) as u32;
    let nh = (ratio * f64::from(h)) as u32;
    if nw == 0 || nh == 0 {
        return Err(ImageError::BadSize {
            height: nh.into(),
            width: nw.into(),
            reason: "max_resolution would shrink a side of the image to zero",
        });
    }
    let mut out = vec![0u8; rgb_len(nh, nw)];
    AreaResizer::new().resize_into(image.pixels(), w as usize * 3, h, w, &mut out, nh, nw)?;
    RgbImage::new(nw, nh, out).map(Some)
}

impl From<EncodedImage> for beton_io::RgbImage {
    /// The value [`beton_io::DatasetWriter`] takes for an `RGBImageField`.
    fn from(e: EncodedImage) -> Self {
        match e.mode {
            ImageMode::Jpeg => beton_io::RgbImage::Jpeg {
                width: e.width,
                height: e.height,
                bytes: e.data,
            },
            ImageMode::Raw => beton_io::RgbImage::Raw {
                width: e.width,
                height: e.height,
                pixels: e.data,
            },
        }
    }
}

impl From<EncodedImage> for beton_io::FieldValue {
    fn from(e: EncodedImage) -> Self {
        beton_io::FieldValue::RgbImage(e.into())
    }
}
