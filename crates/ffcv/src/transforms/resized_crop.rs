//! FFCV's `RandomResizedCrop` transform: a crop of a decoded `u8 [H, W, 3]` image by
//! torchvision's rule, resized to `size x size` with OpenCV's `INTER_AREA`, per sample.
//!
//! The box comes from rgb-image's `random_resized_crop_box` (FFCV's `get_random_crop`: ten
//! tries of an area fraction in `scale` and a log-uniform aspect ratio in `ratio`, then
//! the centre crop of the clamped ratio) drawn from the sample's generator, and the resize
//! is the one the crop decoders use, so the transform after `SimpleRGBImageDecoder` gives
//! what `RandomResizedCropRGBImageDecoder` gives for the same box. (The decoder is faster:
//! it decodes only what the crop needs.)
//!
//! ```
//! use ffcv::jit::{ElemType, Operation, State};
//! use ffcv::transforms::resized_crop::random_resized_crop;
//!
//! let op = random_resized_crop(64, (0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))?;
//! let lowered = op.lower(&State::cpu([480, 640, 3], ElemType::U8)).unwrap();
//! assert_eq!(lowered.output().shape, [64, 64, 3]);
//! assert!(random_resized_crop(0, (0.08, 1.0), (0.75, 1.33)).is_err());
//! # Ok::<(), ffcv::transforms::BadParameter>(())
//! ```

use std::cell::RefCell;

use pipeline_jit::rng::sample_rng;
use pipeline_jit::{ElemType, KernelCall, Lowered, NativeKernel, Operation, State};
use rgb_image::{AreaResizer, RandomResizedCrop as CropRule, random_resized_crop_box};

use super::{BadParameter, bad};

thread_local! {
    /// One resizer per thread: its tables are kept between samples of one shape.
    static RESIZER: RefCell<AreaResizer> = RefCell::new(AreaResizer::new());
}

/// FFCV's `RandomResizedCrop(scale, ratio, size)` transform (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomResizedCrop {
    /// Side of the square output.
    pub size: usize,
    /// The crop's area as a fraction of the image's, drawn in this range.
    pub scale: (f64, f64),
    /// The crop's aspect ratio (width / height), drawn log-uniformly in this range.
    pub ratio: (f64, f64),
}

/// A [`RandomResizedCrop`], its parameters checked: `size > 0`, `0 < low <= high` for both
/// ranges (FFCV's defaults are `scale = (0.08, 1.0)`, `ratio = (3/4, 4/3)`).
pub fn random_resized_crop(
    size: usize,
    scale: (f64, f64),
    ratio: (f64, f64),
) -> Result<RandomResizedCrop, BadParameter> {
    const NAME: &str = "RandomResizedCrop";
    if size == 0 || u32::try_from(size).is_err() {
        return Err(bad(NAME, format!("size {size} must be in 1..2^32")));
    }
    for (what, (lo, hi)) in [("scale", scale), ("ratio", ratio)] {
        if !(lo > 0.0 && lo <= hi && hi.is_finite()) {
            return Err(bad(
                NAME,
                format!("{what} ({lo}, {hi}) must satisfy 0 < low <= high"),
            ));
        }
    }
    Ok(RandomResizedCrop { size, scale, ratio })
}

impl Operation for RandomResizedCrop {
    fn name(&self) -> String {
        "RandomResizedCrop".into()
    }

    fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        let (h, w) = match (input.dtype, input.shape.as_slice()) {
            (ElemType::U8, &[h, w, 3]) => (h, w),
            _ => {
                return Err(format!(
                    "takes u8 [H, W, 3] images, not {:?} {:?}",
                    input.dtype, input.shape
                )
                .into());
            }
        };
        let (Ok(h), Ok(w)) = (u32::try_from(h), u32::try_from(w)) else {
            return Err(format!("a {h}x{w} image is too large").into());
        };
        let side = self.size as u32;
        let rule = CropRule {
            scale: self.scale,
            ratio: self.ratio,
        };
        let output = State::cpu([self.size, self.size, 3], ElemType::U8);
        Ok(Lowered::Native(NativeKernel::from_fn(
            output,
            move |call: KernelCall<'_>| {
                let mut rng = sample_rng(call.seed);
                let crop = random_resized_crop_box(h, w, &rule, &mut rng);
                RESIZER.with(|r| {
                    r.borrow_mut()
                        .resize_crop_into(call.input, h, w, crop, call.output, side, side)
                        .map_err(|e| format!("crop {crop:?} of a {h}x{w} image: {e}"))
                })
            },
        )))
    }
}
