//! Running a plan on batches: the JIT-compiled stage or the interpreter, on a rayon pool.

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rayon::prelude::*;

use crate::call;
use crate::compiled::{Compiled, JitBuffer};
use crate::error::{Error, Result};
use crate::eval::eval_sample;
use crate::jit;
use crate::op::FastPath;
use crate::op::Lowered;
use crate::plan::{Pipeline, Plan, Step};
use crate::rng;
use crate::state::ElemType;

/// How to run a pipeline.
#[derive(Debug, Clone)]
pub struct Options {
    /// Threads of the pool (at least 1).
    pub num_workers: usize,
    /// `true`: generate code with Cranelift; `false`: interpret (FFCV's compiler switch).
    pub compile: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            num_workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            compile: true,
        }
    }
}

/// One batch to process.
#[derive(Debug)]
pub struct BatchBuffers<'a> {
    /// The sample id of each position (drives the per-sample random numbers).
    pub sample_ids: &'a [u64],
    /// `sample_ids.len() * plan.input_bytes()` bytes, sample after sample.
    pub input: &'a [u8],
    /// `sample_ids.len() * plan.output_bytes()` bytes, written sample after sample.
    pub output: &'a mut [u8],
    /// The loader's seed.
    pub seed: u64,
    /// The epoch.
    pub epoch: u64,
}

/// A byte buffer whose usable part starts on a 16-byte boundary.
#[derive(Debug, Default)]
struct AlignedBuf {
    v: Vec<u8>,
}

impl AlignedBuf {
    fn get(&mut self, len: usize) -> &mut [u8] {
        if self.v.len() < len + 16 {
            self.v = vec![0; len + 16];
        }
        let off = self.v.as_ptr().align_offset(16);
        &mut self.v[off..off + len]
    }
}

enum Engine {
    Jit {
        compiled: Box<Compiled>,
        /// Per chunk index, one buffer per scratch slot of the stage.
        scratch: Vec<Mutex<Vec<AlignedBuf>>>,
    },
    Interp {
        /// Batch-sized intermediate results, one per step but the last.
        inter: Mutex<Vec<Vec<u8>>>,
        /// Per chunk index, one scratch buffer per step.
        scratch: Vec<Mutex<Vec<AlignedBuf>>>,
        /// Specialised loops, per step.
        fast: Vec<Option<Fast>>,
    },
}

/// A specialised interpreter loop, resolved for its step.
enum Fast {
    Convert {
        from: ElemType,
        to: ElemType,
    },
    Flip {
        h: usize,
        w: usize,
        pixel: usize,
    },
    ToChw {
        h: usize,
        w: usize,
        c: usize,
        size: usize,
    },
    Lut {
        c: usize,
        size: usize,
        table: Vec<u8>,
    },
}

/// Runs one pipeline's plan on batches, compiled or interpreted; both give identical bytes.
pub struct Executor {
    plan: Plan,
    pool: Arc<rayon::ThreadPool>,
    workers: usize,
    engine: Engine,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("plan", &self.plan)
            .field("workers", &self.workers)
            .field("compiled", &self.is_compiled())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another run leaves buffers that are only ever overwritten: keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Deterministic chunks: `ceil(n / workers)` consecutive samples each.
fn chunks(n: usize, workers: usize) -> Vec<Range<usize>> {
    let size = n.div_ceil(workers.max(1)).max(1);
    (0..n).step_by(size).map(|s| s..(s + size).min(n)).collect()
}

/// Split `buf` into the byte ranges of `ranges` (samples of `bytes` bytes).
fn split_mut<'a>(
    mut buf: &'a mut [u8],
    ranges: &[Range<usize>],
    bytes: usize,
) -> Vec<&'a mut [u8]> {
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        let (head, tail) = std::mem::take(&mut buf).split_at_mut(r.len() * bytes);
        out.push(head);
        buf = tail;
    }
    out
}

