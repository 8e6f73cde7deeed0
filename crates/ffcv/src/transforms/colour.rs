//! FFCV's colour operations (`RandomBrightness`, `RandomContrast`, `RandomSaturation`)
//! as native per-sample kernels.
//!
//! Each blends a `u8 [H, W, C]` image with something else by a factor `r`:
//! `clip(r * x + (1 - r) * other, 0, 255)`, truncated to `u8`, in `f64` as NumPy evaluates
//! FFCV's expression. `other` is black (brightness), the mean of the image's grey level
//! (contrast) or the pixel's grey level (saturation), the grey level being ITU-R 601's
//! `0.2989 R + 0.587 G + 0.114 B` truncated to `u8`. The operation applies with
//! probability `p` and `r` is uniform in `[max(0, 1 - magnitude), 1 + magnitude]`: both
//! drawn by [`colour_draw`] from the sample's generator, which pipeline-jit seeds with
//! (seed, epoch, sample, operation index), so a resumed epoch repeats them.
//!
//! ```
//! use ffcv::transforms::colour::{self, Colour};
//!
//! // A 1x2 image: a dark red pixel and a grey one, made 50% brighter.
//! let image = [100u8, 20, 20, 200, 200, 200];
//! let mut out = [0u8; 6];
//! colour::blend(Colour::Brightness, &image, &mut out, (1, 2, 3), 1.5)?;
//! assert_eq!(out, [150, 30, 30, 255, 255, 255]);
//! assert!(colour::random_brightness(0.4, 1.5).is_err()); // p outside [0, 1]
//! # Ok::<(), String>(())
//! ```

use pipeline_jit::rng::sample_rng;
use pipeline_jit::{ElemType, KernelCall, Lowered, NativeKernel, Operation, State};
use rand_core::RngCore;

use super::{BadParameter, bad};

/// What a colour operation blends the image with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    /// Black: `RandomBrightness`.
    Brightness,
    /// The mean grey level of the image: `RandomContrast`.
    Contrast,
    /// Each pixel's grey level: `RandomSaturation`.
    Saturation,
}

impl Colour {
    /// FFCV's name of the operation.
    pub fn name(self) -> &'static str {
        match self {
            Colour::Brightness => "RandomBrightness",
            Colour::Contrast => "RandomContrast",
            Colour::Saturation => "RandomSaturation",
        }
    }
}

/// One of FFCV's colour operations (see the module documentation); build it with
/// [`random_brightness`], [`random_contrast`] or [`random_saturation`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColourJitter {
    /// Which operation.
    pub colour: Colour,
    /// The factor is drawn in `[max(0, 1 - magnitude), 1 + magnitude]`.
    pub magnitude: f64,
    /// Probability that a sample is changed.
    pub p: f64,
}

fn checked(colour: Colour, magnitude: f64, p: f64) -> Result<ColourJitter, BadParameter> {
    if !(magnitude.is_finite() && magnitude >= 0.0) {
        return Err(bad(
            colour.name(),
            format!("magnitude {magnitude} must be finite and >= 0"),
        ));
    }
    if !(0.0..=1.0).contains(&p) {
        return Err(bad(colour.name(), format!("p {p} is not in [0, 1]")));
    }
    Ok(ColourJitter {
        colour,
        magnitude,
        p,
    })
}

/// FFCV's `RandomBrightness(magnitude, p)` (FFCV's default `p` is 0.5).
pub fn random_brightness(magnitude: f64, p: f64) -> Result<ColourJitter, BadParameter> {
    checked(Colour::Brightness, magnitude, p)
}

/// FFCV's `RandomContrast(magnitude, p)`.
pub fn random_contrast(magnitude: f64, p: f64) -> Result<ColourJitter, BadParameter> {
    checked(Colour::Contrast, magnitude, p)
}

/// FFCV's `RandomSaturation(magnitude, p)`.
pub fn random_saturation(magnitude: f64, p: f64) -> Result<ColourJitter, BadParameter> {
    checked(Colour::Saturation, magnitude, p)
}

