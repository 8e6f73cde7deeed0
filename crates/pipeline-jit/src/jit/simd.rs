//! Vector code for fused loop nests: [`LANES`] consecutive elements of the innermost output
//! axis are computed at once in 128-bit Cranelift vectors (`I8X16`, `I32X4`, `F32X4`, …).
//!
//! A wide value of element type `t` is `t.size()` registers of 16 bytes holding the lanes in
//! order. Only operations whose per-lane result is exactly the scalar one are emitted as
//! vector instructions: IEEE `fadd`/`fsub`/`fmul`/`fdiv`/`fmin`/`fmax` (the same operation
//! per lane, in the same order, no fusing), wrapping integer add/sub/mul, integer min/max,
//! and the conversions `u8 -> i32 -> f32` (exact widening, then the same `fcvt_from_sint`).
//! `u8`-indexed `f32` and binary16 tables (FFCV's normalize lookup tables) become
//! arithmetic that the code generator has checked, for all 256 inputs of every row, to
//! give the table's bits ([`super::affine`], [`super::affine16`]); their `u8` lanes are
//! read straight into `f32` lanes holding `32768 + x` by one byte shuffle per four lanes
//! where they come from the input (`magic_floats`). Everything else (data-dependent table
//! lookups, per-lane conditions, binary16 arithmetic and conversions, narrowing casts) is
//! emitted by the scalar code once per lane and gathered into a vector with `insertlane`,
//! so the vector path computes bit for bit what the scalar path does. Binary16 lanes are
//! `I16X8` registers of their bits.
//!
//! Loads: when the 16 lanes of an input read share one runtime address and differ by
//! constant offsets (a contiguous row, a flipped row, a stride-3 HWC channel), the bytes are
//! read with 16-byte loads that cover exactly the span from the first to the last lane's
//! element (the last load is moved back to end at the span's end, overlapping the one
//! before), then rearranged with `shuffle`. Every byte of that span lies between two lane
//! addresses that the scalar code would read, so the loads stay inside the buffer.

use std::sync::atomic::{AtomicBool, Ordering};

use cranelift_codegen::ir::types;
use cranelift_codegen::ir::{ConstantData, Endianness, InstBuilder, MemFlagsData, Type, Value};

use super::element::{CV, Elem, Gen, IV};
use crate::ir::{BinOp, Expr, Index};
use crate::state::ElemType;

/// Elements of the innermost output axis computed by one vector group.
pub(super) const LANES: usize = 16;

/// Most 16-byte loads one vector input read may use before it is gathered lane by lane.
const MAX_LOADS: usize = 16;

static VECTOR_CODE: AtomicBool = AtomicBool::new(true);

/// Whether the code generator emits vector code for fused loop nests (the default). Turning
/// it off makes every later compilation emit the scalar nest only: a benchmark switch, so
/// that both loops can be measured in one process. Outputs are bit-identical either way.
pub fn set_vector_code(enabled: bool) {
    VECTOR_CODE.store(enabled, Ordering::Relaxed);
}

/// Whether later compilations emit vector code (see [`set_vector_code`]). Always `false`
/// on a host whose vector instructions Cranelift's lowering of shuffles and widening needs
/// are missing (x86-64 before SSSE3 and SSE4.1); the scalar nest is emitted there.
pub fn vector_code() -> bool {
    VECTOR_CODE.load(Ordering::Relaxed) && host_vectors()
}

