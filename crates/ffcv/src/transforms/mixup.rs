//! FFCV's mixup (`ImageMixup`, `LabelMixup`, `MixupToOneHot`) as functions on whole
//! batches.
//!
//! Mixup blends each sample of a batch with the one before it: row `i` becomes
//! `lam_i * x[i] + (1 - lam_i) * x[i - 1]`, where `i - 1` wraps, so row 0 pairs with the
//! batch's last row. It reads other rows of the batch, so it cannot be a per-sample
//! pipeline operation; these functions run on a batch the loader has produced.
//!
//! The lambdas come from [`lambdas`]: `Beta(alpha, alpha)` drawn from a generator seeded
//! by (seed, epoch, sample id, [`MIXUP_STREAM`]), so the image's and the label's mixup
//! draw the same `lam` for a sample, and the values never depend on threads or on where
//! the sample sits in the batch. (FFCV seeds NumPy's global generator with the batch's
//! last index and draws the batch's lambdas in order; the values differ from FFCV's, the
//! distribution and the pairing do not.)
//!
//! ```
//! use ffcv::decode::{IntDecoder, SimpleRGBImageDecoder};
//! use ffcv::jit::ElemType;
//! use ffcv::transforms::mixup;
//! use ffcv::{Loader, PipelineSpec};
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/ffcv-1.0.2/images_raw.beton");
//! let mut loader = Loader::builder(path)
//!     .batch_size(8)
//!     .seed(1)
//!     .pipeline("image", PipelineSpec::new(SimpleRGBImageDecoder))
//!     .pipeline("label", PipelineSpec::new(IntDecoder))
//!     .build()?;
//! let batch = loader.iter().next().unwrap()?;
//! let lam = mixup::lambdas(1, batch.epoch(), batch.sample_ids(), 0.2, false)?;
//!
//! let images = batch.output("image")?.bytes();
//! let mut mixed = vec![0u8; images.len()];
//! mixup::image_mixup(images, &mut mixed, ElemType::U8, &lam)?;
//!
//! let mut labels = vec![0f32; 8 * 3];
//! mixup::label_mixup(batch.output("label")?.bytes(), ElemType::I64, &lam, &mut labels)?;
//! let mut one_hot = vec![0f32; 8 * 10];
//! mixup::mixup_to_one_hot(&labels, 10, &mut one_hot)?;
//! // Every row's weights sum to one (in f32: lam and 1 - lam).
//! for row in one_hot.chunks(10) {
//!     assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use pipeline_jit::ElemType;
use pipeline_jit::half::{f16_from_f64, f16_to_f64};
use pipeline_jit::rng::{sample_rng, sample_seed};
use rand_distr::{Beta, Distribution};
use rayon::prelude::*;

use super::{BadParameter, bad};

/// The operation index mixup's draws are seeded with. No pipeline has this many
/// operations, so the lambdas are independent of every pipeline operation's draws, and
/// the same for the image and the label of a sample.
pub const MIXUP_STREAM: usize = usize::MAX - 1;

/// Batches of at least this many bytes are mixed on the caller's rayon pool; below it,
/// splitting the work costs more than it saves.
const PARALLEL_BYTES: usize = 256 * 1024;

