//! The reference evaluator of the IR: one output element at a time, in plain Rust.
//!
//! The interpreter uses it for operations without a specialised loop (custom IR operations,
//! cutout, clamp, ...); the code generator must agree with it bit for bit.

use crate::half::{f16_from_f64, f16_to_f64};
use crate::ir::{BinOp, CmpOp, Cond, Expr, ExprKernel, Index};
use crate::state::{ElemType, State};

/// A typed scalar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum V {
    U8(u8),
    U16(u16),
    I32(i32),
    I64(i64),
    /// The bits of a binary16.
    F16(u16),
    F32(f32),
    F64(f64),
}

impl V {
    pub(crate) fn from_bits(t: ElemType, b: u64) -> V {
        match t {
            ElemType::U8 => V::U8(b as u8),
            ElemType::U16 => V::U16(b as u16),
            ElemType::I32 => V::I32(b as u32 as i32),
            ElemType::I64 => V::I64(b as i64),
            ElemType::F16 => V::F16(b as u16),
            ElemType::F32 => V::F32(f32::from_bits(b as u32)),
            ElemType::F64 => V::F64(f64::from_bits(b)),
        }
    }

    pub(crate) fn read(t: ElemType, bytes: &[u8], elem: usize) -> V {
        let s = t.size();
        let b = &bytes[elem * s..elem * s + s];
        match t {
            ElemType::U8 => V::U8(b[0]),
            ElemType::U16 => V::U16(u16::from_ne_bytes([b[0], b[1]])),
            ElemType::I32 => V::I32(i32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
            ElemType::I64 => V::I64(i64::from_ne_bytes(b.try_into().unwrap_or([0; 8]))),
            ElemType::F16 => V::F16(u16::from_ne_bytes([b[0], b[1]])),
            ElemType::F32 => V::F32(f32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
            ElemType::F64 => V::F64(f64::from_ne_bytes(b.try_into().unwrap_or([0; 8]))),
        }
    }

    pub(crate) fn write(self, bytes: &mut [u8], elem: usize) {
        match self {
            V::U8(v) => bytes[elem] = v,
            V::U16(v) => bytes[elem * 2..elem * 2 + 2].copy_from_slice(&v.to_ne_bytes()),
            V::I32(v) => bytes[elem * 4..elem * 4 + 4].copy_from_slice(&v.to_ne_bytes()),
            V::I64(v) => bytes[elem * 8..elem * 8 + 8].copy_from_slice(&v.to_ne_bytes()),
            V::F16(v) => bytes[elem * 2..elem * 2 + 2].copy_from_slice(&v.to_ne_bytes()),
            V::F32(v) => bytes[elem * 4..elem * 4 + 4].copy_from_slice(&v.to_ne_bytes()),
            V::F64(v) => bytes[elem * 8..elem * 8 + 8].copy_from_slice(&v.to_ne_bytes()),
        }
    }

    fn as_i64(self) -> i64 {
        match self {
            V::U8(v) => i64::from(v),
            V::U16(v) => i64::from(v),
            V::I32(v) => i64::from(v),
            V::I64(v) => v,
            V::F16(v) => f16_to_f64(v) as i64,
            V::F32(v) => v as i64,
            V::F64(v) => v as i64,
        }
    }

    pub(crate) fn cast(self, t: ElemType) -> V {
        macro_rules! conv {
            ($x:expr) => {
                match t {
                    ElemType::U8 => V::U8($x as u8),
                    ElemType::U16 => V::U16($x as u16),
                    ElemType::I32 => V::I32($x as i32),
                    ElemType::I64 => V::I64($x as i64),
                    ElemType::F16 => V::F16(f16_from_f64($x as f64)),
                    ElemType::F32 => V::F32($x as f32),
                    ElemType::F64 => V::F64($x as f64),
                }
            };
        }
        match self {
            V::U8(x) => conv!(x),
            V::U16(x) => conv!(x),
            V::I32(x) => conv!(x),
            V::I64(x) => conv!(x),
            V::F16(x) => conv!(f16_to_f64(x)),
            V::F32(x) => conv!(x),
            V::F64(x) => conv!(x),
        }
    }
}

/// Float minimum with the code generator's (WebAssembly) rules: NaN wins, `-0.0 < 0.0`.
pub(crate) fn fmin32(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a == b {
        f32::from_bits(a.to_bits() | b.to_bits())
    } else if a < b {
        a
    } else {
        b
    }
}
/// Float maximum with the code generator's rules: NaN wins, `0.0 > -0.0`.
pub(crate) fn fmax32(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a == b {
        f32::from_bits(a.to_bits() & b.to_bits())
    } else if a > b {
        a
    } else {
        b
    }
}
fn fmin64(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        f64::from_bits(a.to_bits() | b.to_bits())
    } else if a < b {
        a
    } else {
        b
    }
}
fn fmax64(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        f64::from_bits(a.to_bits() & b.to_bits())
    } else if a > b {
        a
    } else {
        b
    }
}

