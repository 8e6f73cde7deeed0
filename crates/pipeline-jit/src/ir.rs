//! The IR of expressible operations: one scalar expression per output element.
//!
//! An expressible operation maps every output element, addressed by its coordinates, to an
//! [`Expr`]: loads from the input at [`Index`] coordinates, constants, per-channel tables,
//! casts and arithmetic, and branch-free selects on [`Cond`]itions over indices. Because an
//! expression only reads its input through `Expr::Input`, a chain of operations fuses by
//! substitution: the next operation's loads are replaced by the previous operation's
//! expression evaluated at the loaded coordinates ([`fuse`]).
//!
//! Semantics, shared by the interpreter and the code generator:
//! - load coordinates are clamped into the input shape (so every IR program is memory safe);
//! - table indices are clamped into the table;
//! - index arithmetic is wrapping `i64`; comparisons are signed;
//! - casts follow Rust's `as` (float to int saturates, NaN gives 0); `F16` is converted
//!   through `f64` (exact both ways for every other type but `I64` beyond 2^53, which
//!   overflows binary16 anyway), rounding once to nearest even, and its arithmetic is done
//!   in `f64` and rounded once;
//! - integer `Add`/`Sub`/`Mul` wrap in their type, `Min`/`Max` compare unsigned for `U8` and
//!   signed otherwise; `Div` is for floats only; float `Min`/`Max` order `-0.0` below `0.0`
//!   and return NaN if either operand is NaN.

use std::sync::Arc;

use crate::state::{ElemType, State};

/// An `i64` index expression, evaluated per output element.
#[derive(Debug, Clone, PartialEq)]
pub enum Index {
    /// The output element's coordinate along an axis.
    Coord(usize),
    /// A constant.
    Const(i64),
    /// The sample's draw of the operation's random parameter `k` (see [`RandSpec`]).
    Rand(usize),
    /// An integer-typed value (zero-extended for `U8`, sign-extended otherwise).
    Value(Box<Expr>),
    /// Wrapping sum.
    Add(Box<Index>, Box<Index>),
    /// Wrapping difference.
    Sub(Box<Index>, Box<Index>),
    /// Wrapping product.
    Mul(Box<Index>, Box<Index>),
    /// `if cond { a } else { b }`, branch-free.
    Select(Box<Cond>, Box<Index>, Box<Index>),
    /// The index clamped into `[lo, hi]` (inserted by fusion; usable directly).
    Clamp(Box<Index>, i64, i64),
}

/// Signed comparison of two indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// A boolean condition over indices.
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    /// A constant.
    Const(bool),
    /// A comparison.
    Cmp(CmpOp, Box<Index>, Box<Index>),
    /// Both hold.
    And(Box<Cond>, Box<Cond>),
    /// Either holds.
    Or(Box<Cond>, Box<Cond>),
    /// Negation.
    Not(Box<Cond>),
}

/// Binary arithmetic on two values of the same type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// Sum (wrapping for integers).
    Add,
    /// Difference (wrapping for integers).
    Sub,
    /// Product (wrapping for integers).
    Mul,
    /// Quotient (floats only).
    Div,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
}

/// A typed scalar expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// The input element at these coordinates (one per input axis, clamped into the shape).
    Input(Vec<Index>),
    /// A constant, as the bit pattern of a value of the type (see [`Expr::constant`]).
    Const(ElemType, u64),
    /// A constant table (bit patterns of values of the type), indexed with clamping.
    Table(ElemType, Arc<[u64]>, Box<Index>),
    /// An index converted to a value type with `as`.
    FromIndex(ElemType, Box<Index>),
    /// A value converted with `as`.
    Cast(ElemType, Box<Expr>),
    /// Binary arithmetic.
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// `if cond { a } else { b }`, branch-free.
    Select(Box<Cond>, Box<Expr>, Box<Expr>),
}

/// How one random parameter of an operation is drawn for each sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RandSpec {
    /// 1 with probability `p`, else 0.
    Bernoulli(f64),
    /// Uniform integer in `lo..=hi`.
    Int {
        /// Smallest value.
        lo: i64,
        /// Largest value.
        hi: i64,
    },
}

impl RandSpec {
    /// Smallest and largest value a draw can take.
    pub fn range(&self) -> (i64, i64) {
        match *self {
            RandSpec::Bernoulli(_) => (0, 1),
            RandSpec::Int { lo, hi } => (lo, hi),
        }
    }
}

