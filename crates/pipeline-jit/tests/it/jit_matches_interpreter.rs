//! Property: for random pipelines (shapes, dtypes, constants, chains of 1–6 expressible
//! operations with native kernels between them) the JIT's output is bit-identical to the
//! interpreter's, on one and several threads.

use crate::common;

use std::sync::Arc;

use pipeline_jit::ops::{
    Clamp, Convert, Cutout, NormalizeImage, RandomHorizontalFlip, RandomTranslate, Scale, Squeeze,
    ToChw,
};
use pipeline_jit::{
    BinOp, CmpOp, Cond, ElemType, Expr, ExprKernel, Index, KernelArgs, Lowered, NativeKernel,
    Operation, Pipeline, RandSpec, State,
};
use proptest::prelude::*;

/// A tiny deterministic generator for building random IR.
struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn small(&mut self) -> f64 {
        (self.below(2001) as f64 - 1000.0) / 8.0
    }
}

/// A user-built expressible operation: a random expression over the input, same shape,
/// cast to a random type.
struct RandomIr {
    seed: u64,
}

fn rand_index(g: &mut Gen, rank: usize, depth: u32) -> Index {
    match g.below(if depth == 0 { 3 } else { 6 }) {
        0 if rank > 0 => Index::Coord(g.below(rank as u64) as usize),
        0 | 1 => Index::Const(g.below(9) as i64 - 2),
        2 => Index::Rand(0),
        3 => rand_index(g, rank, depth - 1) + rand_index(g, rank, depth - 1),
        4 => rand_index(g, rank, depth - 1) - rand_index(g, rank, depth - 1),
        _ => Index::select(
            rand_cond(g, rank, depth - 1),
            rand_index(g, rank, depth - 1),
            rand_index(g, rank, depth - 1),
        ),
    }
}

fn rand_cond(g: &mut Gen, rank: usize, depth: u32) -> Cond {
    let ops = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ];
    let c = rand_index(g, rank, depth).cmp(ops[g.below(6) as usize], rand_index(g, rank, depth));
    match g.below(4) {
        0 if depth > 0 => c.and(rand_cond(g, rank, depth - 1)),
        1 if depth > 0 => c.or(rand_cond(g, rank, depth - 1)),
        2 => !c,
        _ => c,
    }
}

fn rand_expr(g: &mut Gen, t: ElemType, input: &State, depth: u32) -> Expr {
    let rank = input.shape.len();
    let leaf = |g: &mut Gen| -> Expr {
        match g.below(4) {
            0 => Expr::constant(t, g.small()),
            1 => Expr::table(
                t,
                &[g.small(), g.small(), g.small()],
                rand_index(g, rank, 1),
            ),
            2 => Expr::FromIndex(t, Box::new(rand_index(g, rank, 1))),
            _ => {
                let coords = (0..rank).map(|_| rand_index(g, rank, 1)).collect();
                Expr::Input(coords).cast(t)
            }
        }
    };
    if depth == 0 {
        return leaf(g);
    }
    match g.below(5) {
        0 => leaf(g),
        1 => Expr::select(
            rand_cond(g, rank, 1),
            rand_expr(g, t, input, depth - 1),
            rand_expr(g, t, input, depth - 1),
        ),
        2 => {
            let u = ElemType::ALL[g.below(ElemType::ALL.len() as u64) as usize];
            rand_expr(g, u, input, depth - 1).cast(t)
        }
        _ => {
            // No float products: sums of finite inputs stay finite, so no NaN arises whose
            // payload could legitimately differ between two correct implementations.
            let ops = if t.is_float() {
                &[BinOp::Add, BinOp::Sub, BinOp::Min, BinOp::Max][..]
            } else {
                &[BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Min, BinOp::Max][..]
            };
            let op = ops[g.below(ops.len() as u64) as usize];
            rand_expr(g, t, input, depth - 1).bin(op, rand_expr(g, t, input, depth - 1))
        }
    }
}

impl Operation for RandomIr {
    fn name(&self) -> String {
        format!("RandomIr({})", self.seed)
    }
    fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        let mut g = Gen(self.seed | 1);
        let t = ElemType::ALL[g.below(ElemType::ALL.len() as u64) as usize];
        let expr = rand_expr(&mut g, t, input, 3);
        Ok(Lowered::Expr(ExprKernel {
            output: State {
                dtype: t,
                ..input.clone()
            },
            expr,
            random: vec![RandSpec::Int { lo: -3, hi: 5 }],
        }))
    }
}

/// A native kernel that reverses the sample's bytes and XORs them with its seed's low byte.
struct ReverseXor;

