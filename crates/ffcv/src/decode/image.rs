//! FFCV's RGB image decoders for the loader: [`SimpleRGBImageDecoder`],
//! [`CenterCropRGBImageDecoder`] and [`RandomResizedCropRGBImageDecoder`], each writing
//! `u8 [H, W, 3]` rows.
//!
//! All three run [`RgbDecoderKernel::decode_sample`] (libjpeg-turbo-exact JPEG decode,
//! FFCV's crop rules, OpenCV-exact `INTER_AREA`). The kernel's buffers (the full-size
//! decoded image, the JPEG decoder's tables, the resizer's coefficients) live in one
//! thread-local kernel per loader worker thread, so once they have grown to the largest
//! image no sample allocates. The random crop draws from the per-sample generator the
//! loader seeds from (seed, epoch, sample, operation index), so crops do not depend on
//! the thread count.

use std::cell::RefCell;

use beton_io::{FieldMetadata, FieldType, NumpyDtype};
use pipeline_jit::rng::sample_rng;

use super::{Decoder, DecoderOutput, FieldInfo, OutputKind, SampleInput};
use rgb_image::{
    ImageOut, JpegFrame, RandomResizedCrop, RgbDecoderKernel, RgbDecoderKind, StoredImage,
};

thread_local! {
    /// One reusable kernel per thread (each loader worker decodes with its own).
    static KERNEL: RefCell<RgbDecoderKernel> = RefCell::new(RgbDecoderKernel::new());
}

fn expect_image(info: &FieldInfo<'_>) -> Result<(), String> {
    if info.field.field_type == FieldType::RgbImage {
        Ok(())
    } else {
        Err(format!(
            "decodes RGBImageField fields, but {:?} is a {}",
            info.field.name,
            info.field.field_type.type_name()
        ))
    }
}

fn image_output(height: u32, width: u32) -> Result<DecoderOutput, String> {
    if height == 0 || width == 0 {
        return Err(format!("output size {height}x{width} has a zero side"));
    }
    let out = DecoderOutput::new(
        vec![height as usize, width as usize, 3],
        NumpyDtype::u8(),
        OutputKind::Array,
    );
    if out.row_bytes().is_none() {
        return Err(format!("output size {height}x{width} exceeds memory"));
    }
    Ok(out)
}

/// Refuses an image area over the loader's cap, before anything is sized from it.
fn check_area(height: u16, width: u16, max_pixels: u64) -> Result<(), String> {
    let pixels = u64::from(height) * u64::from(width);
    if pixels > max_pixels {
        return Err(format!(
            "the image claims {height}x{width} = {pixels} pixels, over the loader's \
             max_image_pixels of {max_pixels}; raise it (LoaderBuilder::max_image_pixels, \
             `--max-image-pixels`) only for a trusted file"
        ));
    }
    Ok(())
}

/// Checks a stored image's claims before anything is sized from them: its area against
/// `max_image_pixels`, and for a JPEG (`mode` 0) that its frame header agrees with the
/// metadata's `height x width` and that a baseline stream is long enough to code that
/// frame (every 8x8 block takes at least 2 bits). The loader's image decoders run it on
/// every sample; `ffcv dump` too. `Err` says what is wrong, for the caller to prefix with
/// the file, field and sample.
pub fn check_stored_image(
    data: &[u8],
    mode: u8,
    height: u16,
    width: u16,
    max_image_pixels: u64,
) -> Result<(), String> {
    check_area(height, width, max_image_pixels)?;
    if mode == beton_io::IMAGE_MODE_JPEG {
        // Check the JPEG header against the metadata before the kernel sizes its
        // full-resolution buffer from the metadata.
        let frame = JpegFrame::find(data).ok_or_else(|| {
            format!(
                "JPEG decode failed ({} bytes of input): no frame header",
                data.len()
            )
        })?;
        let (h, w) = (frame.height, frame.width);
        if (h, w) != (height, width) {
            return Err(format!(
                "the JPEG is {h}x{w} but the metadata says {height}x{width}"
            ));
        }
        // A stream too short to code its frame would still make the kernel allocate the
        // full frame before the scan runs out: refuse it from its length alone, so that a
        // worker's buffers grow only for images whose bytes can hold them.
        if let Some(min) = frame.min_scan_bytes()
            && (data.len() as u64) < min
        {
            return Err(format!(
                "the JPEG's {} bytes cannot code a {h}x{w} frame (at least {min} bytes of scan \
                 data); the stream is truncated or its header is forged",
                data.len()
            ));
        }
    }
    Ok(())
}