/// What an expressible operation lowers to for a given input state.
#[derive(Debug, Clone, PartialEq)]
pub struct ExprKernel {
    /// The output state.
    pub output: State,
    /// The value of the output element at `Coord(0..rank)`.
    pub expr: Expr,
    /// The random parameters `Index::Rand(k)` refers to, drawn once per sample.
    pub random: Vec<RandSpec>,
}

/// Encode a number as the bit pattern of a value of `dtype` (converted with `as`).
pub fn bits_of(dtype: ElemType, v: f64) -> u64 {
    match dtype {
        ElemType::U8 => u64::from(v as u8),
        ElemType::U16 => u64::from(v as u16),
        ElemType::I32 => u64::from((v as i32) as u32),
        ElemType::I64 => (v as i64) as u64,
        ElemType::F16 => u64::from(crate::half::f16_from_f64(v)),
        ElemType::F32 => u64::from((v as f32).to_bits()),
        ElemType::F64 => v.to_bits(),
    }
}

impl Index {
    /// `Coord(axis)`.
    pub fn coord(axis: usize) -> Index {
        Index::Coord(axis)
    }
    /// `Rand(k)`.
    pub fn rand(k: usize) -> Index {
        Index::Rand(k)
    }
    /// `Const(v)`.
    pub fn constant(v: i64) -> Index {
        Index::Const(v)
    }
    /// A comparison `self op other`.
    pub fn cmp(self, op: CmpOp, other: Index) -> Cond {
        Cond::Cmp(op, Box::new(self), Box::new(other))
    }
    /// `if cond { self } else { other }`.
    pub fn select(cond: Cond, a: Index, b: Index) -> Index {
        Index::Select(Box::new(cond), Box::new(a), Box::new(b))
    }
}

impl Cond {
    /// `self && other`.
    pub fn and(self, other: Cond) -> Cond {
        Cond::And(Box::new(self), Box::new(other))
    }
    /// `self || other`.
    pub fn or(self, other: Cond) -> Cond {
        Cond::Or(Box::new(self), Box::new(other))
    }
}

impl Expr {
    /// The input element at `coords`.
    pub fn input(coords: Vec<Index>) -> Expr {
        Expr::Input(coords)
    }
    /// The input element at the same coordinates as the output element (rank `rank`).
    pub fn input_identity(rank: usize) -> Expr {
        Expr::Input((0..rank).map(Index::Coord).collect())
    }
    /// A constant of `dtype` converted from `v` with `as`.
    pub fn constant(dtype: ElemType, v: f64) -> Expr {
        Expr::Const(dtype, bits_of(dtype, v))
    }
    /// A table of `dtype` constants (converted with `as`) indexed by `index`.
    pub fn table(dtype: ElemType, values: &[f64], index: Index) -> Expr {
        let bits: Vec<u64> = values.iter().map(|&v| bits_of(dtype, v)).collect();
        Expr::Table(dtype, bits.into(), Box::new(index))
    }
    /// `self as dtype`.
    pub fn cast(self, dtype: ElemType) -> Expr {
        Expr::Cast(dtype, Box::new(self))
    }
    /// `self op other`.
    pub fn bin(self, op: BinOp, other: Expr) -> Expr {
        Expr::Bin(op, Box::new(self), Box::new(other))
    }
    /// `if cond { a } else { b }`.
    pub fn select(cond: Cond, a: Expr, b: Expr) -> Expr {
        Expr::Select(Box::new(cond), Box::new(a), Box::new(b))
    }

    /// Number of nodes (a measure of the code the expression generates).
    pub fn size(&self) -> usize {
        match self {
            Expr::Input(c) => 1 + c.iter().map(Index::size).sum::<usize>(),
            Expr::Const(..) => 1,
            Expr::Table(_, _, i) | Expr::FromIndex(_, i) => 1 + i.size(),
            Expr::Cast(_, e) => 1 + e.size(),
            Expr::Bin(_, a, b) => 1 + a.size() + b.size(),
            Expr::Select(c, a, b) => 1 + c.size() + a.size() + b.size(),
        }
    }