fn host_vectors() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("ssse3")
            && std::arch::is_x86_feature_detected!("sse4.1")
    }
    #[cfg(target_arch = "aarch64")]
    {
        true
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// Whether the host has fused multiply-add, which Cranelift's native ISA then enables
/// (used only by the verified table replacement of [`super::affine`]).
fn host_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(target_arch = "aarch64")]
    {
        true
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// The 128-bit vector type holding lanes of `t`.
pub(super) fn vty(t: ElemType) -> Type {
    match t {
        ElemType::U8 => types::I8X16,
        ElemType::U16 => types::I16X8,
        ElemType::I32 => types::I32X4,
        ElemType::I64 => types::I64X2,
        ElemType::F16 => types::I16X8,
        ElemType::F32 => types::F32X4,
        ElemType::F64 => types::F64X2,
    }
}

/// Whether `op` on lanes of `t` has a vector instruction whose lanes equal the scalar one.
fn vector_bin(op: BinOp, t: ElemType) -> bool {
    match t {
        ElemType::F32 | ElemType::F64 => true,
        ElemType::I32 => op != BinOp::Div,
        ElemType::U8 => matches!(op, BinOp::Add | BinOp::Sub | BinOp::Min | BinOp::Max),
        ElemType::I64 => matches!(op, BinOp::Add | BinOp::Sub),
        // Scalar code per lane, gathered: no vector form is checked against it yet.
        ElemType::U16 | ElemType::F16 => false,
    }
}

fn vflags() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// Stores per-row `f32` coefficients, row after row, in a table the compiled code keeps
/// alive (`tables`), and returns its address for the code to load from.
fn keep_coefficients<const N: usize>(
    tables: &mut Vec<Box<[u8]>>,
    rows: impl Iterator<Item = [f32; N]>,
) -> i64 {
    let bytes: Box<[u8]> = rows.flatten().flat_map(f32::to_ne_bytes).collect();
    let base = bytes.as_ptr() as i64;
    tables.push(bytes);
    base
}

impl Gen<'_, '_> {
    /// Emit `e` for the lanes `lanes` (one emission context per lane): `t.size()` vector
    /// registers and the element type.
    pub(super) fn vexpr(&mut self, lanes: &[Elem<'_>], e: &Expr) -> (Vec<Value>, ElemType) {
        let seg = lanes[0].seg;
        match e {
            Expr::Input(cs) => {
                let addrs: Vec<(Value, i64)> =
                    lanes.iter().map(|el| self.input_addr(el, cs)).collect();
                if addrs.iter().all(|a| a.0 == addrs[0].0) {
                    let offs: Vec<i64> = addrs.iter().map(|a| a.1).collect();
                    if let Some(regs) = self.vload(addrs[0].0, &offs, seg.in_dtype, seg.in_readonly)
                    {
                        return (regs, seg.in_dtype);
                    }
                }
                self.gather(lanes, e)
            }
            Expr::Const(t, bits) => {
                let per = 16 / t.size();
                let v = self.vconsts(*t, &vec![*bits; per])[0];
                (vec![v; t.size()], *t)
            }
            Expr::Table(t, bits, i) => {
                if *t == ElemType::F32
                    && let Some(regs) = self.affine_table(lanes, bits, i)
                {
                    return (regs, ElemType::F32);
                }
                if *t == ElemType::F16
                    && let Some(regs) = self.line16_table(lanes, bits, i)
                {
                    return (regs, ElemType::F16);
                }
                let hi = bits.len() as i64 - 1;
                let ivs: Vec<IV> = lanes.iter().map(|el| self.clamped(el, i, 0, hi)).collect();
                if ivs.iter().all(|iv| matches!(iv, IV::C(_))) {
                    let lane_bits: Vec<u64> = ivs
                        .iter()
                        .map(|iv| match iv {
                            IV::C(k) => bits[*k as usize],
                            IV::V(..) => unreachable!("checked constant"),
                        })
                        .collect();
                    return (self.vconsts(*t, &lane_bits), *t);
                }
                let same = match ivs[0] {
                    IV::V(v, k) => ivs
                        .iter()
                        .all(|iv| matches!(iv, IV::V(w, l) if *w == v && *l == k)),
                    IV::C(_) => false,
                };
                if same {
                    // One entry for every lane (a per-channel table in a channel loop).
                    let (s, t) = self.expr(&lanes[0], e);
                    let v = self.b.ins().splat(vty(t), s);
                    return (vec![v; t.size()], t);
                }
                self.gather(lanes, e)
            }
            Expr::Cast(to, a) => {
                let Ok(from) = a.dtype(seg.in_dtype) else {
                    return self.gather(lanes, e);
                };
                match (from, *to) {
                    _ if from == *to => self.vexpr(lanes, a),
                    (ElemType::U8, ElemType::I32 | ElemType::F32) => {
                        let (x, _) = self.vexpr(lanes, a);
                        let mut regs = self.widen_u8_to_i32(x[0]);
                        if *to == ElemType::F32 {
                            for r in &mut regs {
                                *r = self.b.ins().fcvt_from_sint(types::F32X4, *r);
                            }
                        }
                        (regs, *to)
                    }
                    (ElemType::I32, ElemType::F32) => {
                        let (x, _) = self.vexpr(lanes, a);
                        let regs = x
                            .iter()
                            .map(|&r| self.b.ins().fcvt_from_sint(types::F32X4, r))
                            .collect();
                        (regs, *to)
                    }
                    _ => self.gather(lanes, e),
                }
            }
            Expr::Bin(op, a, b) => {
                let Ok(t) = a.dtype(seg.in_dtype) else {
                    return self.gather(lanes, e);
                };
                if !vector_bin(*op, t) {
                    return self.gather(lanes, e);
                }
                let (x, _) = self.vexpr(lanes, a);
                let (y, _) = self.vexpr(lanes, b);
                let regs = x
                    .iter()
                    .zip(&y)
                    .map(|(&x, &y)| self.vbin(*op, t, x, y))
                    .collect();
                (regs, t)
            }
            Expr::Select(c, a, b) => {
                let cs: Vec<CV> = lanes.iter().map(|el| self.cond(el, c)).collect();
                if cs.iter().all(|c| matches!(c, CV::C(true))) {
                    self.vexpr(lanes, a)
                } else if cs.iter().all(|c| matches!(c, CV::C(false))) {
                    self.vexpr(lanes, b)
                } else {
                    self.gather(lanes, e)
                }
            }
            Expr::FromIndex(..) => self.gather(lanes, e),
        }
    }

    /// For a table index `x * rows + j` with a `u8` value `x` and a row `j` that is the
    /// same for every lane and provably in `0..rows` (so no clamping happens): `x`, the
    /// row count and the row.
    fn uniform_row<'e>(
        &mut self,
        lanes: &[Elem<'_>],
        len: usize,
        i: &'e Index,
    ) -> Option<(&'e Expr, usize, IV)> {
        let seg = lanes[0].seg;
        let Index::Add(a, j) = i else { return None };
        let Index::Mul(x, k) = &**a else { return None };
        let (Index::Value(x), Index::Const(rows)) = (&**x, &**k) else {
            return None;
        };
        let rows = usize::try_from(*rows).ok()?;
        if x.dtype(seg.in_dtype).ok()? != ElemType::U8 || len != 256 * rows {
            return None;
        }
        for el in lanes {
            let (lo, hi) = self.range(el, j)?;
            if lo < 0 || hi >= rows as i64 {
                return None;
            }
        }
        let ivs: Vec<IV> = lanes.iter().map(|el| self.index(el, j)).collect();
        let uniform = ivs.iter().all(|iv| match (iv, &ivs[0]) {
            (IV::C(a), IV::C(b)) => a == b,
            (IV::V(v, k), IV::V(w, l)) => v == w && k == l,
            _ => false,
        });
        uniform.then_some((&**x, rows, ivs[0]))
    }

    /// The coefficients of row `row` of a table stored at `base` as `n` `f32`s per row:
    /// each one splatted into an `F32X4` (constants for a constant row, loads otherwise).
    fn row_coefs(&mut self, row: IV, base: i64, consts: Option<&[f32]>, n: i64) -> Vec<Value> {
        match (row, consts) {
            (IV::C(_), Some(cs)) => cs
                .iter()
                .map(|c| self.vconsts(ElemType::F32, &[u64::from(c.to_bits()); 4])[0])
                .collect(),
            (IV::V(v, k), _) => {
                let off = self.imul_c(v, 4 * n);
                let addr = self.iadd_c(off, base);
                let flags = MemFlagsData::new()
                    .with_notrap()
                    .with_readonly()
                    .with_can_move();
                (0..n)
                    .map(|c| {
                        let (a, o) = self.split_offset(addr, k.wrapping_mul(4 * n) + 4 * c);
                        let s = self.b.ins().load(types::F32, flags, a, o);
                        self.b.ins().splat(types::F32X4, s)
                    })
                    .collect()
            }
            (IV::C(_), None) => unreachable!("constant rows come with their coefficients"),
        }
    }

    /// `table[x * rows + j]` of a binary16 table, as the arithmetic of
    /// [`super::affine16`] when the table has an exact one.
    fn line16_table(
        &mut self,
        lanes: &[Elem<'_>],
        bits: &std::sync::Arc<[u64]>,
        i: &Index,
    ) -> Option<Vec<Value>> {
        let (x, rows, row) = self.uniform_row(lanes, bits.len(), i)?;
        let key = bits.as_ptr() as usize;
        if !self.lines16.contains_key(&key) {
            let fit = super::affine16::fit_table16(bits, rows, host_fma()).map(|rows| {
                let base = keep_coefficients(self.tables, rows.iter().map(|r| [r.c, r.a, r.e]));
                (rows, base)
            });
            tracing::debug!(rows, exact = fit.is_some(), "u8 -> f16 table as arithmetic");
            self.lines16.insert(key, fit);
        }
        let (coefs, base) = self.lines16[&key].clone()?;
        let consts = match row {
            IV::C(r) => {
                let f = coefs[r as usize];
                Some([f.c, f.a, f.e])
            }
            IV::V(..) => None,
        };
        let k = self.row_coefs(row, base, consts.as_ref().map(|c| &c[..]), 3);
        let fs = self.biased_input(lanes, x);
        let bias = self.vconsts(ElemType::I32, &[u64::from(super::affine16::BIAS16); 4])[0];
        let floor = self.vconsts(ElemType::I32, &[u64::from(super::affine16::FLOOR16); 4])[0];
        let [m_lo, m_hi] = super::affine16::MADD16.map(u64::from);
        let madd = self.vconsts(
            ElemType::F16,
            &[m_lo, m_hi, m_lo, m_hi, m_lo, m_hi, m_lo, m_hi],
        );
        let halves = fs
            .into_iter()
            .map(|f| {
                let w = self.b.ins().fsub(f, k[0]);
                let y = if host_fma() {
                    self.b.ins().fma(w, k[1], k[2])
                } else {
                    let p = self.b.ins().fmul(w, k[1]);
                    self.b.ins().fadd(p, k[2])
                };
                let mut u = self.b.ins().bitcast(types::I32X4, vflags(), y);
                if coefs[0].clamp {
                    u = self.b.ins().umax(u, floor);
                }
                let t = self.b.ins().iadd(u, bias);
                let t = self.b.ins().ushr_imm_s(t, 13);
                // `pmaddwd`: low half * 1 + high half * 8192, per 32-bit lane.
                let t = self.b.ins().bitcast(types::I16X8, vflags(), t);
                let lo = self.b.ins().swiden_low(t);
                let hi = self.b.ins().swiden_high(t);
                let mlo = self.b.ins().swiden_low(madd[0]);
                let mhi = self.b.ins().swiden_high(madd[0]);
                let p = self.b.ins().imul(lo, mlo);
                let q = self.b.ins().imul(hi, mhi);
                self.b.ins().iadd_pairwise(p, q)
            })
            .collect::<Vec<_>>();
        let regs = (0..2)
            .map(|h| self.b.ins().unarrow(halves[2 * h], halves[2 * h + 1]))
            .collect();
        Some(regs)
    }

    /// The table as [`super::affine::Shifted`] forms (hosts with FMA), if it has them.
    fn shifted_table(
        &mut self,
        lanes: &[Elem<'_>],
        bits: &std::sync::Arc<[u64]>,
        x: &Expr,
        rows: usize,
        row: IV,
    ) -> Option<Vec<Value>> {
        let key = bits.as_ptr() as usize;
        if !self.shifted.contains_key(&key) {
            let fit = super::affine::fit_shifted(bits, rows).map(|rows| {
                let base =
                    keep_coefficients(self.tables, rows.iter().map(|r| [r.c, r.a_hi, r.a_lo, r.e]));
                (rows, base)
            });
            tracing::debug!(
                rows,
                exact = fit.is_some(),
                "u8 -> f32 table as shifted form"
            );
            self.shifted.insert(key, fit);
        }
        let (coefs, base) = self.shifted[&key].clone()?;
        let consts = match row {
            IV::C(r) => {
                let f = coefs[r as usize];
                Some([f.c, f.a_hi, f.a_lo, f.e])
            }
            IV::V(..) => None,
        };
        let k = self.row_coefs(row, base, consts.as_ref().map(|c| &c[..]), 4);
        let fs = self.biased_input(lanes, x);
        let regs = fs
            .into_iter()
            .map(|f| {
                let w = self.b.ins().fsub(f, k[0]);
                let inner = self.b.ins().fma(f, k[2], k[3]);
                self.b.ins().fma(w, k[1], inner)
            })
            .collect();
        Some(regs)
    }

    /// `32768 + x` for the sixteen `u8` lanes `x`, as four `F32X4` registers (exact):
    /// from [`Self::magic_floats`] when `x` is read straight from the input, converted and
    /// added otherwise.
    fn biased_input(&mut self, lanes: &[Elem<'_>], x: &Expr) -> Vec<Value> {
        if let Some(fs) = self.magic_floats(lanes, x) {
            return fs;
        }
        let (xv, _) = self.vexpr(lanes, x);
        let ints = self.widen_u8_to_i32(xv[0]);
        let bias = self.vconsts(ElemType::F32, &[u64::from(32768f32.to_bits()); 4])[0];
        ints.into_iter()
            .map(|r| {
                let v = self.b.ins().fcvt_from_sint(types::F32X4, r);
                self.b.ins().fadd(v, bias)
            })
            .collect()
    }

    /// For `u8` input lanes read at constant offsets from one runtime address: four
    /// `F32X4` registers whose lanes are `32768 + x` (bits `0x4700_xx00`, see
    /// [`super::affine::MAGIC`]), each one shuffle of a 16-byte load inside the lanes'
    /// span with a constant holding the exponent byte; `None` when the lanes do not share
    /// an address, their span is shorter than a load, or four lanes do not fit one load.
    fn magic_floats(&mut self, lanes: &[Elem<'_>], x: &Expr) -> Option<Vec<Value>> {
        let seg = lanes[0].seg;
        let Expr::Input(cs) = x else { return None };
        if seg.in_dtype != ElemType::U8 {
            return None;
        }
        let addrs: Vec<(Value, i64)> = lanes.iter().map(|el| self.input_addr(el, cs)).collect();
        let addr = addrs[0].0;
        if addrs.iter().any(|a| a.0 != addr) {
            return None;
        }
        let offs: Vec<i64> = addrs.iter().map(|a| a.1).collect();
        let min = *offs.iter().min()?;
        let end = offs.iter().max()?.checked_add(1)?;
        if end.checked_sub(min)? < 16 {
            return None;
        }
        // Each load starts at its four lanes' first byte, or ends at the span's end: it
        // stays between two lane addresses (inside the buffer), as `vload`'s do.
        let mut starts = Vec::with_capacity(offs.len() / 4);
        for q in offs.chunks(4) {
            let (lo, hi) = (*q.iter().min()?, *q.iter().max()?);
            // A load already emitted in this body (another channel of the same pixels)
            // that covers the four lanes is reused: it stayed inside its own lanes' span.
            // Otherwise a new load starts in `hi - 15 ..= lo` inside this span.
            if let Some(p) = (hi - 15..=lo).find(|&p| self.memo.contains_key(&(7, addr, p))) {
                starts.push(p);
                continue;
            }
            let last = lo.min(end - 16);
            if (hi - 15).max(min) > last {
                return None;
            }
            starts.push(last);
        }
        let mut flags = MemFlagsData::new().with_notrap();
        if seg.in_readonly {
            flags = flags.with_readonly().with_can_move();
        }
        let mut k = vec![0u8; 16];
        k[1] = (super::affine::MAGIC >> 24) as u8;
        let kc = self.b.func.dfg.constants.insert(ConstantData::from(k));
        let kv = self.b.ins().vconst(types::I8X16, kc);
        let regs = offs
            .chunks(4)
            .zip(starts)
            .map(|(q, p)| {
                let ld = match self.memo.get(&(7, addr, p)) {
                    Some(&v) => v,
                    None => {
                        let (a, o) = self.split_offset(addr, p);
                        let v = self.b.ins().load(types::I8X16, flags, a, o);
                        self.memo.insert((7, addr, p), v);
                        v
                    }
                };
                // Lane bytes, little-endian: 0, x, 0, the exponent byte.
                let mut mask = [16u8; 16];
                for (l, &o) in q.iter().enumerate() {
                    mask[4 * l + 1] = (o - p) as u8;
                    mask[4 * l + 3] = 17;
                }
                let s = self.shuffle(ld, kv, &mask);
                self.b.ins().bitcast(types::F32X4, vflags(), s)
            })
            .collect();
        Some(regs)
    }

    /// `table[x * rows + j]` for a `u8` value `x` and a row `j` common to all lanes, as
    /// the arithmetic of [`super::affine`] when the table has an exact one.
    fn affine_table(
        &mut self,
        lanes: &[Elem<'_>],
        bits: &std::sync::Arc<[u64]>,
        i: &Index,
    ) -> Option<Vec<Value>> {
        let (x, rows, row) = self.uniform_row(lanes, bits.len(), i)?;
        let key = bits.as_ptr() as usize;
        if host_fma()
            && let Some(regs) = self.shifted_table(lanes, bits, x, rows, row)
        {
            return Some(regs);
        }
        if !self.affine.contains_key(&key) {
            let fit = super::affine::fit_table(bits, rows, host_fma()).map(|rows| {
                let base = keep_coefficients(
                    self.tables,
                    rows.iter().map(|r| [r.a_hi, r.b_hi, r.a_lo, r.b_lo]),
                );
                (rows, base)
            });
            tracing::debug!(rows, exact = fit.is_some(), "u8 -> f32 table as arithmetic");
            self.affine.insert(key, fit);
        }
        let (coefs, base) = self.affine[&key].clone()?;
        let consts = match row {
            IV::C(r) => {
                let f = coefs[r as usize];
                Some([f.a_hi, f.b_hi, f.a_lo, f.b_lo])
            }
            IV::V(..) => None,
        };
        let splats = self.row_coefs(row, base, consts.as_ref().map(|c| &c[..]), 4);
        let (xv, _) = self.vexpr(lanes, x);
        let ints = self.widen_u8_to_i32(xv[0]);
        let regs = ints
            .into_iter()
            .map(|r| {
                let v = self.b.ins().fcvt_from_sint(types::F32X4, r);
                let (hi, lo) = if host_fma() {
                    (
                        self.b.ins().fma(v, splats[0], splats[1]),
                        self.b.ins().fma(v, splats[2], splats[3]),
                    )
                } else {
                    let p = self.b.ins().fmul(v, splats[0]);
                    let q = self.b.ins().fmul(v, splats[2]);
                    (
                        self.b.ins().fadd(p, splats[1]),
                        self.b.ins().fadd(q, splats[3]),
                    )
                };
                self.b.ins().fadd(hi, lo)
            })
            .collect();
        Some(regs)
    }

    fn vbin(&mut self, op: BinOp, t: ElemType, x: Value, y: Value) -> Value {
        super::element::emit_bin(&mut self.b, op, t, x, y)
    }

    /// Sixteen `u8` lanes zero-extended to four `I32X4` registers, in lane order.
    fn widen_u8_to_i32(&mut self, x: Value) -> Vec<Value> {
        let lo = self.b.ins().uwiden_low(x);
        let hi = self.b.ins().uwiden_high(x);
        let mut out = Vec::with_capacity(4);
        for h in [lo, hi] {
            out.push(self.b.ins().uwiden_low(h));
            out.push(self.b.ins().uwiden_high(h));
        }
        out
    }

    /// Vector constants holding `bits` (one entry per lane) as elements of `t`.
    fn vconsts(&mut self, t: ElemType, bits: &[u64]) -> Vec<Value> {
        let size = t.size();
        let per = 16 / size;
        bits.chunks(per)
            .map(|chunk| {
                let mut bytes = Vec::with_capacity(16);
                for &b in chunk {
                    bytes.extend_from_slice(&b.to_le_bytes()[..size]);
                }
                let c = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
                self.b.ins().vconst(vty(t), c)
            })
            .collect()
    }

    /// The scalar code for each lane, gathered into vectors.
    fn gather(&mut self, lanes: &[Elem<'_>], e: &Expr) -> (Vec<Value>, ElemType) {
        let vals: Vec<(Value, ElemType)> = lanes.iter().map(|el| self.expr(el, e)).collect();
        let t = vals[0].1;
        let per = 16 / t.size();
        let regs = vals
            .chunks(per)
            .map(|chunk| {
                let mut v = self.b.ins().splat(vty(t), chunk[0].0);
                for (j, &(x, _)) in chunk.iter().enumerate().skip(1) {
                    v = self.b.ins().insertlane(v, x, j as u8);
                }
                v
            })
            .collect();
        (regs, t)
    }

    /// Load lanes of `t` at `addr + offs[lane]` (bytes) with 16-byte loads inside the span
    /// of the lanes, rearranged by shuffles; `None` when the span is shorter than a vector or
    /// needs too many loads (the caller gathers lane by lane).
    fn vload(
        &mut self,
        addr: Value,
        offs: &[i64],
        t: ElemType,
        readonly: bool,
    ) -> Option<Vec<Value>> {
        let size = t.size() as i64;
        let min = *offs.iter().min()?;
        let end = offs.iter().max()?.checked_add(size)?;
        if end.checked_sub(min)? < 16 {
            return None;
        }
        let mut pos = Vec::new();
        let mut p = min;
        while p + 16 < end {
            pos.push(p);
            p += 16;
        }
        pos.push(end - 16);
        if pos.len() > MAX_LOADS {
            return None;
        }
        let mut flags = MemFlagsData::new().with_notrap();
        if readonly {
            flags = flags.with_readonly().with_can_move();
        }
        let per = 16 / t.size();
        let mut raw: Vec<Option<Value>> = vec![None; pos.len()];
        let mut regs = Vec::with_capacity(t.size());
        for r in 0..t.size() {
            // For each byte of the register: which load holds it, and where.
            let src: Vec<(usize, u8)> = (0..16)
                .map(|j| {
                    let lane = r * per + j / t.size();
                    let b = offs[lane] + (j % t.size()) as i64;
                    let q = pos
                        .iter()
                        .position(|&p| p <= b && b < p + 16)
                        .expect("the loads cover the span");
                    (q, (b - pos[q]) as u8)
                })
                .collect();
            if src
                .iter()
                .enumerate()
                .all(|(j, &(q, i))| q == src[0].0 && i as usize == j)
            {
                let (a, o) = self.split_offset(addr, pos[src[0].0]);
                regs.push(self.b.ins().load(vty(t), flags, a, o));
                continue;
            }
            let mut order: Vec<usize> = Vec::new();
            for &(q, _) in &src {
                if !order.contains(&q) {
                    order.push(q);
                }
            }
            let mut load = |g: &mut Self, q: usize| -> Value {
                *raw[q].get_or_insert_with(|| {
                    let (a, o) = g.split_offset(addr, pos[q]);
                    g.b.ins().load(types::I8X16, flags, a, o)
                })
            };
            let l0 = load(self, order[0]);
            let l1 = match order.get(1) {
                Some(&q) => load(self, q),
                None => l0,
            };
            let mask: Vec<u8> = src
                .iter()
                .map(|&(q, i)| {
                    if q == order[0] {
                        i
                    } else if Some(&q) == order.get(1) {
                        16 + i
                    } else {
                        0
                    }
                })
                .collect();
            let mut acc = self.shuffle(l0, l1, &mask);
            for &q in order.iter().skip(2) {
                let lq = load(self, q);
                let mask: Vec<u8> = src
                    .iter()
                    .enumerate()
                    .map(|(j, &(sq, i))| if sq == q { 16 + i } else { j as u8 })
                    .collect();
                acc = self.shuffle(acc, lq, &mask);
            }
            if t != ElemType::U8 {
                acc = self.b.ins().bitcast(vty(t), vflags(), acc);
            }
            regs.push(acc);
        }
        Some(regs)
    }

    fn shuffle(&mut self, a: Value, b: Value, mask: &[u8]) -> Value {
        let imm = self.b.func.dfg.immediates.push(ConstantData::from(mask));
        self.b.ins().shuffle(a, b, imm)
    }
}