impl Executor {
    /// Plan `pipeline` and build its executor with a new pool of `options.num_workers`.
    pub fn new(pipeline: &Pipeline, options: &Options) -> Result<Self> {
        let workers = options.num_workers.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("pipeline-{i}"))
            .build()
            .map_err(|e| Error::ThreadPool(e.to_string()))?;
        Self::with_pool(pipeline, options.compile, Arc::new(pool))
    }

    /// Plan `pipeline` and build its executor on an existing pool (chunks = pool threads).
    pub fn with_pool(
        pipeline: &Pipeline,
        compile: bool,
        pool: Arc<rayon::ThreadPool>,
    ) -> Result<Self> {
        let plan = pipeline.plan()?;
        let workers = pool.current_num_threads().max(1);
        let engine = Self::engine(&plan, compile, workers)?;
        Ok(Executor {
            plan,
            pool,
            workers,
            engine,
        })
    }

    fn engine(plan: &Plan, compile: bool, workers: usize) -> Result<Engine> {
        if compile {
            let compiled = jit::compile(plan)?;
            let scratch = (0..workers)
                .map(|_| {
                    let mut bufs = Vec::new();
                    for b in &compiled.buffers {
                        if let JitBuffer::Scratch(bytes) = *b {
                            let mut a = AlignedBuf::default();
                            a.get(bytes);
                            bufs.push(a);
                        }
                    }
                    Mutex::new(bufs)
                })
                .collect();
            Ok(Engine::Jit {
                compiled: Box::new(compiled),
                scratch,
            })
        } else {
            let fast = plan.steps().iter().map(resolve_fast).collect();
            let scratch = (0..workers)
                .map(|_| Mutex::new(plan.steps().iter().map(|_| AlignedBuf::default()).collect()))
                .collect();
            Ok(Engine::Interp {
                inter: Mutex::new(vec![Vec::new(); plan.steps().len() - 1]),
                scratch,
                fast,
            })
        }
    }

    /// Re-declare the pipeline (its operations may have changed parameters or output
    /// shapes) and regenerate code in a fresh JIT module; the previous module's memory is
    /// freed here, as no stage of it can run (`&mut self`). This is `recompile` mode.
    pub fn rebuild(&mut self, pipeline: &Pipeline) -> Result<()> {
        let plan = pipeline.plan()?;
        let compile = self.is_compiled();
        let engine = Self::engine(&plan, compile, self.workers)?;
        // Dropping the old engine frees its JIT module (see `call`).
        self.engine = engine;
        self.plan = plan;
        Ok(())
    }

    /// The validated plan (states, buffer sizes, segments).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Whether the JIT is used.
    pub fn is_compiled(&self) -> bool {
        matches!(self.engine, Engine::Jit { .. })
    }

    /// Time spent generating code for the current plan, if compiled.
    pub fn compile_time(&self) -> Option<Duration> {
        match &self.engine {
            Engine::Jit { compiled, .. } => Some(compiled.compile_time),
            Engine::Interp { .. } => None,
        }
    }

    /// Threads (and chunks per batch, at most).
    pub fn num_workers(&self) -> usize {
        self.workers
    }

    fn rand_table(&self, ids: &[u64], seed: u64, epoch: u64, out: &mut [i64]) {
        let slots = self.plan.rand_slots().len();
        if slots == 0 {
            return;
        }
        for (row, &sample) in out.chunks_exact_mut(slots).zip(ids) {
            for step in self.plan.steps() {
                let s = rng::sample_seed(seed, epoch, sample, step.index);
                match &step.lowered {
                    Lowered::Native(_) => row[step.rand_offset] = s as i64,
                    Lowered::Expr(k) if !k.random.is_empty() => {
                        let mut g = rng::sample_rng(s);
                        for (j, spec) in k.random.iter().enumerate() {
                            row[step.rand_offset + j] = rng::draw(spec, &mut g);
                        }
                    }
                    Lowered::Expr(_) => {}
                }
            }
        }
    }

    fn kernel_error(&self, step: usize, sample: u64, code: i32) -> Error {
        let s = &self.plan.steps()[step];
        if let Lowered::Native(k) = &s.lowered
            && let Some(message) = k.failures.as_ref().and_then(|f| f.take(sample))
        {
            return Error::KernelFailed {
                index: s.index,
                op: s.name.clone(),
                sample,
                message,
            };
        }
        Error::Kernel {
            index: s.index,
            op: s.name.clone(),
            sample,
            code,
        }
    }

    /// Process one batch: every sample of `batch.input` through the pipeline into
    /// `batch.output`. A native kernel's failure ends the batch with an error naming the
    /// operation and the sample.
    pub fn run(&self, batch: BatchBuffers<'_>) -> Result<()> {
        let n = batch.sample_ids.len();
        let (ib, ob) = (self.plan.input_bytes(), self.plan.output_bytes());
        if batch.input.len() != n * ib {
            return Err(Error::Buffer {
                buffer: "input",
                reason: format!("{} bytes for {n} samples of {ib}", batch.input.len()),
            });
        }
        if batch.output.len() != n * ob {
            return Err(Error::Buffer {
                buffer: "output",
                reason: format!("{} bytes for {n} samples of {ob}", batch.output.len()),
            });
        }
        let ranges = chunks(n, self.workers);
        match &self.engine {
            Engine::Jit { compiled, scratch } => self.run_jit(compiled, scratch, &ranges, batch),
            Engine::Interp {
                inter,
                scratch,
                fast,
            } => self.run_interp(inter, scratch, fast, &ranges, batch),
        }
    }

    fn run_jit(
        &self,
        compiled: &Compiled,
        scratch: &[Mutex<Vec<AlignedBuf>>],
        ranges: &[Range<usize>],
        batch: BatchBuffers<'_>,
    ) -> Result<()> {
        let (ib, ob) = (self.plan.input_bytes(), self.plan.output_bytes());
        let slots = self.plan.rand_slots().len();
        let sizes: Vec<usize> = compiled
            .buffers
            .iter()
            .filter_map(|b| {
                if let JitBuffer::Scratch(s) = b {
                    Some(*s)
                } else {
                    None
                }
            })
            .collect();
        let outs = split_mut(batch.output, ranges, ob);
        let results: Vec<Result<()>> = self.pool.install(|| {
            outs.into_par_iter()
                .zip(ranges.par_iter())
                .enumerate()
                .map(|(ci, (out, r))| {
                    let ids = &batch.sample_ids[r.clone()];
                    let mut rand = vec![0i64; ids.len() * slots];
                    self.rand_table(ids, batch.seed, batch.epoch, &mut rand);
                    let mut guard = lock(&scratch[ci]);
                    let mut bufs: Vec<&mut [u8]> = guard
                        .iter_mut()
                        .zip(&sizes)
                        .map(|(a, &s)| a.get(s))
                        .collect();
                    let chunk = call::StageChunk {
                        ids,
                        rand: &rand,
                        rand_per_sample: slots,
                        input: &batch.input[r.start * ib..r.end * ib],
                        input_bytes: ib,
                        output: out,
                        output_bytes: ob,
                    };
                    call::run_stage(compiled, chunk, &mut bufs)
                        .map_err(|(pos, step, code)| self.kernel_error(step, ids[pos], code))
                })
                .collect()
        });
        results.into_iter().collect()
    }

    fn run_interp(
        &self,
        inter: &Mutex<Vec<Vec<u8>>>,
        scratch: &[Mutex<Vec<AlignedBuf>>],
        fast: &[Option<Fast>],
        ranges: &[Range<usize>],
        batch: BatchBuffers<'_>,
    ) -> Result<()> {
        let n = batch.sample_ids.len();
        let slots = self.plan.rand_slots().len();
        let mut rand = vec![0i64; n * slots];
        let rand_chunks = split_i64(&mut rand, ranges, slots);
        self.pool.install(|| {
            rand_chunks
                .into_par_iter()
                .zip(ranges.par_iter())
                .for_each(|(out, r)| {
                    self.rand_table(&batch.sample_ids[r.clone()], batch.seed, batch.epoch, out);
                })
        });
        let steps = self.plan.steps();
        let mut inter = lock(inter);
        for (i, s) in steps.iter().enumerate().take(steps.len() - 1) {
            let need = n * s.lowered.output().bytes()?;
            if inter[i].len() < need {
                inter[i] = vec![0; need];
            }
        }
        let output = batch.output;
        for (i, step) in steps.iter().enumerate() {
            let ib = step.input.bytes()?;
            let ob = step.lowered.output().bytes()?;
            // Step i reads buffer i-1 (or the input) and writes buffer i (or the output).
            let (before, after) = inter.split_at_mut(i.min(steps.len() - 1));
            let src: &[u8] = if i == 0 {
                batch.input
            } else {
                &before[i - 1][..n * ib]
            };
            let dst: &mut [u8] = if i + 1 == steps.len() {
                &mut *output
            } else {
                &mut after[0][..n * ob]
            };
            let outs = split_mut(dst, ranges, ob);
            let f = fast[i].as_ref();
            let results: Vec<Result<()>> = self.pool.install(|| {
                outs.into_par_iter()
                    .zip(ranges.par_iter())
                    .enumerate()
                    .map(|(ci, (out, r))| {
                        let mut guard = lock(&scratch[ci]);
                        for (k, pos) in r.clone().enumerate() {
                            let inp = &src[pos * ib..(pos + 1) * ib];
                            let o = &mut out[k * ob..(k + 1) * ob];
                            let row = &rand[pos * slots..(pos + 1) * slots];
                            let one = OneSample {
                                sample: batch.sample_ids[pos],
                                input: inp,
                                output: o,
                                rand: row,
                            };
                            self.apply(step, f, one, &mut guard[i])?;
                        }
                        Ok(())
                    })
                    .collect()
            });
            results.into_iter().collect::<Result<()>>()?;
        }
        Ok(())
    }

    /// Runs `step` on one sample (through its fast path when it has one).
    fn apply(
        &self,
        step: &Step,
        fast: Option<&Fast>,
        one: OneSample<'_>,
        scratch: &mut AlignedBuf,
    ) -> Result<()> {
        let OneSample {
            sample,
            input: inp,
            output: out,
            rand,
        } = one;
        match &step.lowered {
            Lowered::Native(k) => {
                let seed = rand[step.rand_offset] as u64;
                let code =
                    call::call_kernel(k, sample, seed, inp, out, scratch.get(k.scratch_bytes));
                if code != 0 {
                    return Err(self.kernel_error(step.index, sample, code));
                }
            }
            Lowered::Expr(k) => match fast {
                Some(Fast::Flip { h, w, pixel }) => {
                    flip(inp, out, *h, *w, *pixel, rand[step.rand_offset] == 1)
                }
                Some(Fast::ToChw { h, w, c, size }) => to_chw(inp, out, *h * *w, *c, *size),
                Some(Fast::Convert { from, to }) => convert(inp, out, *from, *to),
                Some(Fast::Lut { c, size, table }) => lut(inp, out, *c, *size, table),
                None => {
                    let r = &rand[step.rand_offset..step.rand_offset + k.random.len()];
                    eval_sample(k, &step.input, inp, r, out);
                }
            },
        }
        Ok(())
    }
}