/// Checks one sample's stored image and decodes it with the thread's kernel into an
/// `out_h x out_w` row.
fn decode_with(
    (kind, dct_downscale): (&RgbDecoderKind, bool),
    input: &SampleInput<'_>,
    out: &mut [u8],
    out_h: u32,
    out_w: u32,
) -> Result<(), String> {
    let (mode, width, height) = input
        .image_header()
        .ok_or("metadata too short for an RGBImageField")?;
    check_stored_image(input.data, mode, height, width, input.max_image_pixels)?;
    let mut rng = sample_rng(input.seed);
    KERNEL.with(|kernel| {
        let mut kernel = kernel
            .try_borrow_mut()
            .map_err(|_| "image kernel re-entered on one thread".to_owned())?;
        // Set on every call: the thread's kernel serves every image decoder of the thread.
        kernel.set_dct_downscale(dct_downscale);
        kernel
            .decode_sample(
                kind,
                StoredImage {
                    mode,
                    width,
                    height,
                    data: input.data,
                },
                &mut rng,
                ImageOut {
                    pixels: out,
                    height: out_h,
                    width: out_w,
                },
            )
            .map_err(|e| e.to_string())
    })
}

/// FFCV's `SimpleRGBImageDecoder`: every image at its stored size (raw pixels copied, JPEG
/// decoded at full resolution). Like FFCV, it needs every image of the field to have the
/// same size; a field whose sizes vary is refused when the loader is built.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimpleRGBImageDecoder;

impl Decoder for SimpleRGBImageDecoder {
    fn name(&self) -> String {
        "SimpleRGBImageDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        expect_image(info)?;
        let mut size: Option<(u16, u16)> = None;
        for sample in 0..info.reader.num_samples() {
            let meta = info
                .reader
                .metadata(sample, info.index)
                .map_err(|e| e.to_string())?;
            let FieldMetadata::RgbImage { width, height, .. } = meta else {
                return Err(format!("sample {sample} has no image metadata").into());
            };
            match size {
                None => size = Some((height, width)),
                Some((h, w)) if (h, w) != (height, width) => {
                    return Err(format!(
                        "needs every image at one size, but sample 0 is {h}x{w} and sample \
                         {sample} is {height}x{width}; choose a crop decoder \
                         (`--decoder FIELD=center-crop:HxW` or `random-resized-crop:HxW`) or \
                         disable the field (`--decoder FIELD=none`)"
                    )
                    .into());
                }
                Some(_) => {}
            }
        }
        let (h, w) = size.ok_or("cannot tell the image size of a file without samples")?;
        check_area(h, w, info.max_image_pixels).map_err(|e| format!("sample 0: {e}"))?;
        image_output(u32::from(h), u32::from(w)).map_err(Into::into)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        let (_, width, height) = input
            .image_header()
            .ok_or("metadata too short for an RGBImageField")?;
        decode_with(
            (&RgbDecoderKind::Simple, false),
            input,
            out,
            u32::from(height),
            u32::from(width),
        )
        .map_err(Into::into)
    }
}

/// FFCV's `CenterCropRGBImageDecoder(output_size, ratio)`: the centred square of side
/// `int(ratio * min(h, w))`, resized to `output_size` with `INTER_AREA`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CenterCropRGBImageDecoder {
    /// Output `(height, width)`.
    pub output_size: (u32, u32),
    /// Crop side over the image's short side.
    pub ratio: f64,
    /// The opt-in DCT-domain downscaling (off: FFCV's pixels); see
    /// [`CenterCropRGBImageDecoder::dct_downscale`].
    pub dct_downscale: bool,
}

impl CenterCropRGBImageDecoder {
    /// FFCV's default ratio, `224 / 256`.
    pub const DEFAULT_RATIO: f64 = 224.0 / 256.0;

    /// A decoder to `output_size` (`(height, width)`) with `ratio`.
    pub fn new(output_size: (u32, u32), ratio: f64) -> Self {
        CenterCropRGBImageDecoder {
            output_size,
            ratio,
            dct_downscale: false,
        }
    }

    /// Turns on (or off) DCT-domain downscaling: where the crop is at least twice the
    /// output on both axes, the JPEG is decoded at 1/2, 1/4 or 1/8 scale from its DCT
    /// coefficients and the reduced crop resized (faster; the pixels differ from FFCV's,
    /// by about 30 dB PSNR on photos: see docs/benchmarking.md).
    /// [`rgb_image::RgbDecoderKernel::set_dct_downscale`] has the rules.
    pub fn dct_downscale(mut self, on: bool) -> Self {
        self.dct_downscale = on;
        self
    }
}

