//! The code generator: one Cranelift function per pipeline stage.
//!
//! The stage function has the C signature
//! `fn(n: u64, ids: *const u64, rand: *const i64, bufs: *const BufDesc, err: *mut u64) -> i32`
//! and loops over the `n` samples of a chunk. For each sample it calls native kernels
//! (imported symbols registered with the `JITBuilder`) and evaluates each fused segment as
//! one loop nest over the segment's output shape, with shapes, strides, tables and
//! parameters as constants: the innermost axis (and tiny outer axes, such as channels) are
//! unrolled so that coordinates, table rows and address offsets are compile-time constants;
//! per-sample uniform conditions (a flip decision) are hoisted out of the nest by emitting
//! one version of the nest per outcome; the remaining selects are branch-free.
//!
//! Memory-safety invariant (why the generated code cannot read or write out of bounds):
//! every load coordinate and table index is clamped into its shape (statically, when range
//! analysis proves it already is), every store goes to coordinates of the loop nest over
//! the output shape, and [`crate::exec`] checks every buffer against the plan's sizes before
//! calling the function. Vector code (`simd`) keeps this: its loads cover only bytes between
//! two lane addresses the scalar code would read, its stores only elements of one output
//! row, and its coefficient tables are indexed by rows proven in range.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::immediates::{Ieee32, Ieee64};
use cranelift_codegen::ir::{
    AbiParam, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Type, Value, types,
};
use cranelift_codegen::ir::{Block, UserFuncName};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};

use crate::error::{Error, Result};
use crate::ir::{BinOp, CmpOp, Cond, Expr, Index};
use crate::op::Lowered;
use crate::plan::{Plan, Segment};
use crate::state::ElemType;

mod affine;
mod affine16;
mod simd;
pub use simd::{set_vector_code, vector_code};

/// Most uniform conditions hoisted per fused segment (2^N versions of the nest).
const MAX_VERSIONED_CONDS: usize = 2;
/// Budget of unrolled (elements × expression nodes) per nest body.
const UNROLL_BUDGET: usize = 16 * 1024;
/// Most elements in a nest body when loops remain: beyond this, code size (and compile
/// time, which `recompile` pays every epoch) grows faster than the loop overhead shrinks.
/// Measured on the benchmark pipeline: unrolling 3 channels × 32 columns instead of 32
/// columns ran 13% faster but compiled twice as slowly (1.7 ms against 0.8 ms).
const MAX_UNROLLED_ELEMS: usize = 64;
/// The same limit for the small outer axes of a vector nest (whose body is groups of 16).
const VECTOR_UNROLLED_ELEMS: usize = 256;

/// Where the stage finds buffer `i` of sample `pos`: `base + pos * stride`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct BufDesc {
    pub base: *mut u8,
    pub stride: u64,
}

/// A buffer of the stage, in the order of the `bufs` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JitBuffer {
    /// The caller's input batch (stride = input bytes).
    Input,
    /// The caller's output batch (stride = output bytes).
    Output,
    /// Per-worker space of this many bytes, reused for every sample (stride 0).
    Scratch(usize),
}

/// A compiled stage: the JIT module that owns the code, and what the code points into.
pub(crate) struct Compiled {
    pub module: Option<JITModule>,
    pub func: *const u8,
    pub buffers: Vec<JitBuffer>,
    pub compile_time: Duration,
    /// Tables the code reads through embedded addresses; kept alive with the code.
    _tables: Vec<Box<[u8]>>,
}

fn cg(e: impl std::fmt::Display) -> Error {
    Error::Codegen(e.to_string())
}

fn clif(t: ElemType) -> Type {
    match t {
        ElemType::U8 => types::I8,
        ElemType::I32 => types::I32,
        ElemType::I64 => types::I64,
        // Binary16 lives in registers as its bits; arithmetic goes through f64.
        ElemType::F16 => types::I16,
        ElemType::F32 => types::F32,
        ElemType::F64 => types::F64,
    }
}

fn table_bytes(t: ElemType, bits: &[u64]) -> Box<[u8]> {
    let mut v = Vec::with_capacity(bits.len() * t.size());
    for &b in bits {
        v.extend_from_slice(&b.to_ne_bytes()[..t.size()]);
    }
    v.into_boxed_slice()
}

/// Compile the plan into one stage function.
pub(crate) fn compile(plan: &Plan) -> Result<Compiled> {
    let t0 = Instant::now();
    let mut jb = JITBuilder::with_isa(host_isa()?, default_libcall_names());
    for (si, step) in plan.steps().iter().enumerate() {
        if let Lowered::Native(k) = &step.lowered {
            jb.symbol(format!("pjit_kernel_{si}"), k.kernel as *const u8);
        }
    }
    let mut module = JITModule::new(jb);
    match build(plan, &mut module) {
        Ok((func, buffers, tables)) => {
            let compile_time = t0.elapsed();
            tracing::debug!(
                ?compile_time,
                segments = plan.segments().len(),
                "compiled pipeline stage"
            );
            Ok(Compiled {
                module: Some(module),
                func,
                buffers,
                compile_time,
                _tables: tables,
            })
        }
        Err(e) => {
            crate::call::free_module(module);
            Err(e)
        }
    }
}

/// The host ISA, detected once per process: building it (CPU feature detection, flag
/// parsing) is a noticeable part of a small pipeline's compile time, and it never changes.
fn host_isa() -> Result<OwnedTargetIsa> {
    static ISA: OnceLock<std::result::Result<OwnedTargetIsa, String>> = OnceLock::new();
    ISA.get_or_init(|| {
        let mut flags = settings::builder();
        let verify = if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        };
        // JIT code is placed anywhere in memory: no colocated libcalls, no PIC (as
        // `JITBuilder::with_flags` sets them).
        for (k, v) in [
            ("opt_level", "speed"),
            ("enable_verifier", verify),
            ("use_colocated_libcalls", "false"),
            ("is_pic", "false"),
        ] {
            flags.set(k, v).map_err(|e| e.to_string())?;
        }
        let isa = cranelift_native::builder()?;
        isa.finish(settings::Flags::new(flags))
            .map_err(|e| e.to_string())
    })
    .clone()
    .map_err(Error::Codegen)
}

type Built = (*const u8, Vec<JitBuffer>, Vec<Box<[u8]>>);