    /// The type of the expression's value, given the input's type; `Err` names the problem.
    pub fn dtype(&self, input: ElemType) -> Result<ElemType, String> {
        Ok(match self {
            Expr::Input(_) => input,
            Expr::Const(t, _) | Expr::Table(t, _, _) | Expr::FromIndex(t, _) => *t,
            Expr::Cast(t, e) => {
                e.dtype(input)?;
                *t
            }
            Expr::Bin(op, a, b) => {
                let (ta, tb) = (a.dtype(input)?, b.dtype(input)?);
                if ta != tb {
                    return Err(format!("{op:?} of {ta:?} and {tb:?}"));
                }
                if *op == BinOp::Div && !ta.is_float() {
                    return Err(format!("Div of integers ({ta:?})"));
                }
                ta
            }
            Expr::Select(_, a, b) => {
                let (ta, tb) = (a.dtype(input)?, b.dtype(input)?);
                if ta != tb {
                    return Err(format!("Select between {ta:?} and {tb:?}"));
                }
                ta
            }
        })
    }
}

impl Index {
    fn size(&self) -> usize {
        match self {
            Index::Coord(_) | Index::Const(_) | Index::Rand(_) => 1,
            Index::Value(e) => 1 + e.size(),
            Index::Add(a, b) | Index::Sub(a, b) | Index::Mul(a, b) => 1 + a.size() + b.size(),
            Index::Select(c, a, b) => 1 + c.size() + a.size() + b.size(),
            Index::Clamp(a, _, _) => 1 + a.size(),
        }
    }
}

impl Cond {
    fn size(&self) -> usize {
        match self {
            Cond::Const(_) => 1,
            Cond::Cmp(_, a, b) => 1 + a.size() + b.size(),
            Cond::And(a, b) | Cond::Or(a, b) => 1 + a.size() + b.size(),
            Cond::Not(a) => 1 + a.size(),
        }
    }
}

/// Check a lowered kernel against its input state: types agree, every coordinate, random
/// parameter and load is well formed, and loads have something to read.
pub fn validate(kernel: &ExprKernel, input: &State) -> Result<(), String> {
    let t = kernel.expr.dtype(input.dtype)?;
    if t != kernel.output.dtype {
        return Err(format!(
            "expression is {t:?} but the output state says {:?}",
            kernel.output.dtype
        ));
    }
    let ctx = Check {
        in_rank: input.shape.len(),
        out_rank: kernel.output.shape.len(),
        rands: kernel.random.len(),
        input,
    };
    ctx.expr(&kernel.expr)?;
    for r in &kernel.random {
        match *r {
            RandSpec::Bernoulli(p) if !(0.0..=1.0).contains(&p) => {
                return Err(format!("Bernoulli probability {p} outside [0, 1]"));
            }
            RandSpec::Int { lo, hi } if lo > hi => {
                return Err(format!("empty random range {lo}..={hi}"));
            }
            _ => {}
        }
    }
    Ok(())
}

struct Check<'a> {
    in_rank: usize,
    out_rank: usize,
    rands: usize,
    input: &'a State,
}

impl Check<'_> {
    fn expr(&self, e: &Expr) -> Result<(), String> {
        match e {
            Expr::Input(c) => {
                if c.len() != self.in_rank {
                    return Err(format!(
                        "load with {} coordinates from a rank-{} input",
                        c.len(),
                        self.in_rank
                    ));
                }
                if self.input.shape.contains(&0) {
                    return Err("load from an empty input".into());
                }
                c.iter().try_for_each(|i| self.index(i))
            }
            Expr::Const(..) => Ok(()),
            Expr::Table(_, t, i) => {
                if t.is_empty() {
                    return Err("empty table".into());
                }
                self.index(i)
            }
            Expr::FromIndex(_, i) => self.index(i),
            Expr::Cast(_, e) => self.expr(e),
            Expr::Bin(_, a, b) => self.expr(a).and(self.expr(b)),
            Expr::Select(c, a, b) => self.cond(c).and(self.expr(a)).and(self.expr(b)),
        }
    }
    fn index(&self, i: &Index) -> Result<(), String> {
        match i {
            Index::Coord(k) if *k >= self.out_rank => {
                Err(format!("Coord({k}) of a rank-{} output", self.out_rank))
            }
            Index::Rand(k) if *k >= self.rands => {
                Err(format!("Rand({k}) but {} random parameters", self.rands))
            }
            Index::Coord(_) | Index::Const(_) | Index::Rand(_) => Ok(()),
            Index::Value(e) => {
                let t = e.dtype(self.input.dtype)?;
                if t.is_float() {
                    return Err(format!("index from a {t:?} value"));
                }
                self.expr(e)
            }
            Index::Add(a, b) | Index::Sub(a, b) | Index::Mul(a, b) => {
                self.index(a).and(self.index(b))
            }
            Index::Select(c, a, b) => self.cond(c).and(self.index(a)).and(self.index(b)),
            Index::Clamp(a, lo, hi) => {
                if lo > hi {
                    return Err(format!("Clamp to empty range {lo}..={hi}"));
                }
                self.index(a)
            }
        }
    }
    fn cond(&self, c: &Cond) -> Result<(), String> {
        match c {
            Cond::Const(_) => Ok(()),
            Cond::Cmp(_, a, b) => self.index(a).and(self.index(b)),
            Cond::And(a, b) | Cond::Or(a, b) => self.cond(a).and(self.cond(b)),
            Cond::Not(a) => self.cond(a),
        }
    }
}

