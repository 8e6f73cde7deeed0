//! Folding a crop decoder's first transforms into the resizer's output pass.
//!
//! FFCV's ImageNet training pipeline is RandomResizedCrop → RandomHorizontalFlip →
//! NormalizeImage → ToTensor/ToTorchImage. Run step by step, the decoder writes a `u8`
//! `[H, W, 3]` crop that the fused transform loop reads back. [`fuse`] replaces the decoder
//! and that prefix of transforms by one [`MappedImageDecoder`], which writes each output
//! row of the resizer straight through an [`rgb_image::PixelMap`]: the transform's own
//! per-value table (`NormalizeImage`'s FFCV table, or a `Convert`'s values), the flip as
//! reversed addressing, CHW as plane addressing. Nothing is recomputed differently, so the
//! output equals the step-by-step pipeline's bit for bit (`tests/loader_fused.rs`).
//!
//! Randomness stays the same: the flip decides from the seed the flip operation would
//! have received ([`pipeline_jit::rng::later_op_seed`] of the decoder's own seed). A prefix
//! is folded only when no transform after it draws random numbers, because folding moves
//! those operations to earlier positions, and a position is part of their seed.

use std::sync::Arc;

use pipeline_jit::ir::{RandSpec, bits_of};
use pipeline_jit::ops::FastPath;
use pipeline_jit::rng::{draw, later_op_seed, sample_rng};
use pipeline_jit::{ElemType, Lowered, Operation, State};
use rgb_image::{PixelMap, RgbDecoderKind};

use super::image::{decode_mapped_with, expect_image};
use super::{
    Decoder, DecoderOutput, FieldInfo, OutputKind, PipelineSpec, SampleInput, numpy_dtype,
};

/// A crop decoder with a flip, an element-wise table and a layout folded into its output.
pub(crate) struct MappedImageDecoder {
    /// The decoder it replaces (declared first, so its checks and errors stay).
    inner: Arc<dyn Decoder>,
    kind: RgbDecoderKind,
    /// The crop decoder's DCT-domain downscaling setting.
    dct_downscale: bool,
    size: (u32, u32),
    map: PixelMap,
    dtype: ElemType,
    /// The flip's probability and the position of the flip operation in the pipeline.
    flip: Option<(f64, usize)>,
}

impl Decoder for MappedImageDecoder {
    fn name(&self) -> String {
        // The user's decoder's name: errors read as they do without folding.
        self.inner.name()
    }

    fn declare(&self, info: &FieldInfo<'_>) -> Result<DecoderOutput, String> {
        expect_image(info)?;
        self.inner.declare(info)?;
        let (h, w) = (self.size.0 as usize, self.size.1 as usize);
        let shape = if self.map.chw() {
            vec![3, h, w]
        } else {
            vec![h, w, 3]
        };
        let out = DecoderOutput::new(shape, numpy_dtype(self.dtype), OutputKind::Array);
        if out.row_bytes().is_none() {
            return Err(format!("output size {h}x{w} exceeds memory"));
        }
        Ok(out)
    }

    fn decode(&self, input: &SampleInput<'_>, out: &mut [u8], _: &mut [u8]) -> Result<(), String> {
        let flip = || match self.flip {
            Some((p, index)) => {
                let mut rng = sample_rng(later_op_seed(input.seed, index));
                draw(&RandSpec::Bernoulli(p), &mut rng) == 1
            }
            None => false,
        };
        decode_mapped_with(
            (&self.kind, self.dct_downscale),
            input,
            out,
            self.size,
            &self.map,
            flip,
        )
    }
}

/// The element table of a `u8 → dtype` step, as output bytes (`256 x 3` entries).
fn table_bytes(bits: impl Iterator<Item = u64>, dtype: ElemType) -> Vec<u8> {
    let size = dtype.size();
    let mut table = Vec::with_capacity(256 * 3 * size);
    for b in bits {
        // Little-endian only (the facade maps no element type on big-endian machines):
        // the low bytes of the bit pattern, as the interpreter's table writes them.
        table.extend_from_slice(&b.to_le_bytes()[..size]);
    }
    table
}

/// What the folded prefix is so far.
#[derive(Default)]
struct Prefix {
    flip: Option<(f64, usize)>,
    table: Option<(Vec<u8>, ElemType)>,
    chw: bool,
    folded: Vec<String>,
}

impl Prefix {
    /// Folds `op` (at pipeline position `index`) on `state` if it fits the pattern, and
    /// returns the state after it.
    fn take(&mut self, op: &dyn Operation, index: usize, state: &State) -> Option<State> {
        if self.chw {
            return None;
        }
        let Ok(Lowered::Expr(k)) = op.lower(state) else {
            return None;
        };
        let fast = op.fast_path()?;
        if !k.random.is_empty() && !matches!(fast, FastPath::Flip) {
            return None;
        }
        match fast {
            FastPath::Flip if self.flip.is_none() => {
                let [RandSpec::Bernoulli(p)] = k.random[..] else {
                    return None;
                };
                self.flip = Some((p, index));
            }
            FastPath::Lut(bits)
                if self.table.is_none() && state.dtype == ElemType::U8 && bits.len() == 768 =>
            {
                let t = k.output.dtype;
                self.table = Some((table_bytes(bits.iter().copied(), t), t));
            }
            FastPath::Convert if self.table.is_none() && state.dtype == ElemType::U8 => {
                let t = k.output.dtype;
                let values = (0..256 * 3).map(|i| bits_of(t, (i / 3) as f64));
                self.table = Some((table_bytes(values, t), t));
            }
            FastPath::ToChw => self.chw = true,
            _ => return None,
        }
        self.folded.push(op.name());
        Some(k.output)
    }
}

