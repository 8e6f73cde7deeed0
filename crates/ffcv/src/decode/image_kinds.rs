//! The decoders of `ImageField` (beton-io's `fields/image.rs`: 1, 3 or 4 channels of 8 or
//! 16 bits, stored as JPEG, PNG or raw): [`ImageDecoder`], in FFCV's three forms (the
//! whole image, the centre crop, the random resized crop), each writing
//! `[H, W, channels]` rows of `u8` or `u16` samples kept as they are (a gray image is
//! one channel, a 16-bit PNG 16-bit samples).
//!
//! They run rgb-image's [`PixelDecoderKernel`], one per worker thread, with the same crop
//! rules as the RGB decoders and the random crop drawn from the sample's generator, so
//! crops do not depend on the thread count. Each sample's stored header is checked
//! against the field's kind and the loader's `max_image_pixels` before anything is sized
//! from it.

use std::cell::RefCell;

use beton_io::{ByteOrder, FieldType, ImageArgs, NumpyDtype, NumpyKind};
use pipeline_jit::rng::sample_rng;
use rgb_image::{PixelDecoderKernel, RandomResizedCrop, RgbDecoderKind, stored_header};

use super::{Decoder, DecoderOutput, FieldInfo, OutputKind, SampleInput};

thread_local! {
    /// One reusable kernel per thread (each loader worker decodes with its own).
    static KERNEL: RefCell<PixelDecoderKernel> = RefCell::new(PixelDecoderKernel::new());
}

/// Which of FFCV's decoder forms an [`ImageDecoder`] takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ImageCrop {
    /// The whole image at its stored size; every image of the field must have one size
    /// (checked when the loader is built, from every sample's stored header).
    Whole,
    /// The centred square of side `int(ratio * min(h, w))`, resized to the output size.
    Center {
        /// Output `(height, width)`.
        output_size: (u32, u32),
        /// Crop side over the image's short side.
        ratio: f64,
    },
    /// torchvision's random crop box, resized to the output size.
    RandomResized {
        /// Output `(height, width)`.
        output_size: (u32, u32),
        /// Area fraction and aspect ratio ranges.
        params: RandomResizedCrop,
    },
}

/// An `ImageField` as `[B, H, W, channels]` rows of `u8` (8-bit fields) or `u16` (16-bit).
///
/// ```
/// use ffcv::decode::ImageDecoder;
/// assert_eq!(ImageDecoder::simple().name_str(), "SimpleImageDecoder");
/// assert_eq!(ImageDecoder::center_crop((32, 32), 0.875).name_str(), "CenterCropImageDecoder");
/// let rrc = ImageDecoder::random_resized_crop((64, 48));
/// assert_eq!(rrc.name_str(), "RandomResizedCropImageDecoder");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImageDecoder {
    /// The form.
    pub crop: ImageCrop,
}

impl ImageDecoder {
    /// Every image at its stored size (FFCV's `SimpleRGBImageDecoder`'s rule).
    pub fn simple() -> ImageDecoder {
        ImageDecoder {
            crop: ImageCrop::Whole,
        }
    }

    /// The centre crop of `ratio` resized to `output_size` (`(height, width)`).
    pub fn center_crop(output_size: (u32, u32), ratio: f64) -> ImageDecoder {
        ImageDecoder {
            crop: ImageCrop::Center { output_size, ratio },
        }
    }

    /// The random resized crop with FFCV's defaults `scale=(0.08, 1)`, `ratio=(3/4, 4/3)`.
    pub fn random_resized_crop(output_size: (u32, u32)) -> ImageDecoder {
        Self::random_resized_crop_with(output_size, RandomResizedCrop::default())
    }

    /// The random resized crop with the given ranges.
    pub fn random_resized_crop_with(
        output_size: (u32, u32),
        params: RandomResizedCrop,
    ) -> ImageDecoder {
        ImageDecoder {
            crop: ImageCrop::RandomResized {
                output_size,
                params,
            },
        }
    }

    /// The decoder's name: `SimpleImageDecoder`, `CenterCropImageDecoder` or
    /// `RandomResizedCropImageDecoder`.
    pub fn name_str(&self) -> &'static str {
        match self.crop {
            ImageCrop::Whole => "SimpleImageDecoder",
            ImageCrop::Center { .. } => "CenterCropImageDecoder",
            ImageCrop::RandomResized { .. } => "RandomResizedCropImageDecoder",
        }
    }

    fn kind(&self) -> RgbDecoderKind {
        match self.crop {
            ImageCrop::Whole => RgbDecoderKind::Simple,
            ImageCrop::Center { ratio, .. } => RgbDecoderKind::CenterCrop { ratio },
            ImageCrop::RandomResized { params, .. } => RgbDecoderKind::RandomResizedCrop(params),
        }
    }
}

fn field_args(info: &FieldInfo<'_>) -> Result<ImageArgs, String> {
    match &info.field.field_type {
        FieldType::Image(a) => Ok(*a),
        other => Err(format!(
            "decodes ImageField fields, but {:?} is a {}",
            info.field.name,
            other.type_name()
        )),
    }
}

