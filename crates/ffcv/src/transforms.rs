//! FFCV's transforms under their FFCV names, for a field's [`crate::PipelineSpec`].
//!
//! Most are pipeline-jit's built-in operations ([`pipeline_jit::ops`]): element-wise and
//! indexing ones lower to expressions that the JIT fuses with their neighbours, and the
//! random ones ([`RandomHorizontalFlip`], [`Cutout`], [`RandomTranslate`]) draw their
//! parameters from a generator seeded by (seed, epoch, sample, operation index), so a
//! batch is the same whatever the thread count. The constructors here give FFCV's
//! parameter forms and defaults and check the parameters ([`BadParameter`]), once for
//! every front end; the types are re-exported for full control.
//! [`ReplaceLabel`] and [`Poison`] are index-aware operations (native kernels that read
//! the sample id), as FFCV's `ReplaceLabel` and `Poison`. The native per-sample kernels of
//! FFCV's colour operations ([`colour`]), of its `RandomResizedCrop` transform
//! ([`resized_crop`]) and of `View` ([`view`]) draw from the sample's generator too;
//! [`mixup`] holds FFCV's batch-level mixup, functions on a whole batch.
//!
//! ```
//! use ffcv::decode::CenterCropRGBImageDecoder;
//! use ffcv::transforms::{self, IMAGENET_MEAN, IMAGENET_STD};
//! use ffcv::jit::ElemType;
//! use ffcv::{Loader, PipelineSpec};
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/ffcv-1.0.2/images_jpg.beton");
//! let image = PipelineSpec::new(CenterCropRGBImageDecoder::new((32, 32), 224.0 / 256.0))
//!     .then(transforms::random_horizontal_flip(0.5)?)
//!     .then(transforms::normalize_image(IMAGENET_MEAN, IMAGENET_STD, ElemType::F32)?)
//!     .then(transforms::to_torch_image());
//! let mut loader = Loader::builder(path).batch_size(8).seed(1).pipeline("image", image).build()?;
//! let batch = loader.iter().next().unwrap()?;
//! assert_eq!(batch.get::<f32>("image")?.shape(), &[8, 3, 32, 32]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod colour;
pub mod mixup;
pub mod resized_crop;
pub mod view;

use std::collections::HashSet;
use std::sync::Arc;

use pipeline_jit::{ElemType, KernelArgs, Lowered, NativeKernel, Operation, State};

pub use pipeline_jit::ops::{
    Clamp, Convert, Cutout, NormalizeImage, RandomHorizontalFlip, RandomTranslate, Scale, Squeeze,
    ToChw,
};

/// ImageNet's per-channel RGB means on the 0..255 scale (FFCV's examples' values).
pub const IMAGENET_MEAN: [f64; 3] = [0.485 * 255.0, 0.456 * 255.0, 0.406 * 255.0];
/// ImageNet's per-channel RGB standard deviations on the 0..255 scale.
pub const IMAGENET_STD: [f64; 3] = [0.229 * 255.0, 0.224 * 255.0, 0.225 * 255.0];

/// FFCV's `ToTensor` followed by `ToTorchImage`: `[H, W, C]` rows become `[C, H, W]`.
/// (Batches are typed buffers already, so the tensor conversion itself has nothing to do;
/// only the layout change remains.)
pub fn to_tensor() -> ToChw {
    ToChw
}

/// FFCV's `ToTorchImage(channels_last=False)`: `[H, W, C]` → `[C, H, W]`.
pub fn to_torch_image() -> ToChw {
    ToChw
}

/// FFCV's `Convert(dtype)` (Rust `as` semantics: floats to integers saturate).
pub fn convert(dtype: ElemType) -> Convert {
    Convert(dtype)
}

/// A transform parameter the transform cannot take. The constructors here check their
/// parameters once, for every front end (Rust, the command line's `--transform`, the
/// Python package); FFCV itself would assert, divide by zero or flip with a probability
/// outside `[0, 1]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{transform}: {reason}")]
pub struct BadParameter {
    /// The transform's FFCV name (`NormalizeImage`).
    pub transform: &'static str,
    /// What is wrong (`std 0 must be finite and non-zero`).
    pub reason: String,
}

fn bad(transform: &'static str, reason: String) -> BadParameter {
    BadParameter { transform, reason }
}