fn build(plan: &Plan, module: &mut JITModule) -> Result<Built> {
    let for_i32 = |bytes: usize| bytes < i32::MAX as usize / 2;
    if !plan
        .steps()
        .iter()
        .all(|s| for_i32(s.input.bytes().unwrap_or(usize::MAX)) && for_i32(plan.output_bytes()))
    {
        return Err(Error::Codegen(
            "a sample of 1 GiB or more is beyond the JIT; use the interpreter".into(),
        ));
    }
    let ptr = module.target_config().pointer_type();
    let mut kernel_sig = module.make_signature();
    kernel_sig.params.push(AbiParam::new(ptr));
    kernel_sig.returns.push(AbiParam::new(types::I32));
    let mut kernels = HashMap::new();
    for (si, step) in plan.steps().iter().enumerate() {
        if let Lowered::Native(_) = &step.lowered {
            let id = module
                .declare_function(&format!("pjit_kernel_{si}"), Linkage::Import, &kernel_sig)
                .map_err(cg)?;
            kernels.insert(si, id);
        }
    }

    // Buffers: input, output, then one scratch per non-final segment and per kernel scratch.
    let mut buffers = vec![JitBuffer::Input, JitBuffer::Output];
    let segs = plan.segments();
    let mut seg_out = Vec::new();
    let mut kernel_scratch = HashMap::new();
    for (i, s) in segs.iter().enumerate() {
        let last_step = match s {
            Segment::Native(si) => *si,
            Segment::Fused { steps, .. } => steps.end - 1,
        };
        if i + 1 == segs.len() {
            seg_out.push(1);
        } else {
            let bytes = plan.steps()[last_step].lowered.output().bytes()?;
            seg_out.push(buffers.len());
            buffers.push(JitBuffer::Scratch(bytes));
        }
        if let Segment::Native(si) = s
            && let Lowered::Native(k) = &plan.steps()[*si].lowered
            && k.scratch_bytes > 0
        {
            kernel_scratch.insert(*si, buffers.len());
            buffers.push(JitBuffer::Scratch(k.scratch_bytes));
        }
    }

    let mut sig = module.make_signature();
    for _ in 0..5 {
        sig.params.push(AbiParam::new(types::I64));
    }
    sig.returns.push(AbiParam::new(types::I32));
    let fid = module
        .declare_function("pjit_stage", Linkage::Local, &sig)
        .map_err(cg)?;
    let mut ctx = module.make_context();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, fid.as_u32());
    let mut fctx = FunctionBuilderContext::new();
    let mut tables = Vec::new();
    let frontend = module.target_config();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let kernel_refs: HashMap<usize, _> = kernels
            .iter()
            .map(|(&si, &id)| (si, module.declare_func_in_func(id, b.func)))
            .collect();
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let (n, ids, rand, bufs, err) = (p[0], p[1], p[2], p[3], p[4]);
        let flags = MemFlagsData::new().with_notrap();
        let mut descs = Vec::new();
        for i in 0..buffers.len() {
            let base = b.ins().load(types::I64, flags, bufs, (i * 16) as i32);
            let stride = b.ins().load(types::I64, flags, bufs, (i * 16 + 8) as i32);
            descs.push((base, stride));
        }
        let head = b.create_block();
        let pos0 = b.block_params(head).len();
        debug_assert_eq!(pos0, 0);
        b.append_block_param(head, types::I64);
        let body = b.create_block();
        let done = b.create_block();
        let zero = b.ins().iconst(types::I64, 0);
        b.ins().jump(head, &[zero.into()]);

        b.switch_to_block(head);
        let pos = b.block_params(head)[0];
        let more = b.ins().icmp(IntCC::UnsignedLessThan, pos, n);
        b.ins().brif(more, body, &[], done, &[]);

        b.switch_to_block(body);
        let id_addr = b.ins().ishl_imm_s(pos, 3);
        let id_addr = b.ins().iadd(ids, id_addr);
        let sample = b.ins().load(types::I64, flags, id_addr, 0);
        let slots = plan.rand_slots().len() as i64;
        let row = b.ins().imul_imm_s(pos, slots * 8);
        let rand_row = b.ins().iadd(rand, row);
        let ptrs: Vec<Value> = descs
            .iter()
            .map(|&(base, stride)| {
                let off = b.ins().imul(pos, stride);
                b.ins().iadd(base, off)
            })
            .collect();

        let mut g = Gen {
            memo: HashMap::new(),
            b,
            tables: &mut tables,
            table_ids: HashMap::new(),
            affine: HashMap::new(),
            shifted: HashMap::new(),
            lines16: HashMap::new(),
            ptr,
        };
        let mut input_buf = 0usize;
        for (i, s) in segs.iter().enumerate() {
            let in_ptr = ptrs[input_buf];
            let out_ptr = ptrs[seg_out[i]];
            match s {
                Segment::Native(si) => {
                    let step = &plan.steps()[*si];
                    let Lowered::Native(k) = &step.lowered else {
                        unreachable!("segment of a native step")
                    };
                    let scratch = kernel_scratch.get(si).map(|&bi| ptrs[bi]);
                    let seed =
                        g.b.ins()
                            .load(types::I64, flags, rand_row, (step.rand_offset * 8) as i32);
                    let call = NativeCall {
                        func: kernel_refs[si],
                        context: k.context_ptr() as i64,
                        sample,
                        seed,
                        input: in_ptr,
                        input_len: step.input.bytes()? as i64,
                        output: out_ptr,
                        output_len: k.output.bytes()? as i64,
                        scratch,
                        scratch_len: k.scratch_bytes as i64,
                    };
                    let ret = g.native_call(&call);
                    let fail = g.b.create_block();
                    let cont = g.b.create_block();
                    g.b.ins().brif(ret, fail, &[], cont, &[]);
                    g.switch(fail);
                    g.b.ins().store(flags, pos, err, 0);
                    let step_no = g.b.ins().iconst(types::I64, *si as i64);
                    g.b.ins().store(flags, step_no, err, 8);
                    g.b.ins().return_(&[ret]);
                    g.switch(cont);
                }
                Segment::Fused { steps, expr } => {
                    let first = &plan.steps()[steps.start];
                    let last = &plan.steps()[steps.end - 1];
                    let used = rand_used(expr);
                    let mut rand_vals = HashMap::new();
                    for k in used {
                        let v = g.b.ins().load(types::I64, flags, rand_row, (k * 8) as i32);
                        rand_vals.insert(k, v);
                    }
                    let ranges: Vec<(i64, i64)> =
                        plan.rand_slots().iter().map(|r| r.range()).collect();
                    let seg = FusedSeg {
                        expr,
                        in_ptr,
                        in_shape: &first.input.shape,
                        in_dtype: first.input.dtype,
                        in_readonly: input_buf == 0,
                        out_ptr,
                        out_shape: &last.lowered.output().shape,
                        out_dtype: last.lowered.output().dtype,
                        rand: &rand_vals,
                        rand_range: &ranges,
                    };
                    g.fused(&seg);
                }
            }
            input_buf = seg_out[i];
        }
        let next = g.b.ins().iadd_imm_s(pos, 1);
        g.b.ins().jump(head, &[next.into()]);
        g.switch(done);
        let ok = g.b.ins().iconst(types::I32, 0);
        g.b.ins().return_(&[ok]);
        g.b.seal_all_blocks();
        g.b.finalize(frontend);
    }
    module
        .define_function(fid, &mut ctx)
        .map_err(|e| cg(format!("{e:?}")))?;
    module.clear_context(&mut ctx);
    module.finalize_definitions().map_err(cg)?;
    Ok((module.get_finalized_function(fid), buffers, tables))
}

