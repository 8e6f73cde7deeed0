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
//!
//! The layers, bottom up: `element.rs` (the generator's state and the scalar lowering of
//! one element), `simd.rs` (the vector lowering of a group of lanes, falling back to
//! `element.rs` per lane), and this file (the stage function, its native calls and the
//! loop nests that run either).

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Instant;

use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    AbiParam, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Value, types,
};
use cranelift_codegen::ir::{Block, UserFuncName};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};

use crate::compiled::{Compiled, JitBuffer};
use crate::error::{Error, Result};
use crate::ir::{Cond, Expr, Index};
use crate::op::Lowered;
use crate::plan::{Plan, Segment};

mod affine;
mod affine16;
mod element;
mod simd;
use element::{CV, Elem, FusedSeg, Gen, IV};
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

fn cg(e: impl std::fmt::Display) -> Error {
    Error::Codegen(e.to_string())
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

impl Gen<'_, '_> {
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
}
