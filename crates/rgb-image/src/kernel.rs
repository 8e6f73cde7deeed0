//! FFCV's three RGB image decoders as one per-sample kernel: what the
//! loader calls for every sample of an `RGBImageField`.

use super::{
    AreaResizer, ImageError, ImageMode, JpegDecoder, RandomResizedCrop, Result, center_crop_box,
    dct_scaled_crop, random_resized_crop_box, rgb_len,
};
use rand_core::RngCore;

/// Which FFCV decoder an image field uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RgbDecoderKind {
    /// `SimpleRGBImageDecoder`: the stored image as is (raw copy or full
    /// JPEG decode); every image must have the output size.
    Simple,
    /// `CenterCropRGBImageDecoder(output_size, ratio)`: the centred square of
    /// side `int(ratio * min(h, w))`, resized with `INTER_AREA`.
    CenterCrop {
        /// Crop side over the short side (FFCV's example value 224/256).
        ratio: f64,
    },
    /// `RandomResizedCropRGBImageDecoder(output_size, scale, ratio)`.
    RandomResizedCrop(RandomResizedCrop),
}

/// One stored sample of an image field, as the decoders read it: the mode byte and size
/// from its metadata row, and its bytes (raw pixels or a JPEG).
#[derive(Clone, Copy, Debug)]
pub struct StoredImage<'a> {
    /// The metadata's mode byte (`0` JPEG, `1` raw; see [`ImageMode`]).
    pub mode: u8,
    /// The metadata's height.
    pub height: u16,
    /// The metadata's width.
    pub width: u16,
    /// The stored bytes.
    pub data: &'a [u8],
}

/// Where a decoded image goes: `height x width x 3` bytes at the start of `pixels`.
#[derive(Debug)]
pub struct ImageOut<'a> {
    /// The output buffer: at least `height * width * 3` bytes.
    pub pixels: &'a mut [u8],
    /// The output height.
    pub height: u32,
    /// The output width.
    pub width: u32,
}

/// Per-thread state of the image decoders: the JPEG decoder, the resizer
/// and the full-resolution scratch image, all reused between samples.
#[derive(Debug, Default)]
pub struct RgbDecoderKernel {
    jpeg: JpegDecoder,
    resizer: AreaResizer,
    full: Vec<u8>,
    /// The opt-in DCT-domain downscaling ([`Self::set_dct_downscale`]).
    dct_downscale: bool,
}

impl RgbDecoderKernel {
    /// Empty buffers; they grow to the largest image seen.
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns the opt-in DCT-domain downscaling on or off for the decodes that follow
    /// (off by default, and off means FFCV's pixels exactly). When on, a crop decoder
    /// whose JPEG crop is at least twice the output on both axes decodes the JPEG at
    /// 1/2, 1/4 or 1/8 scale in the DCT domain ([`dct_scaled_crop`] picks the scale and
    /// the reduced crop) and resizes the reduced crop with `INTER_AREA`: faster, and
    /// close to but not equal to the exact output. Raw images, `Simple`, crops under
    /// twice the output, and JPEGs without a baseline decode here take the exact path.
    /// The result depends only on the sample and the setting, never on the thread.
    pub fn set_dct_downscale(&mut self, on: bool) {
        self.dct_downscale = on;
    }

    /// Whether DCT-domain downscaling is on ([`Self::set_dct_downscale`]).
    pub fn dct_downscale(&self) -> bool {
        self.dct_downscale
    }

    /// Grows the scratch image to `needed` bytes, fallibly (its size comes from a file).
    fn grow_full(&mut self, needed: usize, h: u32, w: u32) -> Result<()> {
        if self.full.len() < needed {
            self.full
                .try_reserve_exact(needed - self.full.len())
                .map_err(|_| ImageError::BadSize {
                    height: h.into(),
                    width: w.into(),
                    reason: "not enough memory for the decoded image",
                })?;
            self.full.resize(needed, 0);
        }
        Ok(())
    }