/// FFCV's `NormalizeImage(mean, std, type)`: `(x - mean[c]) / std[c]` per channel of an
/// `[H, W, 3]` image, as `dtype` (`F16`, `F32` or `F64`, each rounded once from the `f64`
/// value, as NumPy assigns FFCV's table); for `u8` input through a 256-entry table per
/// channel as FFCV does. A mean that is not finite, a std that is zero or not finite, or
/// an integer `dtype` is refused.
///
/// ```
/// use ffcv::jit::ElemType;
/// use ffcv::transforms::{IMAGENET_MEAN, normalize_image};
///
/// assert!(normalize_image(IMAGENET_MEAN, [58.4, 57.1, 57.4], ElemType::F16).is_ok());
/// let err = normalize_image(IMAGENET_MEAN, [58.4, 0.0, 57.4], ElemType::F32).unwrap_err();
/// assert_eq!(err.to_string(), "NormalizeImage: std 0 must be finite and non-zero");
/// assert!(normalize_image(IMAGENET_MEAN, [1.0; 3], ElemType::U8).is_err());
/// ```
pub fn normalize_image(
    mean: [f64; 3],
    std: [f64; 3],
    dtype: ElemType,
) -> Result<NormalizeImage, BadParameter> {
    normalize_channels(&mean, &std, dtype)
}

/// [`normalize_image`] for images of any channel count (an ImageField's 1, 3 or 4
/// channels, 8- or 16-bit): one mean and one std per channel, checked as there; the
/// counts must match each other (the image's channels are checked when the pipeline is
/// built). 8-bit input goes through the 256-entry table, 16-bit input is computed
/// directly in `f64` and rounded once to `dtype`.
///
/// ```
/// use ffcv::jit::ElemType;
/// use ffcv::transforms::normalize_channels;
///
/// assert!(normalize_channels(&[32768.0], &[16384.0], ElemType::F32).is_ok());
/// let err = normalize_channels(&[0.0; 4], &[1.0; 3], ElemType::F32).unwrap_err();
/// assert_eq!(err.to_string(), "NormalizeImage: 4 means but 3 stds");
/// ```
pub fn normalize_channels(
    mean: &[f64],
    std: &[f64],
    dtype: ElemType,
) -> Result<NormalizeImage, BadParameter> {
    const NAME: &str = "NormalizeImage";
    if mean.len() != std.len() || mean.is_empty() {
        return Err(bad(
            NAME,
            format!("{} means but {} stds", mean.len(), std.len()),
        ));
    }
    if let Some(s) = std.iter().find(|s| **s == 0.0 || !s.is_finite()) {
        return Err(bad(NAME, format!("std {s} must be finite and non-zero")));
    }
    if let Some(m) = mean.iter().find(|m| !m.is_finite()) {
        return Err(bad(NAME, format!("mean {m} must be finite")));
    }
    if !dtype.is_float() {
        return Err(bad(
            NAME,
            format!("it writes floats; {dtype:?} is not f16, f32 or f64"),
        ));
    }
    Ok(NormalizeImage {
        mean: mean.to_vec(),
        std: std.to_vec(),
        dtype,
    })
}

/// FFCV's `RandomHorizontalFlip(flip_prob)` (FFCV's default is 0.5); a probability
/// outside `[0, 1]` (or NaN) is refused.
///
/// ```
/// use ffcv::transforms::random_horizontal_flip;
///
/// assert!(random_horizontal_flip(0.5).is_ok());
/// let err = random_horizontal_flip(1.5).unwrap_err();
/// assert_eq!(err.to_string(), "RandomHorizontalFlip: flip_prob 1.5 is not in [0, 1]");
/// assert!(random_horizontal_flip(f64::NAN).is_err());
/// ```
pub fn random_horizontal_flip(flip_prob: f64) -> Result<RandomHorizontalFlip, BadParameter> {
    if !(0.0..=1.0).contains(&flip_prob) {
        return Err(bad(
            "RandomHorizontalFlip",
            format!("flip_prob {flip_prob} is not in [0, 1]"),
        ));
    }
    Ok(RandomHorizontalFlip(flip_prob))
}

/// FFCV's `Cutout(crop_size, fill)`: a `crop_size` square at a random place filled with
/// the per-channel `fill` (FFCV's default `(0, 0, 0)`).
pub fn cutout(crop_size: usize, fill: [u8; 3]) -> Cutout {
    Cutout {
        size: crop_size,
        fill: fill.iter().map(|&v| f64::from(v)).collect(),
    }
}

/// FFCV's `RandomTranslate(padding, fill)`: shift by up to `padding` pixels each way,
/// uncovered pixels get `fill` (FFCV's default `(0, 0, 0)`).
pub fn random_translate(padding: usize, fill: [u8; 3]) -> RandomTranslate {
    RandomTranslate {
        padding,
        fill: fill.iter().map(|&v| f64::from(v)).collect(),
    }
}

/// FFCV's `Squeeze()`: drops every axis of length 1 (labels `[B, 1]` → `[B]`).
pub fn squeeze() -> Squeeze {
    Squeeze
}