unsafe extern "C" fn reverse_xor(args: *const KernelArgs) -> i32 {
    // SAFETY: called by pipeline-jit with valid arguments for the duration of the call.
    let a = unsafe { &*args };
    // SAFETY: as above; input and output are distinct buffers of the stated lengths.
    let (inp, out) = unsafe { (a.input(), a.output()) };
    for (o, i) in out.iter_mut().zip(inp.iter().rev()) {
        *o = i ^ (a.seed as u8);
    }
    0
}

impl Operation for ReverseXor {
    fn name(&self) -> String {
        "ReverseXor".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        if input.dtype != ElemType::U8 {
            return Err("u8 only".into());
        }
        Ok(Lowered::Native(NativeKernel::new(
            input.clone(),
            reverse_xor,
            Arc::new(()),
        )))
    }
}

/// Pick an operation valid for `state` from `choice` (falling back to a conversion).
fn pick(choice: u64, state: &State) -> Arc<dyn Operation> {
    let mut g = Gen(choice | 1);
    let hwc = state.shape.len() == 3;
    let (h, w, c) = if hwc {
        (state.shape[0], state.shape[1], state.shape[2])
    } else {
        (0, 0, 0)
    };
    let candidates: Vec<Arc<dyn Operation>> = vec![
        Arc::new(Convert(
            ElemType::ALL[g.below(ElemType::ALL.len() as u64) as usize],
        )),
        Arc::new(RandomIr { seed: g.next() }),
        Arc::new(Clamp {
            lo: g.small().min(0.0),
            hi: g.small().max(0.0),
        }),
    ];
    let mut all = candidates;
    if state.dtype.is_float() {
        all.push(Arc::new(Scale {
            mul: g.small() / 16.0,
            add: g.small(),
        }));
    }
    if state.dtype == ElemType::U8 {
        all.push(Arc::new(ReverseXor));
    }
    if hwc {
        all.push(Arc::new(RandomHorizontalFlip(g.below(3) as f64 / 2.0)));
        all.push(Arc::new(ToChw));
        let mean: Vec<f64> = (0..c).map(|_| g.small()).collect();
        let std: Vec<f64> = (0..c).map(|_| 1.0 + g.below(100) as f64).collect();
        let dtype = [ElemType::F16, ElemType::F32, ElemType::F64][g.below(3) as usize];
        all.push(Arc::new(NormalizeImage { mean, std, dtype }));
        if h.min(w) > 1 {
            let size = 1 + g.below(h.min(w) as u64 - 1) as usize;
            all.push(Arc::new(Cutout {
                size,
                fill: vec![g.small()],
            }));
        }
        all.push(Arc::new(RandomTranslate {
            padding: g.below(3) as usize,
            fill: (0..c).map(|_| g.small()).collect(),
        }));
    }
    all.push(Arc::new(Squeeze));
    let k = g.below(all.len() as u64) as usize;
    all.swap_remove(k)
}