/// Fuse `outer` (which reads the output of `inner`) into one expression reading `inner`'s
/// input: each `Input(coords)` of `outer` becomes `inner` evaluated at the clamped `coords`
/// (`inner_shape` is `inner`'s output shape). `outer`'s random parameters are shifted by
/// `rand_shift` so both operations' parameters live in one list.
pub fn fuse(outer: &Expr, inner: &Expr, inner_shape: &[usize], rand_shift: usize) -> Expr {
    let mut f = Fuse {
        inner: Some(inner),
        inner_shape,
        rand_shift,
    };
    f.expr(outer)
}

/// Renumber `Rand(k)` to `Rand(k + shift)` throughout `e`.
pub fn shift_rand(e: &Expr, shift: usize) -> Expr {
    Fuse {
        inner: None,
        inner_shape: &[],
        rand_shift: shift,
    }
    .expr(e)
}

struct Fuse<'a> {
    inner: Option<&'a Expr>,
    inner_shape: &'a [usize],
    rand_shift: usize,
}

impl Fuse<'_> {
    fn expr(&mut self, e: &Expr) -> Expr {
        match e {
            Expr::Input(coords) if self.inner.is_none() => {
                Expr::Input(coords.iter().map(|c| self.index(c)).collect())
            }
            Expr::Input(coords) => {
                let at: Vec<Index> = coords
                    .iter()
                    .zip(self.inner_shape)
                    .map(|(c, &d)| Index::Clamp(Box::new(self.index(c)), 0, d as i64 - 1))
                    .collect();
                map_coords_expr(self.inner.unwrap_or(e), &at)
            }
            Expr::Const(..) => e.clone(),
            Expr::Table(t, v, i) => Expr::Table(*t, v.clone(), Box::new(self.index(i))),
            Expr::FromIndex(t, i) => Expr::FromIndex(*t, Box::new(self.index(i))),
            Expr::Cast(t, a) => Expr::Cast(*t, Box::new(self.expr(a))),
            Expr::Bin(op, a, b) => Expr::Bin(*op, Box::new(self.expr(a)), Box::new(self.expr(b))),
            Expr::Select(c, a, b) => Expr::Select(
                Box::new(self.cond(c)),
                Box::new(self.expr(a)),
                Box::new(self.expr(b)),
            ),
        }
    }
    fn index(&mut self, i: &Index) -> Index {
        match i {
            Index::Coord(_) | Index::Const(_) => i.clone(),
            Index::Rand(k) => Index::Rand(k + self.rand_shift),
            Index::Value(e) => Index::Value(Box::new(self.expr(e))),
            Index::Add(a, b) => Index::Add(Box::new(self.index(a)), Box::new(self.index(b))),
            Index::Sub(a, b) => Index::Sub(Box::new(self.index(a)), Box::new(self.index(b))),
            Index::Mul(a, b) => Index::Mul(Box::new(self.index(a)), Box::new(self.index(b))),
            Index::Select(c, a, b) => Index::Select(
                Box::new(self.cond(c)),
                Box::new(self.index(a)),
                Box::new(self.index(b)),
            ),
            Index::Clamp(a, lo, hi) => Index::Clamp(Box::new(self.index(a)), *lo, *hi),
        }
    }
    fn cond(&mut self, c: &Cond) -> Cond {
        match c {
            Cond::Const(_) => c.clone(),
            Cond::Cmp(op, a, b) => Cond::Cmp(*op, Box::new(self.index(a)), Box::new(self.index(b))),
            Cond::And(a, b) => Cond::And(Box::new(self.cond(a)), Box::new(self.cond(b))),
            Cond::Or(a, b) => Cond::Or(Box::new(self.cond(a)), Box::new(self.cond(b))),
            Cond::Not(a) => Cond::Not(Box::new(self.cond(a))),
        }
    }
}

