//! Built-in expressible operations (image transforms in the manner of FFCV's).
//!
//! Images are `[H, W, C]` (HWC) until [`ToChw`] moves channels first. Each operation lowers to
//! IR, so the JIT fuses it with its neighbours; the common ones also carry a specialised loop
//! for the interpreter ([`FastPath`]), tested to agree with their IR bit for bit.

use std::sync::Arc;

use crate::error::ExtensionError;
use crate::ir::{BinOp, CmpOp, Cond, Expr, ExprKernel, Index, RandSpec, bits_of};
use crate::op::{Lowered, Operation};
// Its public path, kept; it lives with the trait method that returns it.
pub use crate::op::FastPath;
use crate::state::{ElemType, State};

fn hwc(input: &State) -> Result<(usize, usize, usize), String> {
    match input.shape[..] {
        [h, w, c] => Ok((h, w, c)),
        _ => Err(format!(
            "expects an [H, W, C] image, got shape {:?}",
            input.shape
        )),
    }
}

fn i(v: usize) -> Index {
    Index::Const(v as i64)
}

/// `[H, W, C]` → `[C, H, W]` (FFCV's `ToTensor` + `ToTorchImage` layout change).
#[derive(Debug, Clone, Default)]
pub struct ToChw;

impl Operation for ToChw {
    fn name(&self) -> String {
        "ToChw".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, ExtensionError> {
        let (h, w, c) = hwc(input)?;
        Ok(Lowered::Expr(ExprKernel {
            output: State {
                shape: vec![c, h, w],
                ..input.clone()
            },
            expr: Expr::Input(vec![Index::Coord(1), Index::Coord(2), Index::Coord(0)]),
            random: vec![],
        }))
    }
    fn fast_path(&self) -> Option<FastPath> {
        Some(FastPath::ToChw)
    }
}

/// Element-wise conversion with Rust's `as` semantics (floats to integers saturate).
#[derive(Debug, Clone)]
pub struct Convert(pub ElemType);

impl Operation for Convert {
    fn name(&self) -> String {
        format!("Convert({:?})", self.0)
    }
    fn lower(&self, input: &State) -> Result<Lowered, ExtensionError> {
        Ok(Lowered::Expr(ExprKernel {
            output: State {
                dtype: self.0,
                ..input.clone()
            },
            expr: Expr::input_identity(input.shape.len()).cast(self.0),
            random: vec![],
        }))
    }
    fn fast_path(&self) -> Option<FastPath> {
        Some(FastPath::Convert)
    }
}

/// Per-channel `(x - mean[c]) / std[c]` of an `[H, W, C]` image, computed in `f64` and cast
/// to `dtype` (a float type), as FFCV's `NormalizeImage` does on the CPU (for `u8` input
/// through a 256-entry table per channel, exactly like FFCV's lookup table).
#[derive(Debug, Clone)]
pub struct NormalizeImage {
    /// Per-channel means.
    pub mean: Vec<f64>,
    /// Per-channel standard deviations.
    pub std: Vec<f64>,
    /// Output type (`F16`, `F32` or `F64`).
    pub dtype: ElemType,
}

impl NormalizeImage {
    fn lut(&self) -> Arc<[u64]> {
        let c = self.mean.len();
        let mut t = Vec::with_capacity(256 * c);
        for v in 0..256 {
            for ch in 0..c {
                t.push(bits_of(
                    self.dtype,
                    (v as f64 - self.mean[ch]) / self.std[ch],
                ));
            }
        }
        t.into()
    }
}

impl Operation for NormalizeImage {
    fn name(&self) -> String {
        "NormalizeImage".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, ExtensionError> {
        let (_, _, c) = hwc(input)?;
        if self.mean.len() != c || self.std.len() != c {
            return Err(format!(
                "{} channels but {} means and {} stds",
                c,
                self.mean.len(),
                self.std.len()
            )
            .into());
        }
        if !self.dtype.is_float() {
            return Err(format!("output type {:?} is not a float type", self.dtype).into());
        }
        let output = State {
            dtype: self.dtype,
            ..input.clone()
        };
        let x = Expr::input_identity(3);
        let expr = if input.dtype == ElemType::U8 {
            let idx = Index::Value(Box::new(x)) * i(c) + Index::Coord(2);
            Expr::Table(self.dtype, self.lut(), Box::new(idx))
        } else {
            x.cast(ElemType::F64)
                .bin(
                    BinOp::Sub,
                    Expr::table(ElemType::F64, &self.mean, Index::Coord(2)),
                )
                .bin(
                    BinOp::Div,
                    Expr::table(ElemType::F64, &self.std, Index::Coord(2)),
                )
                .cast(self.dtype)
        };
        Ok(Lowered::Expr(ExprKernel {
            output,
            expr,
            random: vec![],
        }))
    }
    fn fast_path(&self) -> Option<FastPath> {
        // Only the u8 form is a table; `lower` decides which form applies, and the
        // interpreter checks the input type before using the table.
        Some(FastPath::Lut(self.lut()))
    }
}

/// Flip an `[H, W, C]` image left-right with probability `p`, decided per sample.
#[derive(Debug, Clone)]
pub struct RandomHorizontalFlip(pub f64);

impl Operation for RandomHorizontalFlip {
    fn name(&self) -> String {
        "RandomHorizontalFlip".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, ExtensionError> {
        let (_, w, _) = hwc(input)?;
        let flipped = i(w) - i(1) - Index::Coord(1);
        let col = Index::select(
            Index::Rand(0).cmp(CmpOp::Eq, i(1)),
            flipped,
            Index::Coord(1),
        );
        Ok(Lowered::Expr(ExprKernel {
            output: input.clone(),
            expr: Expr::Input(vec![Index::Coord(0), col, Index::Coord(2)]),
            random: vec![RandSpec::Bernoulli(self.0)],
        }))
    }
    fn fast_path(&self) -> Option<FastPath> {
        Some(FastPath::Flip)
    }
}

fn fill_table(fill: &[f64], c: usize, dtype: ElemType) -> Result<Expr, String> {
    let values: Vec<f64> = match fill.len() {
        1 => vec![fill[0]; c],
        n if n == c => fill.to_vec(),
        n => return Err(format!("{n} fill values for {c} channels")),
    };
    Ok(Expr::table(dtype, &values, Index::Coord(2)))
}

fn inside(axis: usize, start: Index, len: usize) -> Cond {
    let end = start.clone() + i(len);
    Index::Coord(axis)
        .cmp(CmpOp::Ge, start)
        .and(Index::Coord(axis).cmp(CmpOp::Lt, end))
}

/// Fill a `size`×`size` square with `fill` (one value per channel, or one for all), as
/// FFCV's `Cutout`: the square's corner is drawn in `0..H - size` × `0..W - size` (FFCV's
/// `randint(H - size)`, which never reaches the last row or column and needs
/// `size < H, W`).
#[derive(Debug, Clone)]
pub struct Cutout {
    /// Side of the square.
    pub size: usize,
    /// Fill value per channel (or a single value).
    pub fill: Vec<f64>,
}

impl Operation for Cutout {
    fn name(&self) -> String {
        "Cutout".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, ExtensionError> {
        let (h, w, c) = hwc(input)?;
        if self.size >= h || self.size >= w {
            return Err(format!(
                "cutout of {} does not fit a {h}x{w} image (FFCV needs size < H, W)",
                self.size
            )
            .into());
        }
        let fill = fill_table(&self.fill, c, input.dtype)?;
        let cond = inside(0, Index::Rand(0), self.size).and(inside(1, Index::Rand(1), self.size));
        Ok(Lowered::Expr(ExprKernel {
            output: input.clone(),
            expr: Expr::select(cond, fill, Expr::input_identity(3)),
            random: vec![
                RandSpec::Int {
                    lo: 0,
                    hi: (h - self.size - 1) as i64,
                },
                RandSpec::Int {
                    lo: 0,
                    hi: (w - self.size - 1) as i64,
                },
            ],
        }))
    }
}

/// Shift an `[H, W, C]` image by a random offset in `-padding..=padding` on each axis,
/// filling uncovered pixels with `fill`, as FFCV's `RandomTranslate` (pad, then crop).
#[derive(Debug, Clone)]
pub struct RandomTranslate {
    /// Largest shift.
    pub padding: usize,
    /// Fill value per channel (or a single value).
    pub fill: Vec<f64>,
}

impl Operation for RandomTranslate {
    fn name(&self) -> String {
        "RandomTranslate".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, ExtensionError> {
        let (h, w, c) = hwc(input)?;
        let fill = fill_table(&self.fill, c, input.dtype)?;
        let p = self.padding as i64;
        // Output (y, x) shows padded (y + dy, x + dx), i.e. source (y + dy - p, x + dx - p).
        let sy = Index::Coord(0) + Index::Rand(0) - p;
        let sx = Index::Coord(1) + Index::Rand(1) - p;
        let ok = |s: Index, n: usize| s.clone().cmp(CmpOp::Ge, i(0)).and(s.cmp(CmpOp::Lt, i(n)));
        let cond = ok(sy.clone(), h).and(ok(sx.clone(), w));
        Ok(Lowered::Expr(ExprKernel {
            output: input.clone(),
            expr: Expr::select(cond, Expr::Input(vec![sy, sx, Index::Coord(2)]), fill),
            random: vec![
                RandSpec::Int { lo: 0, hi: 2 * p },
                RandSpec::Int { lo: 0, hi: 2 * p },
            ],
        }))
    }
}

/// Clamp every element into `[lo, hi]` (in the element type).
#[derive(Debug, Clone)]
pub struct Clamp {
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
}

impl Operation for Clamp {
    fn name(&self) -> String {
        "Clamp".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, ExtensionError> {
        if self.lo.partial_cmp(&self.hi) != Some(std::cmp::Ordering::Less) && self.lo != self.hi {
            return Err(format!("empty range [{}, {}]", self.lo, self.hi).into());
        }
        let t = input.dtype;
        let expr = Expr::input_identity(input.shape.len())
            .bin(BinOp::Max, Expr::constant(t, self.lo))
            .bin(BinOp::Min, Expr::constant(t, self.hi));
        Ok(Lowered::Expr(ExprKernel {
            output: input.clone(),
            expr,
            random: vec![],
        }))
    }
}

/// `x * mul + add` on a float buffer (two roundings, never a fused multiply-add).
#[derive(Debug, Clone)]
pub struct Scale {
    /// Factor.
    pub mul: f64,
    /// Offset.
    pub add: f64,
}

impl Operation for Scale {
    fn name(&self) -> String {
        "Scale".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, ExtensionError> {
        let t = input.dtype;
        if !t.is_float() {
            return Err(format!("Scale needs a float input, got {t:?}").into());
        }
        let expr = Expr::input_identity(input.shape.len())
            .bin(BinOp::Mul, Expr::constant(t, self.mul))
            .bin(BinOp::Add, Expr::constant(t, self.add));
        Ok(Lowered::Expr(ExprKernel {
            output: input.clone(),
            expr,
            random: vec![],
        }))
    }
}

/// Remove every axis of length 1.
#[derive(Debug, Clone, Default)]
pub struct Squeeze;

impl Operation for Squeeze {
    fn name(&self) -> String {
        "Squeeze".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, ExtensionError> {
        let mut out = Vec::new();
        let mut coords = Vec::new();
        for &d in &input.shape {
            if d == 1 {
                coords.push(Index::Const(0));
            } else {
                coords.push(Index::Coord(out.len()));
                out.push(d);
            }
        }
        Ok(Lowered::Expr(ExprKernel {
            output: State {
                shape: out,
                ..input.clone()
            },
            expr: Expr::Input(coords),
            random: vec![],
        }))
    }
}
