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

use beton_io::{DType as NumpyDType, FieldMetadata, FieldType};
use pipeline_jit::rng::sample_rng;

use super::{Decoder, DecoderOutput, FieldInfo, OutputKind, SampleInput};
use crate::image::{RandomResizedCrop, RgbDecoderKernel, RgbDecoderKind};

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
        NumpyDType::u8(),
        OutputKind::Array,
    );
    if out.row_bytes().is_none() {
        return Err(format!("output size {height}x{width} exceeds memory"));
    }
    Ok(out)
}

/// `(height, width)` from a JPEG's frame header (SOFn), read by walking the marker
/// segments without allocating; `None` if the bytes end or a scan starts before one.
fn frame_size(jpeg: &[u8]) -> Option<(u16, u16)> {
    let be16 = |at: usize| Some(u16::from_be_bytes([*jpeg.get(at)?, *jpeg.get(at + 1)?]));
    if jpeg.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    let mut at = 2;
    loop {
        if *jpeg.get(at)? != 0xFF {
            return None;
        }
        // Fill bytes: any number of 0xFF before the marker code.
        while *jpeg.get(at)? == 0xFF {
            at += 1;
        }
        let marker = *jpeg.get(at)?;
        at += 1;
        match marker {
            // Markers without a length.
            0x01 | 0xD0..=0xD8 => continue,
            // End of image or start of scan before any frame header.
            0xD9 | 0xDA => return None,
            _ => {}
        }
        let len = usize::from(be16(at)?);
        if matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            return Some((be16(at + 3)?, be16(at + 5)?));
        }
        if len < 2 {
            return None;
        }
        at += len;
    }
}

/// Decodes one sample with the thread's kernel into an `out_h x out_w` row.
fn decode_with(
    kind: &RgbDecoderKind,
    input: &SampleInput<'_>,
    out: &mut [u8],
    out_h: u32,
    out_w: u32,
) -> Result<(), String> {
    let (mode, width, height) = input
        .image_header()
        .ok_or("metadata too short for an RGBImageField")?;
    if mode == beton_io::IMAGE_MODE_JPEG {
        // Check the JPEG header against the metadata before the kernel sizes its
        // full-resolution buffer from the metadata.
        let (h, w) = frame_size(input.data).ok_or_else(|| {
            format!(
                "JPEG decode failed ({} bytes of input): no frame header",
                input.data.len()
            )
        })?;
        if (h, w) != (height, width) {
            return Err(format!(
                "the JPEG is {h}x{w} but the metadata says {height}x{width}"
            ));
        }
    }
    let mut rng = sample_rng(input.seed);
    KERNEL.with(|kernel| {
        let mut kernel = kernel
            .try_borrow_mut()
            .map_err(|_| "image kernel re-entered on one thread".to_owned())?;
        kernel
            .decode_sample(
                kind, mode, width, height, input.data, &mut rng, out, out_h, out_w,
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

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, String> {
        expect_image(info)?;
        let mut size: Option<(u16, u16)> = None;
        for sample in 0..info.reader.num_samples() {
            let meta = info
                .reader
                .metadata(sample, info.index)
                .map_err(|e| e.to_string())?;
            let FieldMetadata::RgbImage { width, height, .. } = meta else {
                return Err(format!("sample {sample} has no image metadata"));
            };
            match size {
                None => size = Some((height, width)),
                Some((h, w)) if (h, w) != (height, width) => {
                    return Err(format!(
                        "needs every image at one size, but sample 0 is {h}x{w} and sample \
                         {sample} is {height}x{width}; choose a crop decoder \
                         (`--decoder FIELD=center-crop:HxW` or `random-resized-crop:HxW`) or \
                         disable the field (`--decoder FIELD=none`)"
                    ));
                }
                Some(_) => {}
            }
        }
        let (h, w) = size.ok_or("cannot tell the image size of a file without samples")?;
        image_output(u32::from(h), u32::from(w))
    }

    fn decode(&self, input: &SampleInput<'_>, out: &mut [u8], _: &mut [u8]) -> Result<(), String> {
        let (_, width, height) = input
            .image_header()
            .ok_or("metadata too short for an RGBImageField")?;
        decode_with(
            &RgbDecoderKind::Simple,
            input,
            out,
            u32::from(height),
            u32::from(width),
        )
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
}

impl CenterCropRGBImageDecoder {
    /// FFCV's default ratio, `224 / 256`.
    pub const DEFAULT_RATIO: f64 = 224.0 / 256.0;

    /// A decoder to `output_size` (`(height, width)`) with `ratio`.
    pub fn new(output_size: (u32, u32), ratio: f64) -> Self {
        CenterCropRGBImageDecoder { output_size, ratio }
    }
}

impl Decoder for CenterCropRGBImageDecoder {
    fn name(&self) -> String {
        "CenterCropRGBImageDecoder".into()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, String> {
        expect_image(info)?;
        if !(self.ratio > 0.0 && self.ratio.is_finite()) {
            return Err(format!("ratio {} is not a positive number", self.ratio));
        }
        image_output(self.output_size.0, self.output_size.1)
    }

    fn decode(&self, input: &SampleInput<'_>, out: &mut [u8], _: &mut [u8]) -> Result<(), String> {
        let kind = RgbDecoderKind::CenterCrop { ratio: self.ratio };
        decode_with(&kind, input, out, self.output_size.0, self.output_size.1)
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
}

impl RandomResizedCropRGBImageDecoder {
    /// A decoder to `output_size` with FFCV's defaults `scale=(0.08, 1)`,
    /// `ratio=(3/4, 4/3)`.
    pub fn new(output_size: (u32, u32)) -> Self {
        RandomResizedCropRGBImageDecoder {
            output_size,
            params: RandomResizedCrop::default(),
        }
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

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, String> {
        expect_image(info)?;
        let (s, r) = (self.params.scale, self.params.ratio);
        let ordered = |(lo, hi): (f64, f64)| lo > 0.0 && lo <= hi && hi.is_finite();
        if !ordered(s) || !ordered(r) {
            return Err(format!(
                "scale {s:?} and ratio {r:?} must be positive (lo, hi) ranges"
            ));
        }
        image_output(self.output_size.0, self.output_size.1)
    }

    fn decode(&self, input: &SampleInput<'_>, out: &mut [u8], _: &mut [u8]) -> Result<(), String> {
        let kind = RgbDecoderKind::RandomResizedCrop(self.params);
        decode_with(&kind, input, out, self.output_size.0, self.output_size.1)
    }
}

#[cfg(test)]
mod tests {
    use super::frame_size;
    use crate::image::{SyntheticImageSpec, synthetic_jpeg};

    #[test]
    fn frame_size_reads_the_header_and_refuses_damage() {
        let spec = SyntheticImageSpec {
            min_side: 20,
            max_side: 70,
        };
        for i in 0..8 {
            let (jpeg, w, h) = synthetic_jpeg(1, i, spec, 80).unwrap();
            assert_eq!(frame_size(&jpeg), Some((h as u16, w as u16)));
            // Every truncation either still holds the header or is refused; none panics.
            for cut in 0..jpeg.len().min(700) {
                let got = frame_size(&jpeg[..cut]);
                assert!(got.is_none() || got == Some((h as u16, w as u16)));
            }
        }
        assert_eq!(frame_size(b"\xFF\xD8\xFF\xDA\x00\x02"), None);
        assert_eq!(frame_size(b"PNG"), None);
    }
}