fn rand_used(e: &Expr) -> Vec<usize> {
    fn ex(e: &Expr, out: &mut Vec<usize>) {
        match e {
            Expr::Input(c) => c.iter().for_each(|i| ix(i, out)),
            Expr::Const(..) => {}
            Expr::Table(_, _, i) | Expr::FromIndex(_, i) => ix(i, out),
            Expr::Cast(_, a) => ex(a, out),
            Expr::Bin(_, a, b) => {
                ex(a, out);
                ex(b, out)
            }
            Expr::Select(c, a, b) => {
                co(c, out);
                ex(a, out);
                ex(b, out)
            }
        }
    }
    fn ix(i: &Index, out: &mut Vec<usize>) {
        match i {
            Index::Rand(k) => out.push(*k),
            Index::Coord(_) | Index::Const(_) => {}
            Index::Value(e) => ex(e, out),
            Index::Add(a, b) | Index::Sub(a, b) | Index::Mul(a, b) => {
                ix(a, out);
                ix(b, out)
            }
            Index::Select(c, a, b) => {
                co(c, out);
                ix(a, out);
                ix(b, out)
            }
            Index::Clamp(a, _, _) => ix(a, out),
        }
    }
    fn co(c: &Cond, out: &mut Vec<usize>) {
        match c {
            Cond::Const(_) => {}
            Cond::Cmp(_, a, b) => {
                ix(a, out);
                ix(b, out)
            }
            Cond::And(a, b) | Cond::Or(a, b) => {
                co(a, out);
                co(b, out)
            }
            Cond::Not(a) => co(a, out),
        }
    }
    let mut out = Vec::new();
    ex(e, &mut out);
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether a condition depends only on random parameters and constants (not on coordinates
/// or loaded values): such a condition is the same for every element of a sample.
fn uniform_cond(c: &Cond) -> bool {
    fn ix(i: &Index) -> bool {
        match i {
            Index::Rand(_) | Index::Const(_) => true,
            Index::Coord(_) | Index::Value(_) => false,
            Index::Add(a, b) | Index::Sub(a, b) | Index::Mul(a, b) => ix(a) && ix(b),
            Index::Select(c, a, b) => uniform_cond(c) && ix(a) && ix(b),
            Index::Clamp(a, _, _) => ix(a),
        }
    }
    match c {
        Cond::Const(_) => true,
        Cond::Cmp(_, a, b) => ix(a) && ix(b),
        Cond::And(a, b) | Cond::Or(a, b) => uniform_cond(a) && uniform_cond(b),
        Cond::Not(a) => uniform_cond(a),
    }
}

/// Collect the distinct non-constant uniform conditions of selects.
fn uniform_conds(e: &Expr, out: &mut Vec<Cond>) {
    fn add(c: &Cond, out: &mut Vec<Cond>) {
        if !matches!(c, Cond::Const(_)) && uniform_cond(c) && !out.contains(c) {
            out.push(c.clone());
        }
    }
    fn ix(i: &Index, out: &mut Vec<Cond>) {
        match i {
            Index::Value(e) => uniform_conds(e, out),
            Index::Add(a, b) | Index::Sub(a, b) | Index::Mul(a, b) => {
                ix(a, out);
                ix(b, out)
            }
            Index::Select(c, a, b) => {
                add(c, out);
                ix(a, out);
                ix(b, out)
            }
            Index::Clamp(a, _, _) => ix(a, out),
            Index::Rand(_) | Index::Coord(_) | Index::Const(_) => {}
        }
    }
    match e {
        Expr::Input(c) => c.iter().for_each(|i| ix(i, out)),
        Expr::Const(..) => {}
        Expr::Table(_, _, i) | Expr::FromIndex(_, i) => ix(i, out),
        Expr::Cast(_, a) => uniform_conds(a, out),
        Expr::Bin(_, a, b) => {
            uniform_conds(a, out);
            uniform_conds(b, out)
        }
        Expr::Select(c, a, b) => {
            add(c, out);
            uniform_conds(a, out);
            uniform_conds(b, out)
        }
    }
}

/// Replace every occurrence of `c` by the constant `v`.
fn specialise(e: &Expr, c: &Cond, v: bool) -> Expr {
    fn co(x: &Cond, c: &Cond, v: bool) -> Cond {
        if x == c {
            return Cond::Const(v);
        }
        match x {
            Cond::Const(_) => x.clone(),
            Cond::Cmp(op, a, b) => Cond::Cmp(*op, Box::new(ix(a, c, v)), Box::new(ix(b, c, v))),
            Cond::And(a, b) => Cond::And(Box::new(co(a, c, v)), Box::new(co(b, c, v))),
            Cond::Or(a, b) => Cond::Or(Box::new(co(a, c, v)), Box::new(co(b, c, v))),
            Cond::Not(a) => Cond::Not(Box::new(co(a, c, v))),
        }
    }
    fn ix(i: &Index, c: &Cond, v: bool) -> Index {
        match i {
            Index::Value(e) => Index::Value(Box::new(specialise(e, c, v))),
            Index::Add(a, b) => Index::Add(Box::new(ix(a, c, v)), Box::new(ix(b, c, v))),
            Index::Sub(a, b) => Index::Sub(Box::new(ix(a, c, v)), Box::new(ix(b, c, v))),
            Index::Mul(a, b) => Index::Mul(Box::new(ix(a, c, v)), Box::new(ix(b, c, v))),
            Index::Select(x, a, b) => Index::Select(
                Box::new(co(x, c, v)),
                Box::new(ix(a, c, v)),
                Box::new(ix(b, c, v)),
            ),
            Index::Clamp(a, lo, hi) => Index::Clamp(Box::new(ix(a, c, v)), *lo, *hi),
            Index::Rand(_) | Index::Coord(_) | Index::Const(_) => i.clone(),
        }
    }
    match e {
        Expr::Input(cs) => Expr::Input(cs.iter().map(|i| ix(i, c, v)).collect()),
        Expr::Const(..) => e.clone(),
        Expr::Table(t, tb, i) => Expr::Table(*t, tb.clone(), Box::new(ix(i, c, v))),
        Expr::FromIndex(t, i) => Expr::FromIndex(*t, Box::new(ix(i, c, v))),
        Expr::Cast(t, a) => Expr::Cast(*t, Box::new(specialise(a, c, v))),
        Expr::Bin(op, a, b) => Expr::Bin(
            *op,
            Box::new(specialise(a, c, v)),
            Box::new(specialise(b, c, v)),
        ),
        Expr::Select(x, a, b) => Expr::Select(
            Box::new(co(x, c, v)),
            Box::new(specialise(a, c, v)),
            Box::new(specialise(b, c, v)),
        ),
    }
}

struct NativeCall {
    func: cranelift_codegen::ir::FuncRef,
    context: i64,
    sample: Value,
    seed: Value,
    input: Value,
    input_len: i64,
    output: Value,
    output_len: i64,
    scratch: Option<Value>,
    scratch_len: i64,
}

struct FusedSeg<'s> {
    expr: &'s Expr,
    in_ptr: Value,
    in_shape: &'s [usize],
    in_dtype: ElemType,
    in_readonly: bool,
    out_ptr: Value,
    out_shape: &'s [usize],
    out_dtype: ElemType,
    rand: &'s HashMap<usize, Value>,
    rand_range: &'s [(i64, i64)],
}

/// An index value during emission: a constant, or a runtime value plus a constant offset
/// (kept apart so that offsets end up in load/store immediates).
#[derive(Clone, Copy)]
enum IV {
    C(i64),
    V(Value, i64),
}

/// What a vector nest body does along the innermost axis.
#[derive(Clone, Copy)]
enum Inner {
    /// The axis is unrolled: vector groups at constant positions, then the scalar tail.
    Unrolled,
    /// One vector group at the loop coordinate (the value); the constant is the last
    /// group's start (for range analysis).
    Var(Value, i64),
    /// Scalar elements at these constant positions (after the group loop).
    Tail(usize, usize),
}

/// A condition during emission.
#[derive(Clone, Copy)]
enum CV {
    C(bool),
    V(Value),
}

/// Per-element emission context.
struct Elem<'s> {
    seg: &'s FusedSeg<'s>,
    coords: Vec<IV>,
    coord_range: Vec<(i64, i64)>,
}