/// Replace every `Coord(j)` of `e` (outside nested loads' own coordinates, which are already
/// expressed in `e`'s coordinates) by `at[j]`.
fn map_coords_expr(e: &Expr, at: &[Index]) -> Expr {
    match e {
        Expr::Input(c) => Expr::Input(c.iter().map(|i| map_coords_index(i, at)).collect()),
        Expr::Const(..) => e.clone(),
        Expr::Table(t, v, i) => Expr::Table(*t, v.clone(), Box::new(map_coords_index(i, at))),
        Expr::FromIndex(t, i) => Expr::FromIndex(*t, Box::new(map_coords_index(i, at))),
        Expr::Cast(t, a) => Expr::Cast(*t, Box::new(map_coords_expr(a, at))),
        Expr::Bin(op, a, b) => Expr::Bin(
            *op,
            Box::new(map_coords_expr(a, at)),
            Box::new(map_coords_expr(b, at)),
        ),
        Expr::Select(c, a, b) => Expr::Select(
            Box::new(map_coords_cond(c, at)),
            Box::new(map_coords_expr(a, at)),
            Box::new(map_coords_expr(b, at)),
        ),
    }
}

fn map_coords_index(i: &Index, at: &[Index]) -> Index {
    match i {
        Index::Coord(j) => at[*j].clone(),
        Index::Const(_) | Index::Rand(_) => i.clone(),
        Index::Value(e) => Index::Value(Box::new(map_coords_expr(e, at))),
        Index::Add(a, b) => Index::Add(
            Box::new(map_coords_index(a, at)),
            Box::new(map_coords_index(b, at)),
        ),
        Index::Sub(a, b) => Index::Sub(
            Box::new(map_coords_index(a, at)),
            Box::new(map_coords_index(b, at)),
        ),
        Index::Mul(a, b) => Index::Mul(
            Box::new(map_coords_index(a, at)),
            Box::new(map_coords_index(b, at)),
        ),
        Index::Select(c, a, b) => Index::Select(
            Box::new(map_coords_cond(c, at)),
            Box::new(map_coords_index(a, at)),
            Box::new(map_coords_index(b, at)),
        ),
        Index::Clamp(a, lo, hi) => Index::Clamp(Box::new(map_coords_index(a, at)), *lo, *hi),
    }
}

fn map_coords_cond(c: &Cond, at: &[Index]) -> Cond {
    match c {
        Cond::Const(_) => c.clone(),
        Cond::Cmp(op, a, b) => Cond::Cmp(
            *op,
            Box::new(map_coords_index(a, at)),
            Box::new(map_coords_index(b, at)),
        ),
        Cond::And(a, b) => Cond::And(
            Box::new(map_coords_cond(a, at)),
            Box::new(map_coords_cond(b, at)),
        ),
        Cond::Or(a, b) => Cond::Or(
            Box::new(map_coords_cond(a, at)),
            Box::new(map_coords_cond(b, at)),
        ),
        Cond::Not(a) => Cond::Not(Box::new(map_coords_cond(a, at))),
    }
}

impl std::ops::Add for Index {
    type Output = Index;
    /// `self + other` (wrapping).
    fn add(self, other: Index) -> Index {
        Index::Add(Box::new(self), Box::new(other))
    }
}

impl std::ops::Add<i64> for Index {
    type Output = Index;
    /// `self + other` (wrapping).
    fn add(self, other: i64) -> Index {
        Index::Add(Box::new(self), Box::new(Index::Const(other)))
    }
}

impl std::ops::Sub for Index {
    type Output = Index;
    /// `self - other` (wrapping).
    fn sub(self, other: Index) -> Index {
        Index::Sub(Box::new(self), Box::new(other))
    }
}

impl std::ops::Sub<i64> for Index {
    type Output = Index;
    /// `self - other` (wrapping).
    fn sub(self, other: i64) -> Index {
        Index::Sub(Box::new(self), Box::new(Index::Const(other)))
    }
}

impl std::ops::Mul for Index {
    type Output = Index;
    /// `self * other` (wrapping).
    fn mul(self, other: Index) -> Index {
        Index::Mul(Box::new(self), Box::new(other))
    }
}

impl std::ops::Mul<i64> for Index {
    type Output = Index;
    /// `self * other` (wrapping).
    fn mul(self, other: i64) -> Index {
        Index::Mul(Box::new(self), Box::new(Index::Const(other)))
    }
}

impl std::ops::Not for Cond {
    type Output = Cond;
    /// `!self`.
    fn not(self) -> Cond {
        Cond::Not(Box::new(self))
    }
}
