//! u8 HWC → f64/f32/f16/bf16 CHW with per-channel normalize and optional horizontal flip: the
//! lookup table both the device kernel and the CPU reference use, and the CPU reference itself.
//!
//! As FFCV's `NormalizeImage`, every output value is `(v - mean[c]) / std[c]` computed in f64
//! for each of the 256 byte values `v` and rounded once to the output type. The kernel only
//! looks values up and moves them, so device and CPU outputs are bit-identical by construction.

use crate::dtype::{f64_to_bf16_bits, f64_to_f16_bits};
use crate::{DeviceDtype, Error, Result};

/// Most channels an image output may have (RGBA and a few more; keeps tables small).
pub const MAX_CHANNELS: usize = 16;

/// Per-channel normalization to a float type.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalize {
    /// Per-channel mean, in the units of the u8 input (e.g. `0.485 * 255`).
    pub mean: Vec<f64>,
    /// Per-channel standard deviation, same units; must be finite and non-zero.
    pub std: Vec<f64>,
    /// Output element type: [`DeviceDtype::F64`], [`DeviceDtype::F32`], [`DeviceDtype::F16`]
    /// or [`DeviceDtype::Bf16`].
    pub dtype: DeviceDtype,
}

impl Normalize {
    /// A plain u8 → float conversion (mean 0, std 1) for `channels` channels.
    pub fn convert_only(channels: usize, dtype: DeviceDtype) -> Self {
        Normalize {
            mean: vec![0.0; channels],
            std: vec![1.0; channels],
            dtype,
        }
    }

    /// The ImageNet statistics FFCV's examples use, scaled to u8 units, for RGB.
    pub fn imagenet(dtype: DeviceDtype) -> Self {
        Normalize {
            mean: vec![0.485 * 255.0, 0.456 * 255.0, 0.406 * 255.0],
            std: vec![0.229 * 255.0, 0.224 * 255.0, 0.225 * 255.0],
            dtype,
        }
    }
}

/// The shape of one batch of images: `batch` samples of `height × width × channels` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImageShape {
    /// Samples in the batch.
    pub batch: usize,
    /// Rows per image.
    pub height: usize,
    /// Columns per image.
    pub width: usize,
    /// Channels per pixel (3 for RGB).
    pub channels: usize,
}

impl ImageShape {
    /// Elements in the batch (`batch * height * width * channels`), if it fits in `usize`.
    pub fn elements(&self) -> Option<usize> {
        self.batch
            .checked_mul(self.height)?
            .checked_mul(self.width)?
            .checked_mul(self.channels)
    }
}

/// The 256 × channels lookup table of output bit patterns, row `v`, column `c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizeTable {
    dtype: DeviceDtype,
    channels: usize,
    /// Bit patterns, widened to u64 (narrower types use the low bits).
    bits: Vec<u64>,
}

impl NormalizeTable {
    /// Builds the table, checking the parameters; `output` names the output in errors.
    pub fn new(output: &str, normalize: &Normalize) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidOutput {
            output: output.to_owned(),
            reason,
        };
        let channels = normalize.mean.len();
        if channels == 0 || channels > MAX_CHANNELS {
            return Err(invalid(format!(
                "normalize needs 1..={MAX_CHANNELS} channels, got {channels}"
            )));
        }
        if normalize.std.len() != channels {
            return Err(invalid(format!(
                "normalize has {channels} means but {} standard deviations",
                normalize.std.len()
            )));
        }
        if !normalize.dtype.is_normalize_output() {
            return Err(invalid(format!(
                "normalize outputs float64, float32, float16 or bfloat16, not {}",
                normalize.dtype
            )));
        }
        for (c, (&m, &s)) in normalize.mean.iter().zip(&normalize.std).enumerate() {
            if !m.is_finite() {
                return Err(invalid(format!("mean of channel {c} is {m}")));
            }
            if !s.is_finite() || s == 0.0 {
                return Err(invalid(format!("std of channel {c} is {s}")));
            }
        }
        let mut bits = Vec::with_capacity(256 * channels);
        for v in 0..256u32 {
            for c in 0..channels {
                let x = (f64::from(v) - normalize.mean[c]) / normalize.std[c];
                bits.push(match normalize.dtype {
                    DeviceDtype::F64 => x.to_bits(),
                    // `as f32` rounds to nearest, ties to even.
                    DeviceDtype::F32 => u64::from((x as f32).to_bits()),
                    DeviceDtype::F16 => u64::from(f64_to_f16_bits(x)),
                    _ => u64::from(f64_to_bf16_bits(x)),
                });
            }
        }
        Ok(NormalizeTable {
            dtype: normalize.dtype,
            channels,
            bits,
        })
    }

    /// Output element type.
    pub fn dtype(&self) -> DeviceDtype {
        self.dtype
    }

    /// Channels the table covers.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// The output bit pattern for byte value `v` in channel `c`.
    pub fn get(&self, v: u8, c: usize) -> u64 {
        self.bits[usize::from(v) * self.channels + c]
    }

    /// The table as the device stores it: little-endian elements of the output size.
    pub fn to_device_bytes(&self) -> Vec<u8> {
        let size = self.dtype.size();
        let mut out = Vec::with_capacity(self.bits.len() * size);
        for &b in &self.bits {
            out.extend_from_slice(&b.to_le_bytes()[..size]);
        }
        out
    }
}

/// The CPU reference of the device kernel: `src` is `[batch, height, width, channels]` u8,
/// `flips` (one byte per sample, non-zero = mirror left-right) may be absent; returns
/// `[batch, channels, height, width]` elements of the table's dtype as little-endian bytes,
/// the same bytes the device buffer holds.
pub fn normalize_reference(
    table: &NormalizeTable,
    shape: ImageShape,
    src: &[u8],
    flips: Option<&[u8]>,
) -> Result<Vec<u8>> {
    let invalid = |reason: String| Error::InvalidOutput {
        output: "normalize reference".to_owned(),
        reason,
    };
    if shape.channels != table.channels {
        return Err(invalid(format!(
            "table has {} channels, images have {}",
            table.channels, shape.channels
        )));
    }
    let elements = shape
        .elements()
        .ok_or_else(|| invalid(format!("shape {shape:?} overflows")))?;
    if src.len() != elements {
        return Err(invalid(format!(
            "source holds {} bytes, shape {shape:?} needs {elements}",
            src.len()
        )));
    }
    if let Some(f) = flips
        && f.len() < shape.batch
    {
        return Err(invalid(format!(
            "{} flip flags for {} samples",
            f.len(),
            shape.batch
        )));
    }
    let size = table.dtype.size();
    let mut out = vec![0u8; elements * size];
    let (h, w, ch) = (shape.height, shape.width, shape.channels);
    let plane = h * w;
    for b in 0..shape.batch {
        let flip = flips.is_some_and(|f| f[b] != 0);
        for y in 0..h {
            for x in 0..w {
                let sx = if flip { w - 1 - x } else { x };
                let px = ((b * h + y) * w + sx) * ch;
                for c in 0..ch {
                    let bits = table.get(src[px + c], c);
                    let o = ((b * ch + c) * plane + y * w + x) * size;
                    out[o..o + size].copy_from_slice(&bits.to_le_bytes()[..size]);
                }
            }
        }
    }
    Ok(out)
}