/// FFCV's `ReplaceLabel(indices, new_label)`: the label of every sample whose id is in
/// `indices` becomes `new_label`; others pass unchanged. Goes after an `IntDecoder`
/// (an `i64` or `i32` row of one value). Reads the sample id, so it is a native kernel:
/// it costs one set lookup per sample.
#[derive(Debug, Clone)]
pub struct ReplaceLabel {
    context: Arc<ReplaceContext>,
}

#[derive(Debug)]
struct ReplaceContext {
    indices: HashSet<u64>,
    new_label: i64,
    width: usize,
}

impl ReplaceLabel {
    /// Replaces the label of the samples in `indices` with `new_label`.
    pub fn new(indices: impl IntoIterator<Item = u64>, new_label: i64) -> ReplaceLabel {
        ReplaceLabel {
            context: Arc::new(ReplaceContext {
                indices: indices.into_iter().collect(),
                new_label,
                width: 0,
            }),
        }
    }
}

impl Operation for ReplaceLabel {
    fn name(&self) -> String {
        "ReplaceLabel".into()
    }

    fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        if input.shape.iter().product::<usize>() != 1 {
            return Err(format!(
                "replaces one label per sample, but rows have shape {:?}",
                input.shape
            )
            .into());
        }
        let width = match input.dtype {
            ElemType::I64 => 8,
            ElemType::I32 => {
                if i32::try_from(self.context.new_label).is_err() {
                    return Err(format!(
                        "label {} does not fit the i32 rows",
                        self.context.new_label
                    )
                    .into());
                }
                4
            }
            other => return Err(format!("labels are i64 or i32, not {other:?}").into()),
        };
        let context = Arc::new(ReplaceContext {
            indices: self.context.indices.clone(),
            new_label: self.context.new_label,
            width,
        });
        Ok(Lowered::Native(NativeKernel::new(
            input.clone(),
            replace_label_kernel,
            context,
        )))
    }
}

/// The kernel of [`ReplaceLabel`]: copies the row, or writes the new label.
///
/// # Safety
/// `args` satisfies pipeline-jit's `KernelFn` contract and its context is the
/// `ReplaceContext` the kernel was lowered with.
unsafe extern "C" fn replace_label_kernel(args: *const KernelArgs) -> i32 {
    // SAFETY: pipeline-jit passes a valid, live `KernelArgs` (the `KernelFn` contract).
    let args = unsafe { &*args };
    // SAFETY: `ReplaceLabel::lower` registered this kernel with an `Arc<ReplaceContext>`.
    let ctx: &ReplaceContext = unsafe { args.context() };
    // SAFETY: inside the kernel call; input and output are taken once each.
    let (input, output) = unsafe { (args.input(), args.output()) };
    if input.len() != ctx.width || output.len() != ctx.width {
        return 1;
    }
    if ctx.indices.contains(&args.sample) {
        let bytes = ctx.new_label.to_ne_bytes();
        // Little- and big-endian both: the low `width` bytes of the i64 in native order.
        let low = if cfg!(target_endian = "little") {
            &bytes[..ctx.width]
        } else {
            &bytes[8 - ctx.width..]
        };
        output.copy_from_slice(low);
    } else {
        output.copy_from_slice(input);
    }
    0
}

/// FFCV's `Poison(mask, alpha, indices, clamp)`: the images of the samples in `indices`
/// are blended with `mask` at per-pixel opacity `alpha`, clamped to `clamp`; others pass
/// unchanged. Goes after an image decoder (`[H, W, 3]` rows of `u8` or `f32`). The
/// arithmetic is FFCV's: `mask * alpha` in `f64`; then, in an `f32` temporary,
/// `x * (1 - alpha)` and `+ mask * alpha` (each computed in `f64` and stored as `f32`, as
/// numpy's in-place operations do), clipped, and stored back in the image's type
/// (truncating, for `u8`).
#[derive(Debug, Clone)]
pub struct Poison {
    context: Arc<PoisonContext>,
}

#[derive(Debug, Clone)]
struct PoisonContext {
    height: usize,
    width: usize,
    /// `mask * alpha` per element (`[H, W, 3]`).
    mask_alpha: Vec<f64>,
    /// `1 - alpha` per pixel (`[H, W]`).
    keep: Vec<f64>,
    indices: HashSet<u64>,
    clamp: (f32, f32),
    /// Whether rows are `u8` (else `f32`).
    bytes: bool,
}