    /// Decodes one stored sample into `out`. `rng` is drawn from only by
    /// [`RgbDecoderKind::RandomResizedCrop`].
    ///
    /// As FFCV: the crop box is drawn from the metadata size, a raw image is
    /// used in place, a JPEG decoded (only the part the box depends on; the
    /// box's pixels equal FFCV's full decode), then the box is resized. Unlike FFCV, a JPEG
    /// whose header disagrees with the metadata size, a raw payload of the
    /// wrong length, an unknown mode, or a `Simple` image of the wrong size
    /// is an error instead of undefined output.
    pub fn decode_sample(
        &mut self,
        kind: &RgbDecoderKind,
        image: StoredImage<'_>,
        rng: &mut impl RngCore,
        out: ImageOut<'_>,
    ) -> Result<()> {
        let StoredImage {
            mode,
            height,
            width,
            data,
        } = image;
        let ImageOut {
            pixels: out,
            height: out_h,
            width: out_w,
        } = out;
        let (h, w) = (u32::from(height), u32::from(width));
        let needed = rgb_len(h, w);
        if h == 0 || w == 0 {
            return Err(ImageError::BadSize {
                height: h.into(),
                width: w.into(),
                reason: "the metadata gives an empty image",
            });
        }
        let Some(mode) = ImageMode::from_byte(mode) else {
            return Err(ImageError::BadSetting(format!(
                "unknown RGBImageField mode byte {mode}"
            )));
        };
        let out_needed = rgb_len(out_h, out_w);
        if out.len() < out_needed {
            return Err(ImageError::BufferTooSmall {
                height: out_h,
                width: out_w,
                needed: out_needed,
                got: out.len(),
            });
        }
        if matches!(kind, RgbDecoderKind::Simple) && (h, w) != (out_h, out_w) {
            return Err(ImageError::BadSize {
                height: h.into(),
                width: w.into(),
                reason: "SimpleRGBImageDecoder needs every image at the output size",
            });
        }
        // The crop box depends only on the metadata size, so it is drawn
        // first and a JPEG is decoded only where the box needs it.
        let crop = match kind {
            RgbDecoderKind::Simple => None,
            RgbDecoderKind::CenterCrop { ratio } => Some(center_crop_box(h, w, *ratio)),
            RgbDecoderKind::RandomResizedCrop(params) => {
                Some(random_resized_crop_box(h, w, params, rng))
            }
        };
        // The opt-in reduced decode: the reduced image and its crop stand in for the
        // full ones from here on.
        if mode == ImageMode::Jpeg
            && self.dct_downscale
            && let Some(c) = crop
            && let Some((shift, rcrop)) = dct_scaled_crop(h, w, c, out_h, out_w)
        {
            let (rh, rw) = (h.div_ceil(1 << shift), w.div_ceil(1 << shift));
            let rneeded = rgb_len(rh, rw);
            self.grow_full(rneeded, h, w)?;
            let reduced = &mut self.full[..rneeded];
            if let Some(got) = self
                .jpeg
                .decode_scaled_region_into(data, rcrop, shift, reduced)?
            {
                if got != (rh, rw) {
                    return Err(ImageError::JpegDecode {
                        len: data.len(),
                        message: format!(
                            "JPEG decodes to {}x{} at 1/{} scale, but the metadata says {h}x{w}",
                            got.0,
                            got.1,
                            1 << shift
                        ),
                    });
                }
                let reduced = &self.full[..rneeded];
                return self
                    .resizer
                    .resize_crop_into(reduced, rh, rw, rcrop, out, out_h, out_w);
            }
            // No baseline decode for this JPEG: the exact path below.
        }
        let pixels: &[u8] = match mode {
            ImageMode::Raw => {
                if data.len() != needed {
                    return Err(ImageError::PixelCount {
                        height: h,
                        width: w,
                        needed,
                        got: data.len(),
                    });
                }
                data
            }
            ImageMode::Jpeg => {
                // Sized from the file: allocated fallibly, so a size the machine
                // cannot hold is an error for this sample, not an abort.
                self.grow_full(needed, h, w)?;
                let full = &mut self.full[..needed];
                let (dh, dw) = match crop {
                    Some(crop) => self.jpeg.decode_region_into(data, crop, full)?,
                    None => self.jpeg.decode_into(data, full)?,
                };
                if (dh, dw) != (h, w) {
                    return Err(ImageError::JpegDecode {
                        len: data.len(),
                        message: format!("JPEG is {dh}x{dw} but the metadata says {h}x{w}"),
                    });
                }
                &self.full[..needed]
            }
        };
        let Some(crop) = crop else {
            out[..needed].copy_from_slice(pixels);
            return Ok(());
        };
        self.resizer
            .resize_crop_into(pixels, h, w, crop, out, out_h, out_w)
    }
}