/// The mixup weight `lam` of each sample in `sample_ids` for epoch `epoch` of a loader
/// seeded with `seed`: `Beta(alpha, alpha)`, one draw per sample id, or with
/// `same_lambda` the draw of the batch's last sample id for every sample (FFCV seeds its
/// batch draw with the last index). `alpha` must be finite and positive.
///
/// ```
/// use ffcv::transforms::mixup::lambdas;
///
/// let lam = lambdas(0, 3, &[10, 11, 12], 0.4, false)?;
/// assert_eq!(lam[1], lambdas(0, 3, &[11], 0.4, false)?[0]);
/// let same = lambdas(0, 3, &[10, 11, 12], 0.4, true)?;
/// assert_eq!(same, vec![lam[2]; 3]);
/// assert!(lambdas(0, 3, &[10], 0.0, false).is_err());
/// # Ok::<(), ffcv::transforms::BadParameter>(())
/// ```
pub fn lambdas(
    seed: u64,
    epoch: u64,
    sample_ids: &[u64],
    alpha: f64,
    same_lambda: bool,
) -> Result<Vec<f64>, BadParameter> {
    const NAME: &str = "Mixup";
    if !(alpha.is_finite() && alpha > 0.0) {
        return Err(bad(NAME, format!("alpha {alpha} must be finite and > 0")));
    }
    let beta = Beta::new(alpha, alpha).map_err(|e| bad(NAME, format!("alpha {alpha}: {e}")))?;
    let draw = |id: u64| beta.sample(&mut sample_rng(sample_seed(seed, epoch, id, MIXUP_STREAM)));
    Ok(match (same_lambda, sample_ids.last()) {
        (true, Some(&last)) => vec![draw(last); sample_ids.len()],
        _ => sample_ids.iter().map(|&id| draw(id)).collect(),
    })
}

/// FFCV's `ImageMixup` on a batch of `lambdas.len()` samples of `dtype` elements, row
/// after row in `input`: `output[i] = lam_i * input[i] + (1 - lam_i) * input[i - 1]`
/// (`i - 1` wrapping to the last row), each element computed in `f64` and stored as
/// NumPy assigns it to the image's type: integers truncated toward zero, floats rounded
/// to nearest. A batch of one sample is mixed with itself.
///
/// The rows must be equally long (`input.len()` a multiple of the sample count and of
/// the element size), `output` as long as `input`, and every `lam` in `[0, 1]`;
/// otherwise nothing is written and the error says what is wrong. Large batches run in
/// parallel over samples on the caller's rayon pool.
pub fn image_mixup(
    input: &[u8],
    output: &mut [u8],
    dtype: ElemType,
    lambdas: &[f64],
) -> Result<(), BadParameter> {
    if output.len() != input.len() {
        return Err(bad(
            "ImageMixup",
            format!(
                "the output has {} bytes, the input {}",
                output.len(),
                input.len()
            ),
        ));
    }
    let Some(row) = row_bytes("ImageMixup", input.len(), dtype, lambdas)? else {
        return Ok(());
    };
    match dtype {
        ElemType::U8 => mix_rows::<u8>(input, output, row, lambdas),
        ElemType::U16 => mix_rows::<u16>(input, output, row, lambdas),
        ElemType::I32 => mix_rows::<i32>(input, output, row, lambdas),
        ElemType::I64 => mix_rows::<i64>(input, output, row, lambdas),
        ElemType::F16 => mix_rows::<Half>(input, output, row, lambdas),
        ElemType::F32 => mix_rows::<f32>(input, output, row, lambdas),
        ElemType::F64 => mix_rows::<f64>(input, output, row, lambdas),
    }
    Ok(())
}

/// [`image_mixup`] with the batch overwritten by its mixed rows. Rows are mixed from the
/// last one down, so each row's predecessor is still unmixed when it is read; only the
/// rows whose originals are needed after they are overwritten are saved first (one row,
/// or one per parallel part of a large batch). The checks are [`image_mixup`]'s.
pub fn image_mixup_in_place(
    batch: &mut [u8],
    dtype: ElemType,
    lambdas: &[f64],
) -> Result<(), BadParameter> {
    let Some(row) = row_bytes("ImageMixup", batch.len(), dtype, lambdas)? else {
        return Ok(());
    };
    match dtype {
        ElemType::U8 => mix_rows_in_place::<u8>(batch, row, lambdas),
        ElemType::U16 => mix_rows_in_place::<u16>(batch, row, lambdas),
        ElemType::I32 => mix_rows_in_place::<i32>(batch, row, lambdas),
        ElemType::I64 => mix_rows_in_place::<i64>(batch, row, lambdas),
        ElemType::F16 => mix_rows_in_place::<Half>(batch, row, lambdas),
        ElemType::F32 => mix_rows_in_place::<f32>(batch, row, lambdas),
        ElemType::F64 => mix_rows_in_place::<f64>(batch, row, lambdas),
    }
    Ok(())
}