/// One sample's buffers for one interpreted step: its id, its input and output rows, and
/// the random draws of every step for it.
struct OneSample<'a> {
    sample: u64,
    input: &'a [u8],
    output: &'a mut [u8],
    rand: &'a [i64],
}

fn split_i64<'a>(
    mut buf: &'a mut [i64],
    ranges: &[Range<usize>],
    per: usize,
) -> Vec<&'a mut [i64]> {
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        let (head, tail) = std::mem::take(&mut buf).split_at_mut(r.len() * per);
        out.push(head);
        buf = tail;
    }
    out
}

fn resolve_fast(step: &Step) -> Option<Fast> {
    let Lowered::Expr(k) = &step.lowered else {
        return None;
    };
    let shape = &step.input.shape;
    let size = step.input.dtype.size();
    match (step.fast.as_ref()?, &shape[..]) {
        (FastPath::Flip, &[h, w, c]) => Some(Fast::Flip {
            h,
            w,
            pixel: c * size,
        }),
        (FastPath::ToChw, &[h, w, c]) => Some(Fast::ToChw { h, w, c, size }),
        (FastPath::Convert, _) => Some(Fast::Convert {
            from: step.input.dtype,
            to: k.output.dtype,
        }),
        (FastPath::Lut(bits), &[_, _, c])
            if step.input.dtype == ElemType::U8 && bits.len() == 256 * c =>
        {
            let t = k.output.dtype;
            let mut table = Vec::with_capacity(bits.len() * t.size());
            for &b in bits.iter() {
                table.extend_from_slice(&b.to_ne_bytes()[..t.size()]);
            }
            Some(Fast::Lut {
                c,
                size: t.size(),
                table,
            })
        }
        _ => None,
    }
}