/// Whether any of `ops`, run from `state`, draws random numbers (or is a native kernel,
/// which receives a seed): such operations keep their positions, so nothing is folded.
fn any_random(ops: &[Arc<dyn Operation>], mut state: State) -> bool {
    for op in ops {
        match op.lower(&state) {
            Ok(Lowered::Expr(k)) if k.random.is_empty() => state = k.output,
            // A native kernel or a random draw; an error is left for the pipeline to report.
            _ => return true,
        }
    }
    false
}

/// `spec` with its crop decoder and the longest prefix of its transforms that fits
/// (`[flip] [normalize | convert] [chw]`, from `u8` pixels) folded into one decoder, or
/// `None` when nothing can be folded (or `spec.fuse` is off, the default).
pub(crate) fn fuse(spec: &PipelineSpec) -> Option<PipelineSpec> {
    if !spec.fuse || spec.transforms.is_empty() {
        return None;
    }
    let (kind, size) = spec.decoder.crop_kernel()?;
    let mut state = State::cpu([size.0 as usize, size.1 as usize, 3], ElemType::U8);
    let mut prefix = Prefix::default();
    let mut taken = 0;
    for (t, op) in spec.transforms.iter().enumerate() {
        // The decoder is operation 0, so transform `t` is operation `t + 1`.
        match prefix.take(&**op, t + 1, &state) {
            Some(next) => {
                state = next;
                taken = t + 1;
            }
            None => break,
        }
    }
    if taken == 0 || any_random(&spec.transforms[taken..], state) {
        return None;
    }
    let chw = prefix.chw;
    let (map, dtype) = match prefix.table {
        Some((table, dtype)) => (PixelMap::new(table, dtype.size(), chw).ok()?, dtype),
        None => (PixelMap::identity(chw), ElemType::U8),
    };
    tracing::debug!(
        decoder = %spec.decoder.name(),
        folded = ?prefix.folded,
        "transforms folded into the decoder's output pass"
    );
    let decoder = MappedImageDecoder {
        inner: Arc::clone(&spec.decoder),
        kind,
        dct_downscale: spec.decoder.dct_downscale(),
        size,
        map,
        dtype,
        flip: prefix.flip,
    };
    Some(PipelineSpec {
        decoder: Arc::new(decoder),
        transforms: spec.transforms[taken..].to_vec(),
        fuse: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{RandomResizedCropRGBImageDecoder, SimpleRGBImageDecoder};
    use pipeline_jit::ops::{Cutout, NormalizeImage, RandomHorizontalFlip, Squeeze, ToChw};

    fn normalize() -> NormalizeImage {
        NormalizeImage {
            mean: vec![1.0, 2.0, 3.0],
            std: vec![4.0, 5.0, 6.0],
            dtype: ElemType::F32,
        }
    }

    fn rrc() -> PipelineSpec {
        PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((8, 8))).fuse(true)
    }

    fn left(spec: &PipelineSpec) -> Option<Vec<String>> {
        fuse(spec).map(|f| f.transforms.iter().map(|t| t.name()).collect())
    }

    #[test]
    fn the_imagenet_chain_is_folded_whole() {
        let spec = rrc()
            .then(RandomHorizontalFlip(0.5))
            .then(normalize())
            .then(ToChw);
        assert_eq!(left(&spec), Some(vec![]));
        assert_eq!(left(&spec.clone().fuse(false)), None);
    }

    #[test]
    fn folding_stops_where_the_pattern_does() {
        // After CHW nothing more is folded; a deterministic rest stays.
        let spec = rrc().then(ToChw).then(Squeeze);
        assert_eq!(left(&spec), Some(vec!["Squeeze".to_owned()]));
        // A second table (normalize of floats) is not a u8 table.
        let spec = rrc().then(normalize()).then(normalize());
        assert_eq!(left(&spec), Some(vec!["NormalizeImage".to_owned()]));
        // A random operation after the prefix would change position: nothing is folded.
        let cutout = Cutout {
            size: 2,
            fill: vec![0.0],
        };
        assert_eq!(left(&rrc().then(normalize()).then(cutout)), None);
        // Two flips: the second is not folded (and is random, so nothing is).
        let flips = rrc()
            .then(RandomHorizontalFlip(0.5))
            .then(RandomHorizontalFlip(0.5));
        assert_eq!(left(&flips), None);
        // Not a crop decoder, or no transforms, or not asked for.
        let simple = PipelineSpec::new(SimpleRGBImageDecoder)
            .then(ToChw)
            .fuse(true);
        assert_eq!(left(&simple), None);
        let default = PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((8, 8))).then(ToChw);
        assert_eq!(left(&default), None);
        assert_eq!(left(&rrc()), None);
    }
}