impl<'s> Elem<'s> {
    /// An element of `seg`'s output at `coords`: an unrolled axis has a known coordinate
    /// (range `0..=0` until the caller sets it), a looped axis spans the output's extent.
    fn over(seg: &'s FusedSeg<'s>, coords: &[IV], unrolled: &[bool]) -> Elem<'s> {
        let coord_range = (0..seg.out_shape.len())
            .map(|a| {
                if unrolled[a] {
                    (0, 0)
                } else {
                    (0, seg.out_shape[a] as i64 - 1)
                }
            })
            .collect();
        Elem {
            seg,
            coords: coords.to_vec(),
            coord_range,
        }
    }
}

struct Gen<'a, 't> {
    b: FunctionBuilder<'a>,
    /// Emission-time value numbering within the current nest body (one basic block), so
    /// that address arithmetic shared by the unrolled elements is emitted once: smaller
    /// functions compile faster.
    memo: HashMap<(u8, Value, i64), Value>,
    tables: &'t mut Vec<Box<[u8]>>,
    table_ids: HashMap<(usize, ElemType), usize>,
    /// Per `u8`-indexed `f32` table (by address): its exact arithmetic form, if it has
    /// one, and the address of its coefficients (`[a_hi, b_hi, a_lo, b_lo]` per row).
    affine: HashMap<usize, Option<(Vec<affine::Affine>, i64)>>,
    /// The same in the shifted form ([`affine::Shifted`]; `[c, a_hi, a_lo, e]` per row),
    /// used on hosts with FMA.
    shifted: HashMap<usize, Option<(Vec<affine::Shifted>, i64)>>,
    /// The same for `u8`-indexed binary16 tables ([`affine16`]; `[c, a, e]` per row).
    lines16: HashMap<usize, Option<(Vec<affine16::Line16>, i64)>>,
    ptr: Type,
}

type Range = Option<(i64, i64)>;

impl Gen<'_, '_> {
    /// `addr + off` as an address and an immediate offset. The runtime part and the
    /// constant part of an index are only in bounds together (modulo 2^64), so an offset
    /// that does not fit the immediate is added to the address instead of truncated.
    fn split_offset(&mut self, addr: Value, off: i64) -> (Value, i32) {
        match i32::try_from(off) {
            Ok(o) => (addr, o),
            Err(_) => (self.iadd_c(addr, off), 0),
        }
    }

    /// Continue emitting in `block`; memoised values of other blocks may not dominate it.
    fn switch(&mut self, block: Block) {
        self.memo.clear();
        self.b.switch_to_block(block);
    }

    fn imul_c(&mut self, v: Value, c: i64) -> Value {
        if c == 1 {
            return v;
        }
        if let Some(&r) = self.memo.get(&(0, v, c)) {
            return r;
        }
        let r = self.b.ins().imul_imm_s(v, c);
        self.memo.insert((0, v, c), r);
        r
    }

    fn iadd_c(&mut self, v: Value, c: i64) -> Value {
        if c == 0 {
            return v;
        }
        if let Some(&r) = self.memo.get(&(1, v, c)) {
            return r;
        }
        let r = self.b.ins().iadd_imm_s(v, c);
        self.memo.insert((1, v, c), r);
        r
    }

    fn iadd2(&mut self, a: Value, b: Value) -> Value {
        let key = (2, a, b.as_u32() as i64);
        if let Some(&r) = self.memo.get(&key) {
            return r;
        }
        let r = self.b.ins().iadd(a, b);
        self.memo.insert(key, r);
        r
    }

    fn ineg(&mut self, v: Value) -> Value {
        if let Some(&r) = self.memo.get(&(5, v, 0)) {
            return r;
        }
        let r = self.b.ins().ineg(v);
        self.memo.insert((5, v, 0), r);
        r
    }

    fn isub2(&mut self, a: Value, b: Value) -> Value {
        let key = (6, a, b.as_u32() as i64);
        if let Some(&r) = self.memo.get(&key) {
            return r;
        }
        let r = self.b.ins().isub(a, b);
        self.memo.insert(key, r);
        r
    }

    fn extend64(&mut self, v: Value, t: ElemType) -> Value {
        let op = match t {
            ElemType::U8 => 3,
            ElemType::I32 => 4,
            _ => return v,
        };
        if let Some(&r) = self.memo.get(&(op, v, 0)) {
            return r;
        }
        let r = if op == 3 {
            self.b.ins().uextend(types::I64, v)
        } else {
            self.b.ins().sextend(types::I64, v)
        };
        self.memo.insert((op, v, 0), r);
        r
    }