/// A uniform draw in `[0, 1)` from 53 random bits.
fn unit(rng: &mut impl RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The draw of one sample from its generator seed (`KernelArgs::seed`): `None` when the
/// operation leaves the sample alone (probability `1 - p`), else the factor, uniform in
/// `[max(0, 1 - magnitude), 1 + magnitude]`.
pub fn colour_draw(p: f64, magnitude: f64, sample_seed: u64) -> Option<f64> {
    let mut rng = sample_rng(sample_seed);
    let applied = unit(&mut rng) < p;
    let lo = (1.0 - magnitude).max(0.0);
    let factor = lo + (1.0 + magnitude - lo) * unit(&mut rng);
    applied.then_some(factor)
}

/// `clip(r * x + (1 - r) * other, 0, 255)` truncated to `u8`, FFCV's `blend`.
#[inline]
fn mix(r: f64, x: u8, other: f64) -> u8 {
    // `as u8` truncates and saturates; the clip keeps the value in range anyway.
    (r * f64::from(x) + (1.0 - r) * other).clamp(0.0, 255.0) as u8
}

/// A pixel's grey level, ITU-R 601 weights, truncated to `u8` (FFCV's `astype`).
#[inline]
fn grey(px: &[u8]) -> u8 {
    (0.2989 * f64::from(px[0]) + 0.587 * f64::from(px[1]) + 0.114 * f64::from(px[2])) as u8
}

/// Applies `colour` with factor `factor` to the `u8 (h, w, c)` image `input`, into
/// `output` (FFCV's formula, see the module documentation). Contrast and saturation need
/// at least 3 channels (the first three are R, G, B).
pub fn blend(
    colour: Colour,
    input: &[u8],
    output: &mut [u8],
    (h, w, c): (usize, usize, usize),
    factor: f64,
) -> Result<(), String> {
    let n = h * w * c;
    if input.len() != n || output.len() != n {
        return Err(format!(
            "{}: a {h}x{w}x{c} image is {n} bytes, got {} in and {} out",
            colour.name(),
            input.len(),
            output.len()
        ));
    }
    if colour != Colour::Brightness && c < 3 {
        return Err(format!(
            "{} needs RGB images, not {c} channels",
            colour.name()
        ));
    }
    match colour {
        Colour::Brightness => {
            for (o, &x) in output.iter_mut().zip(input) {
                *o = mix(factor, x, 0.0);
            }
        }
        Colour::Contrast => {
            let total: u64 = input.chunks_exact(c).map(|px| u64::from(grey(px))).sum();
            let mean = total as f64 / (h * w).max(1) as f64;
            // The blend takes 256 values only: one table for the image.
            let table: Vec<u8> = (0..=255u8).map(|x| mix(factor, x, mean)).collect();
            for (o, &x) in output.iter_mut().zip(input) {
                *o = table[usize::from(x)];
            }
        }
        Colour::Saturation => {
            for (out, px) in output.chunks_exact_mut(c).zip(input.chunks_exact(c)) {
                let g = f64::from(grey(px));
                for (o, &x) in out.iter_mut().zip(px) {
                    *o = mix(factor, x, g);
                }
            }
        }
    }
    Ok(())
}

impl Operation for ColourJitter {
    fn name(&self) -> String {
        self.colour.name().into()
    }

    fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        let (h, w, c) = match (input.dtype, input.shape.as_slice()) {
            (ElemType::U8, &[h, w, c]) => (h, w, c),
            _ => {
                return Err(format!(
                    "takes u8 [H, W, C] images, not {:?} {:?}",
                    input.dtype, input.shape
                )
                .into());
            }
        };
        if self.colour != Colour::Brightness && c < 3 {
            return Err(format!("needs RGB images, not {c} channels").into());
        }
        let op = *self;
        Ok(Lowered::Native(NativeKernel::from_fn(
            input.clone(),
            move |call: KernelCall<'_>| match colour_draw(op.p, op.magnitude, call.seed) {
                None => {
                    call.output.copy_from_slice(call.input);
                    Ok(())
                }
                Some(factor) => blend(op.colour, call.input, call.output, (h, w, c), factor),
            },
        )))
    }
}