fn bin(op: BinOp, a: V, b: V) -> V {
    use BinOp::*;
    macro_rules! int {
        ($c:ident, $x:expr, $y:expr) => {
            V::$c(match op {
                Add => $x.wrapping_add($y),
                Sub => $x.wrapping_sub($y),
                Mul => $x.wrapping_mul($y),
                Min => $x.min($y),
                Max => $x.max($y),
                // Rejected by validation; keep the evaluator total.
                Div => $x,
            })
        };
    }
    match (a, b) {
        (V::U8(x), V::U8(y)) => int!(U8, x, y),
        (V::U16(x), V::U16(y)) => int!(U16, x, y),
        (V::I32(x), V::I32(y)) => int!(I32, x, y),
        (V::I64(x), V::I64(y)) => int!(I64, x, y),
        (V::F32(x), V::F32(y)) => V::F32(match op {
            Add => x + y,
            Sub => x - y,
            Mul => x * y,
            Div => x / y,
            Min => fmin32(x, y),
            Max => fmax32(x, y),
        }),
        (V::F64(x), V::F64(y)) => V::F64(match op {
            Add => x + y,
            Sub => x - y,
            Mul => x * y,
            Div => x / y,
            Min => fmin64(x, y),
            Max => fmax64(x, y),
        }),
        (V::F16(x), V::F16(y)) => {
            let (x, y) = (f16_to_f64(x), f16_to_f64(y));
            V::F16(f16_from_f64(match op {
                Add => x + y,
                Sub => x - y,
                Mul => x * y,
                Div => x / y,
                Min => fmin64(x, y),
                Max => fmax64(x, y),
            }))
        }
        // Mixed types are rejected by validation.
        _ => a,
    }
}

/// Everything an element's evaluation reads.
pub(crate) struct Env<'a> {
    pub coords: &'a [i64],
    pub rand: &'a [i64],
    pub input: &'a [u8],
    pub in_shape: &'a [usize],
    pub in_dtype: ElemType,
}

impl Env<'_> {
    pub(crate) fn expr(&self, e: &Expr) -> V {
        match e {
            Expr::Input(c) => {
                let mut flat = 0usize;
                for (i, &d) in c.iter().zip(self.in_shape) {
                    let k = self.index(i).clamp(0, d as i64 - 1) as usize;
                    flat = flat * d + k;
                }
                V::read(self.in_dtype, self.input, flat)
            }
            Expr::Const(t, b) => V::from_bits(*t, *b),
            Expr::Table(t, v, i) => {
                let k = self.index(i).clamp(0, v.len() as i64 - 1) as usize;
                V::from_bits(*t, v[k])
            }
            Expr::FromIndex(t, i) => V::I64(self.index(i)).cast(*t),
            Expr::Cast(t, a) => self.expr(a).cast(*t),
            Expr::Bin(op, a, b) => bin(*op, self.expr(a), self.expr(b)),
            Expr::Select(c, a, b) => {
                // Both sides are evaluated, as in the branch-free generated code.
                let (x, y) = (self.expr(a), self.expr(b));
                if self.cond(c) { x } else { y }
            }
        }
    }

    pub(crate) fn index(&self, i: &Index) -> i64 {
        match i {
            Index::Coord(k) => self.coords[*k],
            Index::Const(v) => *v,
            Index::Rand(k) => self.rand[*k],
            Index::Value(e) => self.expr(e).as_i64(),
            Index::Add(a, b) => self.index(a).wrapping_add(self.index(b)),
            Index::Sub(a, b) => self.index(a).wrapping_sub(self.index(b)),
            Index::Mul(a, b) => self.index(a).wrapping_mul(self.index(b)),
            Index::Select(c, a, b) => {
                if self.cond(c) {
                    self.index(a)
                } else {
                    self.index(b)
                }
            }
            Index::Clamp(a, lo, hi) => self.index(a).clamp(*lo, *hi),
        }
    }

    pub(crate) fn cond(&self, c: &Cond) -> bool {
        match c {
            Cond::Const(b) => *b,
            Cond::Cmp(op, a, b) => {
                let (x, y) = (self.index(a), self.index(b));
                match op {
                    CmpOp::Eq => x == y,
                    CmpOp::Ne => x != y,
                    CmpOp::Lt => x < y,
                    CmpOp::Le => x <= y,
                    CmpOp::Gt => x > y,
                    CmpOp::Ge => x >= y,
                }
            }
            Cond::And(a, b) => self.cond(a) && self.cond(b),
            Cond::Or(a, b) => self.cond(a) || self.cond(b),
            Cond::Not(a) => !self.cond(a),
        }
    }
}

/// Evaluate `kernel`'s expression for every element of one output sample (row-major over
/// its output shape), reading the sample's `input` (of state `input_state`) and its random
/// draws `rand`.
pub(crate) fn eval_sample(
    kernel: &ExprKernel,
    input_state: &State,
    input: &[u8],
    rand: &[i64],
    out: &mut [u8],
) {
    let (expr, out_shape, out_dtype) = (&kernel.expr, &kernel.output.shape, kernel.output.dtype);
    let (in_shape, in_dtype) = (&input_state.shape, input_state.dtype);
    let n: usize = out_shape.iter().product();
    let mut coords = vec![0i64; out_shape.len()];
    for elem in 0..n {
        let v = Env {
            coords: &coords,
            rand,
            input,
            in_shape,
            in_dtype,
        }
        .expr(expr);
        debug_assert_eq!(
            std::mem::discriminant(&v),
            std::mem::discriminant(&V::from_bits(out_dtype, 0))
        );
        v.write(out, elem);
        // Advance the row-major coordinate counter.
        for ax in (0..coords.len()).rev() {
            coords[ax] += 1;
            if (coords[ax] as usize) < out_shape[ax] {
                break;
            }
            coords[ax] = 0;
        }
    }
}