    fn native_call(&mut self, c: &NativeCall) -> Value {
        let slot =
            self.b
                .create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 72, 3));
        let konst = |g: &mut Self, v: i64| g.b.ins().iconst(types::I64, v);
        let zero = konst(self, 0);
        let fields = [
            konst(self, c.context),
            c.sample,
            c.seed,
            c.input,
            konst(self, c.input_len),
            c.output,
            konst(self, c.output_len),
            c.scratch.unwrap_or(zero),
            konst(self, c.scratch_len),
        ];
        for (i, v) in fields.into_iter().enumerate() {
            self.b.ins().stack_store(self.ptr, v, slot, (i * 8) as i32);
        }
        let addr = self.b.ins().stack_addr(self.ptr, slot, 0);
        let call = self.b.ins().call(c.func, &[addr]);
        self.b.inst_results(call)[0]
    }

    fn fused(&mut self, seg: &FusedSeg<'_>) {
        let mut conds = Vec::new();
        uniform_conds(seg.expr, &mut conds);
        conds.truncate(MAX_VERSIONED_CONDS);
        let join = self.b.create_block();
        self.versions(seg, seg.expr.clone(), &conds, join);
        self.switch(join);
    }

    /// Emit one nest per outcome of the hoisted conditions, branching on them once per sample.
    fn versions(&mut self, seg: &FusedSeg<'_>, expr: Expr, conds: &[Cond], join: Block) {
        let Some((c, rest)) = conds.split_first() else {
            let s = FusedSeg {
                expr: &expr,
                ..*seg
            };
            self.nest(&s);
            self.b.ins().jump(join, &[]);
            return;
        };
        let el = Elem {
            seg,
            coords: vec![],
            coord_range: vec![],
        };
        match self.cond(&el, c) {
            CV::C(v) => self.versions(seg, specialise(&expr, c, v), rest, join),
            CV::V(v) => {
                let (yes, no) = (self.b.create_block(), self.b.create_block());
                self.b.ins().brif(v, yes, &[], no, &[]);
                self.switch(yes);
                self.versions(seg, specialise(&expr, c, true), rest, join);
                self.switch(no);
                self.versions(seg, specialise(&expr, c, false), rest, join);
            }
        }
    }

    fn nest(&mut self, seg: &FusedSeg<'_>) {
        let shape = seg.out_shape;
        let rank = shape.len();
        let total: usize = shape.iter().product();
        if total == 0 {
            return;
        }
        let size = seg.expr.size().max(1);
        // Vector groups along the innermost axis. Binary16 lanes are vector loads, stores
        // and shuffles, and a normalize table becomes arithmetic (`affine16`); its other
        // conversions and arithmetic are the scalar sequences of `half.rs`, gathered.
        let vector = simd::vector_code() && rank > 0 && shape[rank - 1] >= simd::LANES;
        // A vector group is emitted once for 16 elements, so small outer axes (channels)
        // can be unrolled over more elements: their table rows become constants and the
        // channels of one pixel share its loads.
        let outer_limit = if vector {
            VECTOR_UNROLLED_ELEMS
        } else {
            MAX_UNROLLED_ELEMS
        };
        let mut unrolled = vec![false; rank];
        if total <= 4 * MAX_UNROLLED_ELEMS && total * size <= UNROLL_BUDGET {
            unrolled.iter_mut().for_each(|u| *u = true);
        } else if rank > 0 {
            let mut prod = 1;
            if shape[rank - 1] <= MAX_UNROLLED_ELEMS && shape[rank - 1] * size <= UNROLL_BUDGET {
                unrolled[rank - 1] = true;
                prod = shape[rank - 1];
            }
            for ax in (0..rank.saturating_sub(1)).rev() {
                if shape[ax] <= 4
                    && prod * shape[ax] <= outer_limit
                    && prod * shape[ax] * size <= UNROLL_BUDGET
                {
                    unrolled[ax] = true;
                    prod *= shape[ax];
                }
            }
        }
        let mut strides = vec![1i64; rank];
        for ax in (0..rank.saturating_sub(1)).rev() {
            strides[ax] = strides[ax + 1] * shape[ax + 1] as i64;
        }
        let loops: Vec<usize> = (0..rank).filter(|&a| !unrolled[a]).collect();
        let mut coords = vec![IV::C(0); rank];
        self.loops(seg, &loops, &unrolled, &strides, &mut coords, vector);
    }

    fn loops(
        &mut self,
        seg: &FusedSeg<'_>,
        loops: &[usize],
        unrolled: &[bool],
        strides: &[i64],
        coords: &mut Vec<IV>,
        vector: bool,
    ) {
        let Some((&ax, rest)) = loops.split_first() else {
            if vector {
                self.vbody(seg, unrolled, strides, coords, Inner::Unrolled);
            } else {
                self.body(seg, unrolled, strides, coords);
            }
            return;
        };
        if vector && ax + 1 == seg.out_shape.len() {
            self.block_loop(seg, unrolled, strides, coords);
            return;
        }
        let head = self.b.create_block();
        let i = self.b.append_block_param(head, types::I64);
        let body = self.b.create_block();
        let exit = self.b.create_block();
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.ins().jump(head, &[zero.into()]);
        self.switch(head);
        let more = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThan, i, seg.out_shape[ax] as i64);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.switch(body);
        coords[ax] = IV::V(i, 0);
        self.loops(seg, rest, unrolled, strides, coords, vector);
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.ins().jump(head, &[next.into()]);
        self.switch(exit);
    }

    /// The innermost axis as a loop over vector groups of [`simd::LANES`] elements, then
    /// the remaining elements one by one.
    fn block_loop(
        &mut self,
        seg: &FusedSeg<'_>,
        unrolled: &[bool],
        strides: &[i64],
        coords: &mut [IV],
    ) {
        let ax = seg.out_shape.len() - 1;
        let n = seg.out_shape[ax];
        let lanes = simd::LANES as i64;
        let groups = (n / simd::LANES) as i64;
        let head = self.b.create_block();
        let i = self.b.append_block_param(head, types::I64);
        let body = self.b.create_block();
        let exit = self.b.create_block();
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.ins().jump(head, &[zero.into()]);
        self.switch(head);
        let more = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThan, i, groups * lanes);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.switch(body);
        coords[ax] = IV::V(i, 0);
        let last_start = (groups - 1) * lanes;
        self.vbody(seg, unrolled, strides, coords, Inner::Var(i, last_start));
        let next = self.b.ins().iadd_imm_s(i, lanes);
        self.b.ins().jump(head, &[next.into()]);
        self.switch(exit);
        coords[ax] = IV::C(0);
        if (groups as usize) * simd::LANES < n {
            let tail = Inner::Tail(groups as usize * simd::LANES, n);
            self.vbody(seg, unrolled, strides, coords, tail);
        }
    }

    /// Runtime part of the output address (loop coordinates) of a nest body.
    fn out_base(&mut self, seg: &FusedSeg<'_>, strides: &[i64], coords: &[IV]) -> Value {
        let mut rt: Option<Value> = None;
        for (ax, c) in coords.iter().enumerate() {
            if let IV::V(v, _) = *c {
                let t = self
                    .b
                    .ins()
                    .imul_imm_s(v, strides[ax] * seg.out_dtype.size() as i64);
                rt = Some(match rt {
                    Some(r) => self.b.ins().iadd(r, t),
                    None => t,
                });
            }
        }
        match rt {
            Some(r) => self.b.ins().iadd(seg.out_ptr, r),
            None => seg.out_ptr,
        }
    }

    /// A nest body with vector groups along the innermost axis: the unrolled outer axes
    /// enumerated, and for each, the innermost elements as `inner` says.
    fn vbody(
        &mut self,
        seg: &FusedSeg<'_>,
        unrolled: &[bool],
        strides: &[i64],
        coords: &[IV],
        inner: Inner,
    ) {
        let shape = seg.out_shape;
        let rank = shape.len();
        let last = rank - 1;
        let size = seg.out_dtype.size() as i64;
        let base = self.out_base(seg, strides, coords);
        let outer: Vec<usize> = (0..last).filter(|&a| unrolled[a]).collect();
        let count: usize = outer.iter().map(|&a| shape[a]).product();
        let mut el = Elem::over(seg, coords, unrolled);
        let flags = MemFlagsData::new().with_notrap();
        for k in 0..count {
            let mut rem = k;
            let mut konst = 0i64;
            for &a in outer.iter().rev() {
                let c = (rem % shape[a]) as i64;
                rem /= shape[a];
                el.coords[a] = IV::C(c);
                el.coord_range[a] = (c, c);
                konst += c * strides[a];
            }
            let (groups, scalars) = match inner {
                Inner::Unrolled => {
                    let g = shape[last] / simd::LANES;
                    (g, g * simd::LANES..shape[last])
                }
                Inner::Var(..) => (1, 0..0),
                Inner::Tail(a, b) => (0, a..b),
            };
            for g in 0..groups {
                let start = (g * simd::LANES) as i64;
                let lanes: Vec<Elem<'_>> = (0..simd::LANES as i64)
                    .map(|l| {
                        let mut e = Elem {
                            seg,
                            coords: el.coords.clone(),
                            coord_range: el.coord_range.clone(),
                        };
                        match inner {
                            Inner::Var(i, last_start) => {
                                e.coords[last] = IV::V(i, l);
                                e.coord_range[last] = (l, last_start + l);
                            }
                            _ => {
                                e.coords[last] = IV::C(start + l);
                                e.coord_range[last] = (start + l, start + l);
                            }
                        }
                        e
                    })
                    .collect();
                let (regs, _) = self.vexpr(&lanes, seg.expr);
                let off = if matches!(inner, Inner::Var(..)) {
                    konst * size
                } else {
                    (konst + start) * size
                };
                for (r, v) in regs.into_iter().enumerate() {
                    self.b
                        .ins()
                        .store(flags, v, base, (off + 16 * r as i64) as i32);
                }
            }
            for t in scalars {
                let t = t as i64;
                el.coords[last] = IV::C(t);
                el.coord_range[last] = (t, t);
                let (v, _) = self.expr(&el, seg.expr);
                self.b
                    .ins()
                    .store(flags, v, base, ((konst + t) * size) as i32);
            }
        }
    }

    /// The unrolled elements of one innermost loop iteration.
    fn body(&mut self, seg: &FusedSeg<'_>, unrolled: &[bool], strides: &[i64], coords: &[IV]) {
        let shape = seg.out_shape;
        let rank = shape.len();
        // Runtime part of the output offset (loop coordinates).
        let mut rt: Option<Value> = None;
        for ax in 0..rank {
            if let IV::V(v, _) = coords[ax] {
                let t = self
                    .b
                    .ins()
                    .imul_imm_s(v, strides[ax] * seg.out_dtype.size() as i64);
                rt = Some(match rt {
                    Some(r) => self.b.ins().iadd(r, t),
                    None => t,
                });
            }
        }
        let base = match rt {
            Some(r) => self.b.ins().iadd(seg.out_ptr, r),
            None => seg.out_ptr,
        };
        let un_axes: Vec<usize> = (0..rank).filter(|&a| unrolled[a]).collect();
        let count: usize = un_axes.iter().map(|&a| shape[a]).product();
        let mut el = Elem::over(seg, coords, unrolled);
        for k in 0..count {
            // Row-major enumeration of the unrolled axes.
            let mut rem = k;
            let mut konst = 0i64;
            for &a in un_axes.iter().rev() {
                let c = (rem % shape[a]) as i64;
                rem /= shape[a];
                el.coords[a] = IV::C(c);
                el.coord_range[a] = (c, c);
                konst += c * strides[a];
            }
            let (v, _) = self.expr(&el, seg.expr);
            let off = konst * seg.out_dtype.size() as i64;
            self.b
                .ins()
                .store(MemFlagsData::new().with_notrap(), v, base, off as i32);
        }
    }

    /// The address of an input element as a runtime address and a constant byte offset
    /// (kept apart so that lanes of one vector group, which share the runtime part, can be
    /// compared by their offsets).
    fn input_addr(&mut self, el: &Elem<'_>, cs: &[Index]) -> (Value, i64) {
        let seg = el.seg;
        let size = seg.in_dtype.size() as i64;
        let mut konst = 0i64;
        let mut rt: Option<Value> = None;
        let mut stride = 1i64;
        for (c, &d) in cs.iter().zip(seg.in_shape).rev() {
            match self.clamped(el, c, 0, d as i64 - 1) {
                IV::C(x) => konst = konst.wrapping_add(x.wrapping_mul(stride)),
                IV::V(v, k) => {
                    konst = konst.wrapping_add(k.wrapping_mul(stride));
                    let t = self.imul_c(v, stride * size);
                    rt = Some(match rt {
                        Some(r) => self.iadd2(r, t),
                        None => t,
                    });
                }
            }
            stride *= d as i64;
        }
        let addr = match rt {
            Some(r) => self.iadd2(seg.in_ptr, r),
            None => seg.in_ptr,
        };
        (addr, konst.wrapping_mul(size))
    }

    fn konst(&mut self, t: ElemType, bits: u64) -> Value {
        match t {
            ElemType::U8 => self.b.ins().iconst(types::I8, (bits & 0xff) as i64),
            ElemType::I32 => self.b.ins().iconst(types::I32, i64::from(bits as u32)),
            ElemType::I64 => self.b.ins().iconst(types::I64, bits as i64),
            ElemType::F16 => self.b.ins().iconst(types::I16, (bits & 0xffff) as i64),
            ElemType::F32 => self.b.ins().f32const(Ieee32::with_bits(bits as u32)),
            ElemType::F64 => self.b.ins().f64const(Ieee64::with_bits(bits)),
        }
    }

    fn mat(&mut self, iv: IV) -> Value {
        match iv {
            IV::C(c) => self.b.ins().iconst(types::I64, c),
            IV::V(v, 0) => v,
            IV::V(v, k) => self.iadd_c(v, k),
        }
    }

    fn range(&self, el: &Elem<'_>, i: &Index) -> Range {
        match i {
            Index::Coord(k) => Some(el.coord_range[*k]),
            Index::Const(c) => Some((*c, *c)),
            Index::Rand(k) => Some(el.seg.rand_range[*k]),
            Index::Value(e) => match e.dtype(el.seg.in_dtype).ok()? {
                ElemType::U8 => Some((0, 255)),
                ElemType::I32 => Some((i64::from(i32::MIN), i64::from(i32::MAX))),
                _ => None,
            },
            Index::Add(a, b) => {
                let ((al, ah), (bl, bh)) = (self.range(el, a)?, self.range(el, b)?);
                Some((al.checked_add(bl)?, ah.checked_add(bh)?))
            }
            Index::Sub(a, b) => {
                let ((al, ah), (bl, bh)) = (self.range(el, a)?, self.range(el, b)?);
                Some((al.checked_sub(bh)?, ah.checked_sub(bl)?))
            }
            Index::Mul(a, b) => {
                let ((al, ah), (bl, bh)) = (self.range(el, a)?, self.range(el, b)?);
                let p = [
                    al.checked_mul(bl)?,
                    al.checked_mul(bh)?,
                    ah.checked_mul(bl)?,
                    ah.checked_mul(bh)?,
                ];
                Some((*p.iter().min()?, *p.iter().max()?))
            }
            Index::Select(c, a, b) => match **c {
                Cond::Const(true) => self.range(el, a),
                Cond::Const(false) => self.range(el, b),
                _ => {
                    let ((al, ah), (bl, bh)) = (self.range(el, a)?, self.range(el, b)?);
                    Some((al.min(bl), ah.max(bh)))
                }
            },
            Index::Clamp(a, lo, hi) => match self.range(el, a) {
                Some((l, h)) => Some((l.clamp(*lo, *hi), h.clamp(*lo, *hi))),
                None => Some((*lo, *hi)),
            },
        }
    }

    /// `i` clamped into `[lo, hi]`, statically when its range allows.
    fn clamped(&mut self, el: &Elem<'_>, i: &Index, lo: i64, hi: i64) -> IV {
        let v = self.index(el, i);
        match v {
            IV::C(c) => IV::C(c.clamp(lo, hi)),
            IV::V(..) => {
                if let Some((l, h)) = self.range(el, i)
                    && l >= lo
                    && h <= hi
                {
                    return v;
                }
                let x = self.mat(v);
                let lo_v = self.b.ins().iconst(types::I64, lo);
                let hi_v = self.b.ins().iconst(types::I64, hi);
                let x = self.b.ins().smax(x, lo_v);
                IV::V(self.b.ins().smin(x, hi_v), 0)
            }
        }
    }

    fn index(&mut self, el: &Elem<'_>, i: &Index) -> IV {
        match i {
            Index::Coord(k) => el.coords[*k],
            Index::Const(c) => IV::C(*c),
            Index::Rand(k) => IV::V(el.seg.rand[k], 0),
            Index::Value(e) => {
                let (v, t) = self.expr(el, e);
                IV::V(self.extend64(v, t), 0)
            }
            Index::Add(a, b) => match (self.index(el, a), self.index(el, b)) {
                (IV::C(x), IV::C(y)) => IV::C(x.wrapping_add(y)),
                (IV::V(v, k), IV::C(c)) | (IV::C(c), IV::V(v, k)) => IV::V(v, k.wrapping_add(c)),
                (IV::V(v, k), IV::V(w, l)) => IV::V(self.iadd2(v, w), k.wrapping_add(l)),
            },
            Index::Sub(a, b) => match (self.index(el, a), self.index(el, b)) {
                (IV::C(x), IV::C(y)) => IV::C(x.wrapping_sub(y)),
                (IV::V(v, k), IV::C(c)) => IV::V(v, k.wrapping_sub(c)),
                (IV::C(c), IV::V(w, l)) => IV::V(self.ineg(w), c.wrapping_sub(l)),
                (IV::V(v, k), IV::V(w, l)) => IV::V(self.isub2(v, w), k.wrapping_sub(l)),
            },
            Index::Mul(a, b) => match (self.index(el, a), self.index(el, b)) {
                (IV::C(x), IV::C(y)) => IV::C(x.wrapping_mul(y)),
                (IV::V(v, k), IV::C(c)) | (IV::C(c), IV::V(v, k)) => {
                    IV::V(self.imul_c(v, c), k.wrapping_mul(c))
                }
                (x, y) => {
                    let (x, y) = (self.mat(x), self.mat(y));
                    IV::V(self.b.ins().imul(x, y), 0)
                }
            },
            Index::Select(c, a, b) => match self.cond(el, c) {
                CV::C(true) => self.index(el, a),
                CV::C(false) => self.index(el, b),
                CV::V(cv) => {
                    let (x, y) = (self.index(el, a), self.index(el, b));
                    let (x, y) = (self.mat(x), self.mat(y));
                    IV::V(self.b.ins().select(cv, x, y), 0)
                }
            },
            Index::Clamp(a, lo, hi) => self.clamped(el, a, *lo, *hi),
        }
    }

    fn cond(&mut self, el: &Elem<'_>, c: &Cond) -> CV {
        match c {
            Cond::Const(b) => CV::C(*b),
            Cond::Cmp(op, a, b) => {
                let (x, y) = (self.index(el, a), self.index(el, b));
                if let (IV::C(x), IV::C(y)) = (x, y) {
                    return CV::C(match op {
                        CmpOp::Eq => x == y,
                        CmpOp::Ne => x != y,
                        CmpOp::Lt => x < y,
                        CmpOp::Le => x <= y,
                        CmpOp::Gt => x > y,
                        CmpOp::Ge => x >= y,
                    });
                }
                let cc = match op {
                    CmpOp::Eq => IntCC::Equal,
                    CmpOp::Ne => IntCC::NotEqual,
                    CmpOp::Lt => IntCC::SignedLessThan,
                    CmpOp::Le => IntCC::SignedLessThanOrEqual,
                    CmpOp::Gt => IntCC::SignedGreaterThan,
                    CmpOp::Ge => IntCC::SignedGreaterThanOrEqual,
                };
                let (x, y) = (self.mat(x), self.mat(y));
                CV::V(self.b.ins().icmp(cc, x, y))
            }
            Cond::And(a, b) => match (self.cond(el, a), self.cond(el, b)) {
                (CV::C(false), _) | (_, CV::C(false)) => CV::C(false),
                (CV::C(true), x) | (x, CV::C(true)) => x,
                (CV::V(x), CV::V(y)) => CV::V(self.b.ins().band(x, y)),
            },
            Cond::Or(a, b) => match (self.cond(el, a), self.cond(el, b)) {
                (CV::C(true), _) | (_, CV::C(true)) => CV::C(true),
                (CV::C(false), x) | (x, CV::C(false)) => x,
                (CV::V(x), CV::V(y)) => CV::V(self.b.ins().bor(x, y)),
            },
            Cond::Not(a) => match self.cond(el, a) {
                CV::C(b) => CV::C(!b),
                CV::V(x) => CV::V(self.b.ins().bxor_imm_s(x, 1)),
            },
        }
    }

    fn table(&mut self, t: ElemType, bits: &std::sync::Arc<[u64]>) -> i64 {
        let key = (bits.as_ptr() as usize, t);
        let idx = *self.table_ids.entry(key).or_insert_with(|| {
            self.tables.push(table_bytes(t, bits));
            self.tables.len() - 1
        });
        self.tables[idx].as_ptr() as i64
    }

    fn expr(&mut self, el: &Elem<'_>, e: &Expr) -> (Value, ElemType) {
        match e {
            Expr::Input(cs) => {
                let seg = el.seg;
                let (addr, off) = self.input_addr(el, cs);
                let (addr, off) = self.split_offset(addr, off);
                let mut flags = MemFlagsData::new().with_notrap();
                if seg.in_readonly {
                    flags = flags.with_readonly().with_can_move();
                }
                (
                    self.b.ins().load(clif(seg.in_dtype), flags, addr, off),
                    seg.in_dtype,
                )
            }
            Expr::Const(t, bits) => (self.konst(*t, *bits), *t),
            Expr::Table(t, bits, i) => match self.clamped(el, i, 0, bits.len() as i64 - 1) {
                IV::C(k) => (self.konst(*t, bits[k as usize]), *t),
                IV::V(v, k) => {
                    let base = self.table(*t, bits);
                    let size = t.size() as i64;
                    let off = self.imul_c(v, size);
                    let addr = self.iadd_c(off, base);
                    let (addr, off) = self.split_offset(addr, k.wrapping_mul(size));
                    let flags = MemFlagsData::new()
                        .with_notrap()
                        .with_readonly()
                        .with_can_move();
                    (self.b.ins().load(clif(*t), flags, addr, off), *t)
                }
            },
            Expr::FromIndex(t, i) => {
                let iv = self.index(el, i);
                let v = self.mat(iv);
                (self.convert(v, ElemType::I64, *t), *t)
            }
            Expr::Cast(t, a) => {
                let (v, from) = self.expr(el, a);
                (self.convert(v, from, *t), *t)
            }
            Expr::Bin(op, a, b) => {
                let (x, t) = self.expr(el, a);
                let (y, _) = self.expr(el, b);
                (self.bin(*op, t, x, y), t)
            }
            Expr::Select(c, a, b) => match self.cond(el, c) {
                CV::C(true) => self.expr(el, a),
                CV::C(false) => self.expr(el, b),
                CV::V(cv) => {
                    let (x, t) = self.expr(el, a);
                    let (y, _) = self.expr(el, b);
                    (self.b.ins().select(cv, x, y), t)
                }
            },
        }
    }

    fn bin(&mut self, op: BinOp, t: ElemType, x: Value, y: Value) -> Value {
        if t == ElemType::F16 {
            let x = crate::half::emit_to_f64(&mut self.b, x);
            let y = crate::half::emit_to_f64(&mut self.b, y);
            let r = self.bin(op, ElemType::F64, x, y);
            return crate::half::emit_from_f64(&mut self.b, r);
        }
        emit_bin(&mut self.b, op, t, x, y)
    }

    /// Rust `as` conversion.
    fn convert(&mut self, v: Value, from: ElemType, to: ElemType) -> Value {
        use ElemType::*;
        match (from, to) {
            _ if from == to => return v,
            (F16, _) => {
                let w = crate::half::emit_to_f64(&mut self.b, v);
                return self.convert(w, F64, to);
            }
            (_, F16) => {
                let w = self.convert(v, from, F64);
                return crate::half::emit_from_f64(&mut self.b, w);
            }
            _ => {}
        }
        let ins = self.b.ins();
        match (from, to) {
            (U8, I32 | I64) => ins.uextend(clif(to), v),
            (I32, I64) => ins.sextend(types::I64, v),
            (I32 | I64, U8) | (I64, I32) => ins.ireduce(clif(to), v),
            (U8, F32 | F64) => {
                let w = ins.uextend(types::I32, v);
                self.b.ins().fcvt_from_sint(clif(to), w)
            }
            (I32 | I64, F32 | F64) => ins.fcvt_from_sint(clif(to), v),
            (F32 | F64, I32 | I64) => ins.fcvt_to_sint_sat(clif(to), v),
            (F32 | F64, U8) => {
                let w = ins.fcvt_to_sint_sat(types::I32, v);
                let zero = self.b.ins().iconst(types::I32, 0);
                let max = self.b.ins().iconst(types::I32, 255);
                let w = self.b.ins().smax(w, zero);
                let w = self.b.ins().smin(w, max);
                self.b.ins().ireduce(types::I8, w)
            }
            (F32, F64) => ins.fpromote(types::F64, v),
            (F64, F32) => ins.fdemote(types::F32, v),
            _ => v,
        }
    }
}