/// The output dtype of a kind: `|u1` or `<u2`.
fn sample_dtype(args: ImageArgs) -> NumpyDtype {
    if args.bits == 16 {
        NumpyDtype::numeric(NumpyKind::UInt, 2, ByteOrder::Little).expect("uint16")
    } else {
        NumpyDtype::u8()
    }
}

/// The one size of every image of the field, read from each sample's stored header.
fn common_size(info: &FieldInfo<'_>) -> Result<(u32, u32), String> {
    let mut size: Option<(u32, u32)> = None;
    for sample in 0..info.reader.num_samples() {
        let data = info
            .reader
            .field_data(sample, info.index)
            .map_err(|e| {
                format!(
                    "SimpleImageDecoder reads every image's header when the loader is built \
                     ({e}); choose a crop decoder for this file"
                )
            })?
            .unwrap_or_default();
        let h = stored_header(data).map_err(|e| format!("sample {sample}: {e}"))?;
        match size {
            None => size = Some((h.height, h.width)),
            Some((sh, sw)) if (sh, sw) != (h.height, h.width) => {
                return Err(format!(
                    "needs every image at one size, but sample 0 is {sh}x{sw} and sample \
                     {sample} is {}x{}; choose a crop decoder",
                    h.height, h.width
                ));
            }
            Some(_) => {}
        }
    }
    size.ok_or_else(|| "cannot tell the image size of a file without samples".into())
}

impl Decoder for ImageDecoder {
    fn name(&self) -> String {
        self.name_str().into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        let args = field_args(info)?;
        let (h, w) = match self.crop {
            ImageCrop::Whole => {
                let (h, w) = common_size(info)?;
                if u64::from(h) * u64::from(w) > info.max_image_pixels {
                    return Err(format!(
                        "sample 0: the image claims {h}x{w} pixels, over the loader's \
                         max_image_pixels of {}",
                        info.max_image_pixels
                    )
                    .into());
                }
                (h, w)
            }
            ImageCrop::Center { output_size, ratio } => {
                if !(ratio > 0.0 && ratio.is_finite()) {
                    return Err(format!("ratio {ratio} is not a positive number").into());
                }
                output_size
            }
            ImageCrop::RandomResized {
                output_size,
                params,
            } => {
                let (s, r) = (params.scale, params.ratio);
                let ordered = |(lo, hi): (f64, f64)| lo > 0.0 && lo <= hi && hi.is_finite();
                if !ordered(s) || !ordered(r) {
                    return Err(format!(
                        "scale {s:?} and ratio {r:?} must be positive (lo, hi) ranges"
                    )
                    .into());
                }
                output_size
            }
        };
        if h == 0 || w == 0 {
            return Err(format!("output size {h}x{w} has a zero side").into());
        }
        let out = DecoderOutput::new(
            vec![h as usize, w as usize, usize::from(args.channels)],
            sample_dtype(args),
            OutputKind::Array,
        );
        if out.row_bytes().is_none() {
            return Err(format!("output size {h}x{w} exceeds memory").into());
        }
        Ok(out)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        let (h, w) = match self.crop {
            ImageCrop::Whole => {
                let header = stored_header(input.data).map_err(|e| e.to_string())?;
                (header.height, header.width)
            }
            ImageCrop::Center { output_size, .. }
            | ImageCrop::RandomResized { output_size, .. } => output_size,
        };
        // The row holds `h x w` pixels of the field's kind, and each kind has its own pixel
        // size (1, 2, 3, 4, 6 or 8 bytes): the row tells the kernel the field's kind.
        let args = kind_of_row(out.len(), h, w).ok_or_else(|| {
            format!(
                "the image is {h}x{w}, but the rows hold {} bytes; every image must have the \
                 first one's size for SimpleImageDecoder",
                out.len()
            )
        })?;
        let mut rng = sample_rng(input.seed);
        KERNEL
            .with(|kernel| {
                let mut kernel = kernel
                    .try_borrow_mut()
                    .map_err(|_| "image kernel re-entered on one thread".to_owned())?;
                kernel
                    .decode_sample(
                        &self.kind(),
                        args,
                        input.data,
                        input.max_image_pixels,
                        &mut rng,
                        out,
                        (h, w),
                    )
                    .map_err(|e| e.to_string())
            })
            .map_err(Into::into)
    }
}

/// The kind whose `h x w` pixels take exactly `row` bytes.
fn kind_of_row(row: usize, h: u32, w: u32) -> Option<ImageArgs> {
    let pixels = (h as usize).checked_mul(w as usize)?;
    if pixels == 0 || !row.is_multiple_of(pixels) {
        return None;
    }
    let (channels, bits) = match row / pixels {
        1 => (1, 8),
        2 => (1, 16),
        3 => (3, 8),
        4 => (4, 8),
        6 => (3, 16),
        8 => (4, 16),
        _ => return None,
    };
    Some(ImageArgs { channels, bits })
}