fn flip(inp: &[u8], out: &mut [u8], h: usize, w: usize, pixel: usize, flipped: bool) {
    if !flipped {
        out.copy_from_slice(inp);
        return;
    }
    fn rows<const P: usize>(inp: &[u8], out: &mut [u8], row: usize) {
        for (o, i) in out.chunks_exact_mut(row).zip(inp.chunks_exact(row)) {
            for (po, pi) in o.chunks_exact_mut(P).zip(i.chunks_exact(P).rev()) {
                po.copy_from_slice(pi);
            }
        }
    }
    let row = w * pixel;
    if row == 0 || h == 0 {
        return;
    }
    match pixel {
        1 => rows::<1>(inp, out, row),
        3 => rows::<3>(inp, out, row),
        4 => rows::<4>(inp, out, row),
        6 => rows::<6>(inp, out, row),
        12 => rows::<12>(inp, out, row),
        _ => {
            for (o, i) in out.chunks_exact_mut(row).zip(inp.chunks_exact(row)) {
                for (po, pi) in o.chunks_exact_mut(pixel).zip(i.chunks_exact(pixel).rev()) {
                    po.copy_from_slice(pi);
                }
            }
        }
    }
}

fn to_chw(inp: &[u8], out: &mut [u8], hw: usize, c: usize, size: usize) {
    fn go<const S: usize>(inp: &[u8], out: &mut [u8], hw: usize, c: usize) {
        for (p, px) in inp.chunks_exact(c * S).enumerate() {
            for ch in 0..c {
                let o = (ch * hw + p) * S;
                out[o..o + S].copy_from_slice(&px[ch * S..ch * S + S]);
            }
        }
    }
    if c == 0 {
        return;
    }
    match size {
        1 => go::<1>(inp, out, hw, c),
        2 => go::<2>(inp, out, hw, c),
        4 => go::<4>(inp, out, hw, c),
        _ => go::<8>(inp, out, hw, c),
    }
}