impl Poison {
    /// Poisons the samples in `indices` of `height x width` images with `mask`
    /// (`[H, W, 3]` values) at opacity `alpha` (`[H, W]`), clamping to `clamp` (FFCV's
    /// default `(0, 255)`). Fails if the lengths do not match the size or the clamp range
    /// is empty.
    pub fn new(
        height: usize,
        width: usize,
        mask: &[f64],
        alpha: &[f64],
        indices: impl IntoIterator<Item = u64>,
        clamp: (f64, f64),
    ) -> Result<Poison, String> {
        let pixels = height
            .checked_mul(width)
            .ok_or_else(|| format!("{height}x{width} is too large"))?;
        if alpha.len() != pixels || mask.len() != pixels * 3 {
            return Err(format!(
                "a {height}x{width} poison needs {} mask and {pixels} alpha values, got {} and {}",
                pixels * 3,
                mask.len(),
                alpha.len()
            ));
        }
        if clamp.0.partial_cmp(&clamp.1).is_none() || clamp.0 > clamp.1 {
            return Err(format!("clamp range {clamp:?} is empty"));
        }
        let mask_alpha = mask
            .iter()
            .enumerate()
            .map(|(k, &m)| m * alpha[k / 3])
            .collect();
        Ok(Poison {
            context: Arc::new(PoisonContext {
                height,
                width,
                mask_alpha,
                keep: alpha.iter().map(|&a| 1.0 - a).collect(),
                indices: indices.into_iter().collect(),
                clamp: (clamp.0 as f32, clamp.1 as f32),
                bytes: true,
            }),
        })
    }

    /// For an `alpha` the user gave as float32: FFCV then computes `1 - alpha` in float32
    /// (NumPy keeps the array's type), so the opacity that multiplies the image is that
    /// rounded value. (`mask * alpha` is float64 either way.)
    pub fn alpha_in_float32(mut self) -> Poison {
        let c = Arc::make_mut(&mut self.context);
        // `1 - k` gives alpha back exactly for every float32 alpha above 2^-29; below,
        // `1 - alpha` rounds to 1 in float32 either way.
        c.keep = c
            .keep
            .iter()
            .map(|&k| f64::from(1.0f32 - (1.0 - k) as f32))
            .collect();
        self
    }
}

impl Operation for Poison {
    fn name(&self) -> String {
        "Poison".into()
    }

    fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        let c = &self.context;
        if input.shape != [c.height, c.width, 3] {
            return Err(format!(
                "poisons [{}, {}, 3] images, not rows of shape {:?}",
                c.height, c.width, input.shape
            )
            .into());
        }
        let bytes = match input.dtype {
            ElemType::U8 => true,
            ElemType::F32 => false,
            other => return Err(format!("poisons u8 or f32 images, not {other:?}").into()),
        };
        let context = Arc::new(PoisonContext {
            height: c.height,
            width: c.width,
            mask_alpha: c.mask_alpha.clone(),
            keep: c.keep.clone(),
            indices: c.indices.clone(),
            clamp: c.clamp,
            bytes,
        });
        Ok(Lowered::Native(NativeKernel::new(
            input.clone(),
            poison_kernel,
            context,
        )))
    }
}

impl PoisonContext {
    /// One element: FFCV's float32 temporary, step by step.
    fn blend(&self, k: usize, x: f32) -> f32 {
        let t = (f64::from(x) * self.keep[k / 3]) as f32;
        let t = (f64::from(t) + self.mask_alpha[k]) as f32;
        t.max(self.clamp.0).min(self.clamp.1)
    }

    fn run(&self, sample: u64, input: &[u8], output: &mut [u8]) -> bool {
        let n = self.height * self.width * 3;
        let item = if self.bytes { 1 } else { 4 };
        if input.len() != n * item || output.len() != n * item {
            return false;
        }
        if !self.indices.contains(&sample) {
            output.copy_from_slice(input);
            return true;
        }
        if self.bytes {
            for (k, (o, &x)) in output.iter_mut().zip(input).enumerate() {
                // numpy's float -> uint8 assignment truncates; the value is clipped already.
                *o = self.blend(k, f32::from(x)) as u8;
            }
        } else {
            for (k, (o, x)) in output
                .chunks_exact_mut(4)
                .zip(input.chunks_exact(4))
                .enumerate()
            {
                let x = f32::from_ne_bytes([x[0], x[1], x[2], x[3]]);
                o.copy_from_slice(&self.blend(k, x).to_ne_bytes());
            }
        }
        true
    }
}

/// The kernel of [`Poison`].
///
/// # Safety
/// `args` satisfies pipeline-jit's `KernelFn` contract and its context is the
/// `PoisonContext` the kernel was lowered with.
unsafe extern "C" fn poison_kernel(args: *const KernelArgs) -> i32 {
    // SAFETY: pipeline-jit passes a valid, live `KernelArgs` (the `KernelFn` contract).
    let args = unsafe { &*args };
    // SAFETY: `Poison::lower` registered this kernel with an `Arc<PoisonContext>`.
    let ctx: &PoisonContext = unsafe { args.context() };
    // SAFETY: inside the kernel call; input and output are taken once each.
    let (input, output) = unsafe { (args.input(), args.output()) };
    if ctx.run(args.sample, input, output) {
        0
    } else {
        1
    }
}