/// FFCV's `LabelMixup`: from `labels`, a `[n, k]` batch (`k >= 1`) of `label_dtype`
/// where column 0 is the label and `n = lambdas.len()`, the `[n, 3]` rows
/// `(label_i, label_{i-1}, lam_i)` as `f32` (`i - 1` wrapping to the last row), each
/// value converted once to `f32` as NumPy assigns it. The sizes must fit and every `lam`
/// be in `[0, 1]`.
///
/// ```
/// use ffcv::jit::ElemType;
/// use ffcv::transforms::mixup::label_mixup;
///
/// let labels: Vec<u8> = [4i64, 7, 9].iter().flat_map(|l| l.to_ne_bytes()).collect();
/// let mut out = [0f32; 9];
/// label_mixup(&labels, ElemType::I64, &[0.25, 0.5, 1.0], &mut out)?;
/// assert_eq!(out, [4.0, 9.0, 0.25, 7.0, 4.0, 0.5, 9.0, 7.0, 1.0]);
/// # Ok::<(), ffcv::transforms::BadParameter>(())
/// ```
pub fn label_mixup(
    labels: &[u8],
    label_dtype: ElemType,
    lambdas: &[f64],
    output: &mut [f32],
) -> Result<(), BadParameter> {
    const NAME: &str = "LabelMixup";
    let n = lambdas.len();
    if output.len() != n.saturating_mul(3) {
        return Err(bad(
            NAME,
            format!(
                "{n} samples need {} output values, got {}",
                n.saturating_mul(3),
                output.len()
            ),
        ));
    }
    let Some(row) = row_bytes(NAME, labels.len(), label_dtype, lambdas)? else {
        return Ok(());
    };
    let size = label_dtype.size();
    let label = |i: usize| label_f32(&labels[i * row..i * row + size], label_dtype);
    for (i, (out, &lam)) in output.chunks_exact_mut(3).zip(lambdas).enumerate() {
        let prev = if i == 0 { n - 1 } else { i - 1 };
        out[0] = label(i);
        out[1] = label(prev);
        out[2] = lam as f32;
    }
    Ok(())
}

/// FFCV's `MixupToOneHot(num_classes)`: from `[n, 3]` rows `(label, other, lam)` as
/// [`label_mixup`] makes them, `[n, num_classes]` rows of zeros with `lam` at column
/// `label` and then `1 - lam` (in `f32`) at column `other`, so when both are the same
/// class the second value is the one left. Unlike FFCV, `mixed` is not modified.
///
/// A label that is negative, not a whole number or not below `num_classes` is an error
/// naming its row (FFCV would index out of bounds, or from the end for negative labels),
/// as are sizes that do not fit; the output is then untouched.
///
/// ```
/// use ffcv::transforms::mixup::mixup_to_one_hot;
///
/// let mut out = [9f32; 6];
/// mixup_to_one_hot(&[0.0, 2.0, 0.25, 1.0, 1.0, 0.5], 3, &mut out)?;
/// assert_eq!(out, [0.25, 0.0, 0.75, 0.0, 0.5, 0.0]);
/// let err = mixup_to_one_hot(&[0.0, 3.0, 0.25], 3, &mut out[..3]).unwrap_err();
/// assert_eq!(err.to_string(), "MixupToOneHot: row 0: label 3 is not a class in 0..3");
/// # Ok::<(), ffcv::transforms::BadParameter>(())
/// ```
pub fn mixup_to_one_hot(
    mixed: &[f32],
    num_classes: usize,
    output: &mut [f32],
) -> Result<(), BadParameter> {
    const NAME: &str = "MixupToOneHot";
    if !mixed.len().is_multiple_of(3) {
        return Err(bad(
            NAME,
            format!(
                "{} mixed values are not rows of 3 (label, other label, lam)",
                mixed.len()
            ),
        ));
    }
    let n = mixed.len() / 3;
    if n.checked_mul(num_classes) != Some(output.len()) {
        return Err(bad(
            NAME,
            format!(
                "{n} rows of {num_classes} classes do not fit an output of {} values",
                output.len()
            ),
        ));
    }
    let class = |row: usize, v: f32| -> Result<usize, BadParameter> {
        let ok = v >= 0.0 && v.fract() == 0.0 && f64::from(v) < num_classes as f64;
        if ok {
            Ok(v as usize)
        } else {
            Err(bad(
                NAME,
                format!("row {row}: label {v} is not a class in 0..{num_classes}"),
            ))
        }
    };
    for (row, m) in mixed.chunks_exact(3).enumerate() {
        class(row, m[0])?;
        class(row, m[1])?;
    }
    output.fill(0.0);
    if num_classes == 0 {
        return Ok(());
    }
    for (row, (m, out)) in mixed
        .chunks_exact(3)
        .zip(output.chunks_exact_mut(num_classes))
        .enumerate()
    {
        let lam = m[2];
        out[class(row, m[0])?] = lam;
        out[class(row, m[1])?] = 1.0 - lam;
    }
    Ok(())
}