fn lut(inp: &[u8], out: &mut [u8], c: usize, size: usize, table: &[u8]) {
    fn go<const S: usize>(inp: &[u8], out: &mut [u8], c: usize, table: &[u8]) {
        for (px, po) in inp.chunks_exact(c).zip(out.chunks_exact_mut(c * S)) {
            for ch in 0..c {
                let t = (usize::from(px[ch]) * c + ch) * S;
                po[ch * S..ch * S + S].copy_from_slice(&table[t..t + S]);
            }
        }
    }
    if c == 0 {
        return;
    }
    match size {
        2 => go::<2>(inp, out, c, table),
        4 => go::<4>(inp, out, c, table),
        _ => go::<8>(inp, out, c, table),
    }
}

/// A plain-old-data element type of a buffer.
trait Elem: Copy {
    const SIZE: usize;
    fn read(b: &[u8]) -> Self;
    fn write(self, b: &mut [u8]);
}

/// Rust's `as` between two element types.
trait CastTo<B> {
    fn cast(self) -> B;
}

macro_rules! elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_ne_bytes(a)
            }
            fn write(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_ne_bytes());
            }
        }
        impl CastTo<u8> for $t { fn cast(self) -> u8 { self as u8 } }
        impl CastTo<u16> for $t { fn cast(self) -> u16 { self as u16 } }
        impl CastTo<i32> for $t { fn cast(self) -> i32 { self as i32 } }
        impl CastTo<i64> for $t { fn cast(self) -> i64 { self as i64 } }
        impl CastTo<f32> for $t { fn cast(self) -> f32 { self as f32 } }
        impl CastTo<f64> for $t { fn cast(self) -> f64 { self as f64 } }
    )*};
}
elem!(u8, u16, i32, i64, f32, f64);

fn convert_as<A: Elem + CastTo<B>, B: Elem>(inp: &[u8], out: &mut [u8]) {
    for (i, o) in inp.chunks_exact(A::SIZE).zip(out.chunks_exact_mut(B::SIZE)) {
        A::read(i).cast().write(o);
    }
}

fn convert_from<
    A: Elem + CastTo<u8> + CastTo<u16> + CastTo<i32> + CastTo<i64> + CastTo<f32> + CastTo<f64>,
>(
    inp: &[u8],
    out: &mut [u8],
    from: ElemType,
    to: ElemType,
) {
    match to {
        ElemType::U8 => convert_as::<A, u8>(inp, out),
        ElemType::U16 => convert_as::<A, u16>(inp, out),
        ElemType::I32 => convert_as::<A, i32>(inp, out),
        ElemType::I64 => convert_as::<A, i64>(inp, out),
        ElemType::F32 => convert_as::<A, f32>(inp, out),
        ElemType::F64 => convert_as::<A, f64>(inp, out),
        ElemType::F16 => convert_f16(inp, out, from, to),
    }
}

/// Element-wise `as` conversion of a whole sample.
fn convert(inp: &[u8], out: &mut [u8], from: ElemType, to: ElemType) {
    match from {
        ElemType::U8 => convert_from::<u8>(inp, out, from, to),
        ElemType::U16 => convert_from::<u16>(inp, out, from, to),
        ElemType::I32 => convert_from::<i32>(inp, out, from, to),
        ElemType::I64 => convert_from::<i64>(inp, out, from, to),
        ElemType::F32 => convert_from::<f32>(inp, out, from, to),
        ElemType::F64 => convert_from::<f64>(inp, out, from, to),
        ElemType::F16 => convert_f16(inp, out, from, to),
    }
}

/// A conversion from or to `F16`: through `f64` with one rounding, as the IR defines it
/// (Rust has no stable `f16` to cast with).
fn convert_f16(inp: &[u8], out: &mut [u8], from: ElemType, to: ElemType) {
    for k in 0..inp.len() / from.size() {
        crate::eval::V::read(from, inp, k).cast(to).write(out, k);
    }
}