fn build(shape: &[usize], choices: &[u64]) -> Pipeline {
    let mut p = Pipeline::new(State::cpu(shape.to_vec(), ElemType::U8));
    let mut state = p.input().clone();
    for &c in choices {
        let op = pick(c, &state);
        state = op
            .lower(&state)
            .expect("picked operations accept their state")
            .output()
            .clone();
        p.push(op);
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn jit_output_is_bit_identical_to_interpreter(
        h in 1usize..6, w in 1usize..7, c in 1usize..4,
        choices in proptest::collection::vec(any::<u64>(), 1..7),
        batch in 1usize..9,
        seed in any::<u64>(),
        epoch in 0u64..3,
    ) {
        let p = build(&[h, w, c], &choices);
        let ids: Vec<u64> = (0..batch as u64).map(|i| i * 7 + 3).collect();
        let input = common::bytes(batch * h * w * c, seed);
        let reference = common::run(&p, false, 1, &ids, &input, seed, epoch);
        prop_assert_eq!(&common::run(&p, true, 1, &ids, &input, seed, epoch), &reference, "JIT, 1 thread: {:?}", p);
        prop_assert_eq!(&common::run(&p, true, 3, &ids, &input, seed, epoch), &reference, "JIT, 3 threads: {:?}", p);
        prop_assert_eq!(&common::run(&p, false, 3, &ids, &input, seed, epoch), &reference, "interpreter, 3 threads: {:?}", p);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    /// Rows of 16 elements or more take the vector path (groups of 16 lanes along the
    /// innermost axis, unrolled up to 64 elements, a loop of groups beyond; the rest of a
    /// row scalar): widths that are and are not multiples of 16, on both sides of 64.
    #[test]
    fn wide_rows_on_the_vector_path_are_bit_identical_to_interpreter(
        h in 1usize..4, w in 14usize..100, c in prop::sample::select(vec![1usize, 3, 16, 21]),
        choices in proptest::collection::vec(any::<u64>(), 1..5),
        batch in 1usize..4,
        seed in any::<u64>(),
        epoch in 0u64..3,
    ) {
        let p = build(&[h, w, c], &choices);
        let ids: Vec<u64> = (0..batch as u64).map(|i| i * 5 + 1).collect();
        let input = common::bytes(batch * h * w * c, seed);
        let reference = common::run(&p, false, 1, &ids, &input, seed, epoch);
        prop_assert_eq!(&common::run(&p, true, 1, &ids, &input, seed, epoch), &reference, "JIT, 1 thread: {:?}", p);
        prop_assert_eq!(&common::run(&p, true, 2, &ids, &input, seed, epoch), &reference, "JIT, 2 threads: {:?}", p);
    }
}

/// An index whose runtime part and constant part are each far out of bounds but cancel
/// (`select(.., -2^40, -2^40) + 2^40`): the generated address must still be exact.
struct CancellingOffsets;

impl Operation for CancellingOffsets {
    fn name(&self) -> String {
        "CancellingOffsets".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        let far = -(1i64 << 40);
        // A condition on a looped (not unrolled) coordinate, so that it is not folded or
        // hoisted out of the loop nest.
        let cond = Index::Coord(0).cmp(CmpOp::Ge, Index::Const(0));
        let row = Index::select(cond, Index::Const(far), Index::Const(far)) + (1i64 << 40);
        let expr = Expr::Input(vec![row, Index::Coord(1)]);
        Ok(Lowered::Expr(ExprKernel {
            output: input.clone(),
            expr,
            random: vec![],
        }))
    }
}

#[test]
fn cancelling_huge_index_offsets_read_the_right_element() {
    let p = Pipeline::new(State::cpu([300, 4], ElemType::U8)).then(CancellingOffsets);
    let input: Vec<u8> = (0..2400).map(|i| (i % 251) as u8).collect();
    let ids = [0, 1];
    // Every row of a sample is its row 0.
    let expected: Vec<u8> = input[..4]
        .repeat(300)
        .into_iter()
        .chain(input[1200..1204].repeat(300))
        .collect();
    assert_eq!(p.plan().unwrap().segments().len(), 1);
    assert_eq!(common::run(&p, false, 1, &ids, &input, 0, 0), expected);
    assert_eq!(common::run(&p, true, 1, &ids, &input, 0, 0), expected);
}

/// The generated binary16 conversions equal the interpreter's (and the reference
/// functions) on every binary16 bit pattern, and on every midpoint between neighbours
/// and the values just off it, both signs, plus random doubles of every magnitude.
#[test]
fn f16_conversions_agree_on_every_bit_pattern_and_midpoint() {
    use pipeline_jit::half::{f16_from_f64, f16_to_f64};
    let all: Vec<u16> = (0..=u16::MAX).collect();
    let input: Vec<u8> = all.iter().flat_map(|h| h.to_ne_bytes()).collect();
    for to in [ElemType::F64, ElemType::F32, ElemType::I32, ElemType::U8] {
        let p = Pipeline::new(State::cpu([all.len()], ElemType::F16)).then(Convert(to));
        let jit = common::run(&p, true, 1, &[0], &input, 0, 0);
        assert_eq!(
            jit,
            common::run(&p, false, 1, &[0], &input, 0, 0),
            "F16 -> {to:?}"
        );
        if to == ElemType::F64 {
            for (h, b) in all.iter().zip(jit.chunks_exact(8)) {
                let got = f64::from_ne_bytes(b.try_into().unwrap());
                assert_eq!(got.to_bits(), f16_to_f64(*h).to_bits(), "{h:#06x}");
            }
        }
    }

    let mut doubles = Vec::new();
    for h in 0..0x7bffu16 {
        for sign in [0u16, 0x8000] {
            let (x, y) = (f16_to_f64(h | sign), f16_to_f64((h + 1) | sign));
            let mid = (x + y) / 2.0;
            let step = (y - x) / 1024.0;
            doubles.extend([x, mid, mid - step, mid + step]);
        }
    }
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    doubles.extend((0..20_000).map(|_| f64::from_bits(g.next())));
    doubles.extend([
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        65520.0,
        1e-30,
        -0.0,
    ]);
    let input: Vec<u8> = doubles.iter().flat_map(|d| d.to_ne_bytes()).collect();
    let p = Pipeline::new(State::cpu([doubles.len()], ElemType::F64)).then(Convert(ElemType::F16));
    let jit = common::run(&p, true, 1, &[0], &input, 0, 0);
    assert_eq!(
        jit,
        common::run(&p, false, 1, &[0], &input, 0, 0),
        "F64 -> F16"
    );
    for (d, b) in doubles.iter().zip(jit.chunks_exact(2)) {
        assert_eq!(u16::from_ne_bytes([b[0], b[1]]), f16_from_f64(*d), "{d:e}");
    }
}