/// Checks a batch of `len` bytes of `dtype` for `lambdas.len()` samples and returns the
/// bytes of one row (`None` for an empty batch, which has nothing to mix).
fn row_bytes(
    name: &'static str,
    len: usize,
    dtype: ElemType,
    lambdas: &[f64],
) -> Result<Option<usize>, BadParameter> {
    let n = lambdas.len();
    if n == 0 {
        return if len == 0 {
            Ok(None)
        } else {
            Err(bad(name, format!("{len} bytes but no lambdas (0 samples)")))
        };
    }
    let row = len / n;
    if row * n != len || row == 0 || !row.is_multiple_of(dtype.size()) {
        return Err(bad(
            name,
            format!(
                "{len} bytes are not {n} equal, non-empty rows of {dtype:?} ({}-byte) elements",
                dtype.size()
            ),
        ));
    }
    if let Some((i, lam)) = lambdas
        .iter()
        .enumerate()
        .find(|(_, l)| !(0.0..=1.0).contains(*l))
    {
        return Err(bad(name, format!("sample {i}: lam {lam} is not in [0, 1]")));
    }
    Ok(Some(row))
}

/// The label at the start of `bytes` as `f32`, converted once from its type.
fn label_f32(bytes: &[u8], dtype: ElemType) -> f32 {
    match dtype {
        ElemType::U8 => f32::from(bytes[0]),
        ElemType::U16 => f32::from(u16::from_ne_bytes(array(bytes))),
        ElemType::I32 => i32::from_ne_bytes(array(bytes)) as f32,
        ElemType::I64 => i64::from_ne_bytes(array(bytes)) as f32,
        // Every binary16 value is exact in f64 and in f32.
        ElemType::F16 => f16_to_f64(u16::from_ne_bytes(array(bytes))) as f32,
        ElemType::F32 => f32::from_ne_bytes(array(bytes)),
        ElemType::F64 => f64::from_ne_bytes(array(bytes)) as f32,
    }
}

/// The first `N` bytes of `bytes` (callers pass at least `N`: a checked row or element).
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&bytes[..N]);
    a
}

/// An element type as mixup reads and writes it: through `f64`.
trait Elem {
    /// Bytes of one element.
    const SIZE: usize;
    /// The element in `bytes` (exactly `SIZE` of them).
    fn load(bytes: &[u8]) -> f64;
    /// `v` stored into `bytes` as NumPy assigns a float64 to the type.
    fn store(v: f64, bytes: &mut [u8]);
}

/// binary16, stored as its bits.
struct Half;

macro_rules! elem {
    ($t:ty, $n:literal) => {
        impl Elem for $t {
            const SIZE: usize = $n;
            fn load(bytes: &[u8]) -> f64 {
                <$t>::from_ne_bytes(array(bytes)) as f64
            }
            fn store(v: f64, bytes: &mut [u8]) {
                // `as` truncates toward zero for integers (saturating, where NumPy's cast
                // would be undefined) and rounds to nearest for f32.
                bytes.copy_from_slice(&(v as $t).to_ne_bytes());
            }
        }
    };
}