/// One binary operation on `t` values (scalars or vectors of `t` lanes: Cranelift's
/// arithmetic is polymorphic over lane types, so the scalar and the vector lowering share
/// this). F16 is computed by the callers in f64.
fn emit_bin(b: &mut FunctionBuilder<'_>, op: BinOp, t: ElemType, x: Value, y: Value) -> Value {
    let ins = b.ins();
    if t.is_float() {
        match op {
            BinOp::Add => ins.fadd(x, y),
            BinOp::Sub => ins.fsub(x, y),
            BinOp::Mul => ins.fmul(x, y),
            BinOp::Div => ins.fdiv(x, y),
            BinOp::Min => ins.fmin(x, y),
            BinOp::Max => ins.fmax(x, y),
        }
    } else {
        match op {
            BinOp::Add => ins.iadd(x, y),
            BinOp::Sub => ins.isub(x, y),
            BinOp::Mul => ins.imul(x, y),
            // Integer division is rejected by validation (and kept out of vector code by
            // `vector_bin`); keep emission total.
            BinOp::Div => x,
            BinOp::Min if t == ElemType::U8 => ins.umin(x, y),
            BinOp::Max if t == ElemType::U8 => ins.umax(x, y),
            BinOp::Min => ins.smin(x, y),
            BinOp::Max => ins.smax(x, y),
        }
    }
}