impl Decoder for CenterCropRGBImageDecoder {
    fn name(&self) -> String {
        "CenterCropRGBImageDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        expect_image(info)?;
        if !(self.ratio > 0.0 && self.ratio.is_finite()) {
            return Err(format!("ratio {} is not a positive number", self.ratio).into());
        }
        image_output(self.output_size.0, self.output_size.1).map_err(Into::into)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        let kind = RgbDecoderKind::CenterCrop { ratio: self.ratio };
        let (h, w) = self.output_size;
        decode_with((&kind, self.dct_downscale), input, out, h, w).map_err(Into::into)
    }

    fn dct_downscale(&self) -> bool {
        self.dct_downscale
    }

    fn image_view(&self) -> Option<(RgbDecoderKind, (u32, u32))> {
        Some((
            RgbDecoderKind::CenterCrop { ratio: self.ratio },
            self.output_size,
        ))
    }
}

/// FFCV's `RandomResizedCropRGBImageDecoder(output_size, scale, ratio)`: torchvision's
/// random crop box (10 tries, then the centre fallback) resized to `output_size` with
/// `INTER_AREA`. The box is drawn from the sample's generator, so it depends only on the
/// loader's seed, the epoch and the sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomResizedCropRGBImageDecoder {
    /// Output `(height, width)`.
    pub output_size: (u32, u32),
    /// Area fraction and aspect ratio ranges.
    pub params: RandomResizedCrop,
    /// The opt-in DCT-domain downscaling (off: FFCV's pixels); see
    /// [`RandomResizedCropRGBImageDecoder::dct_downscale`].
    pub dct_downscale: bool,
}

impl RandomResizedCropRGBImageDecoder {
    /// A decoder to `output_size` with FFCV's defaults `scale=(0.08, 1)`,
    /// `ratio=(3/4, 4/3)`.
    pub fn new(output_size: (u32, u32)) -> Self {
        RandomResizedCropRGBImageDecoder {
            output_size,
            params: RandomResizedCrop::default(),
            dct_downscale: false,
        }
    }

    /// Turns on (or off) DCT-domain downscaling, as
    /// [`CenterCropRGBImageDecoder::dct_downscale`]: only crops at least twice the output
    /// on both axes are reduced (with 224x224 outputs of ~400 px photos, rarely any).
    pub fn dct_downscale(mut self, on: bool) -> Self {
        self.dct_downscale = on;
        self
    }

    /// Sets the area fraction range.
    pub fn scale(mut self, lo: f64, hi: f64) -> Self {
        self.params.scale = (lo, hi);
        self
    }

    /// Sets the aspect ratio (`w / h`) range.
    pub fn ratio(mut self, lo: f64, hi: f64) -> Self {
        self.params.ratio = (lo, hi);
        self
    }
}

impl Decoder for RandomResizedCropRGBImageDecoder {
    fn name(&self) -> String {
        "RandomResizedCropRGBImageDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        expect_image(info)?;
        let (s, r) = (self.params.scale, self.params.ratio);
        let ordered = |(lo, hi): (f64, f64)| lo > 0.0 && lo <= hi && hi.is_finite();
        if !ordered(s) || !ordered(r) {
            return Err(
                format!("scale {s:?} and ratio {r:?} must be positive (lo, hi) ranges").into(),
            );
        }
        image_output(self.output_size.0, self.output_size.1).map_err(Into::into)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        let kind = RgbDecoderKind::RandomResizedCrop(self.params);
        let (h, w) = self.output_size;
        decode_with((&kind, self.dct_downscale), input, out, h, w).map_err(Into::into)
    }

    fn dct_downscale(&self) -> bool {
        self.dct_downscale
    }

    fn image_view(&self) -> Option<(RgbDecoderKind, (u32, u32))> {
        Some((
            RgbDecoderKind::RandomResizedCrop(self.params),
            self.output_size,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::check_area;

    #[test]
    fn areas_over_the_cap_are_refused() {
        assert!(check_area(65000, 65000, super::super::DEFAULT_MAX_IMAGE_PIXELS).is_err());
        assert!(check_area(8736, 11648, super::super::DEFAULT_MAX_IMAGE_PIXELS).is_ok());
        assert!(check_area(10, 10, 100).is_ok());
        let err = check_area(10, 11, 100).unwrap_err();
        assert!(err.contains("10x11 = 110 pixels") && err.contains("max_image_pixels of 100"));
    }
}