elem!(u8, 1);
elem!(u16, 2);
elem!(i32, 4);
elem!(i64, 8);
elem!(f32, 4);
elem!(f64, 8);

impl Elem for Half {
    const SIZE: usize = 2;
    fn load(bytes: &[u8]) -> f64 {
        f16_to_f64(u16::from_ne_bytes(array(bytes)))
    }
    fn store(v: f64, bytes: &mut [u8]) {
        bytes.copy_from_slice(&f16_from_f64(v).to_ne_bytes());
    }
}

/// `out = lam * a + (1 - lam) * b`, element by element (FFCV's expression, evaluated in
/// the same order).
fn mix_row<E: Elem>(out: &mut [u8], a: &[u8], b: &[u8], lam: f64) {
    let keep = 1.0 - lam;
    for ((o, x), y) in out
        .chunks_exact_mut(E::SIZE)
        .zip(a.chunks_exact(E::SIZE))
        .zip(b.chunks_exact(E::SIZE))
    {
        E::store(lam * E::load(x) + keep * E::load(y), o);
    }
}

/// [`mix_row`] with `row` as both the output and `a`.
fn mix_row_in_place<E: Elem>(row: &mut [u8], b: &[u8], lam: f64) {
    let keep = 1.0 - lam;
    for (o, y) in row.chunks_exact_mut(E::SIZE).zip(b.chunks_exact(E::SIZE)) {
        let x = E::load(o);
        E::store(lam * x + keep * E::load(y), o);
    }
}

/// Out-of-place mixup of checked rows of `row` bytes.
fn mix_rows<E: Elem>(input: &[u8], output: &mut [u8], row: usize, lambdas: &[f64]) {
    let n = lambdas.len();
    let one = |(i, out): (usize, &mut [u8])| {
        let prev = if i == 0 { n - 1 } else { i - 1 };
        mix_row::<E>(
            out,
            &input[i * row..(i + 1) * row],
            &input[prev * row..(prev + 1) * row],
            lambdas[i],
        );
    };
    if input.len() >= PARALLEL_BYTES && n > 1 {
        output.par_chunks_mut(row).enumerate().for_each(one);
    } else {
        output.chunks_mut(row).enumerate().for_each(one);
    }
}

/// In-place mixup of checked rows of `row` bytes: the batch is cut into parts of
/// consecutive rows (one part unless the batch is large); the last row of every part is
/// saved, then each part mixes its rows from its last down, its first row with the saved
/// last row of the part before it (the batch's last row, for the first part).
fn mix_rows_in_place<E: Elem>(batch: &mut [u8], row: usize, lambdas: &[f64]) {
    let n = lambdas.len();
    let parallel = batch.len() >= PARALLEL_BYTES && n > 1;
    let parts = if parallel {
        rayon::current_num_threads().clamp(1, n)
    } else {
        1
    };
    let per_part = n.div_ceil(parts);
    let parts = n.div_ceil(per_part);
    let mut saved = Vec::with_capacity(parts * row);
    for p in 0..parts {
        let last = ((p + 1) * per_part).min(n) - 1;
        saved.extend_from_slice(&batch[last * row..(last + 1) * row]);
    }
    let saved = &saved;
    let one = |(p, part): (usize, &mut [u8])| {
        let before = (p + parts - 1) % parts;
        let lams = &lambdas[p * per_part..];
        let rows = part.len() / row;
        for j in (1..rows).rev() {
            let (head, tail) = part.split_at_mut(j * row);
            mix_row_in_place::<E>(&mut tail[..row], &head[(j - 1) * row..], lams[j]);
        }
        mix_row_in_place::<E>(
            &mut part[..row],
            &saved[before * row..(before + 1) * row],
            lams[0],
        );
    };
    if parallel {
        batch
            .par_chunks_mut(per_part * row)
            .enumerate()
            .for_each(one);
    } else {
        batch.chunks_mut(per_part * row).enumerate().for_each(one);
    }
}
