//! A Cranelift JIT that compiles FFCV-style decode/transform pipelines into fused native
//! stages, with an interpreter that defines their semantics.
//!
//! # Overview
//!
//! - [`State`] (`shape`, [`ElemType`], [`Device`]) describes one sample's buffer at each point
//!   of a pipeline.
//! - An [`Operation`] declares, from its incoming state, what it becomes: an
//!   [`ExprKernel`] (an *expressible* operation, written in the IR of [`ir`]) or a
//!   [`NativeKernel`] (a C-ABI function called per sample with the sample's input, output,
//!   scratch and a context pointer: a JPEG decoder, a resize-crop, a byte copy). Both
//!   declare their output state; native kernels also ask for per-sample scratch space.
//!   [`ops`] holds the built-in image transforms.
//! - A [`Pipeline`] (input state + operations) is validated into a [`Plan`]: every state,
//!   every buffer size ([`Plan::buffers`]), the fused segments and the per-sample random
//!   slots are known before the first batch. A shape or dtype mismatch is an
//!   [`Error::InvalidOperation`] naming the operation.
//! - An [`Executor`] runs a plan on batches ([`BatchBuffers`]: sample ids, input and
//!   output bytes) on a rayon pool of `num_workers` threads, either through generated
//!   code ([`Options::compile`]) or through the interpreter; both give identical bytes.
//!   [`Executor::rebuild`] is FFCV's `recompile`: the pipeline is re-declared (new
//!   parameters, new shapes) and code is generated again in a fresh module, the old
//!   module's memory being freed.
//!
//! # The IR
//!
//! An expressible operation gives, for the output element at coordinates
//! `Coord(0)..Coord(rank)`, an [`Expr`]: loads from the input at [`Index`] coordinates
//! (clamped into the input, so every program is memory safe), constants, per-channel
//! tables, `as` casts between the six element types, arithmetic (`Add`, `Sub`, `Mul`,
//! float `Div`, `Min`, `Max`) and branch-free selects on [`Cond`]itions over indices.
//! Indices are `i64` expressions of coordinates, constants, integer values and the
//! sample's random parameters (`Index::Rand(k)`, drawn per sample from the operation's
//! [`RandSpec`] list). The [`ir`] module documents the exact semantics, which the
//! interpreter implements in plain Rust and the code generator reproduces bit for bit
//! (floats included: no fused multiply-add, the same operation order).
//!
//! # What gets fused
//!
//! The code generator emits one function per pipeline. It loops over the samples of a
//! chunk; each native kernel is a call through a symbol registered with the `JITBuilder`;
//! each run of consecutive expressible operations becomes *one* loop nest over the run's
//! output shape that reads the run's input once and writes its output once (the
//! operations are composed by substituting each one's loads with the previous one's
//! expression — no intermediate buffers). Shapes, strides, tables and constants are
//! compile-time constants; the innermost axis is unrolled so coordinates and address
//! offsets are immediates; a per-sample condition such as a flip decision is hoisted out
//! of the nest (one version of the nest per outcome); the rest is branch-free. The
//! interpreter, by contrast, runs operation after operation over the whole batch through
//! intermediate buffers, each built-in with its own tight loop (as FFCV's per-operation
//! compilation does).
//!
//! # Randomness
//!
//! Random parameters come from a generator seeded by (seed, epoch, sample id, operation
//! index) ([`rng`]), drawn before a chunk runs into a small per-sample table read by both
//! engines; native kernels get the same per-sample seed in [`KernelArgs::seed`]. Results
//! therefore do not depend on thread count, chunking or batch composition.
//!
//! # Writing a custom operation
//!
//! Implement [`Operation`]: `lower` checks the incoming state and returns either
//! `Lowered::Expr` with an expression built from [`Expr`]/[`Index`] (it is then fused with
//! its neighbours), or `Lowered::Native` with an `unsafe extern "C" fn(*const KernelArgs)
//! -> i32` and a context. Both run in the JIT and in the interpreter.
//!
//! ```
//! use std::sync::Arc;
//! use pipeline_jit::ops::{NormalizeImage, RandomHorizontalFlip, ToChw};
//! use pipeline_jit::{
//!     BatchBuffers, BinOp, ElemType, Executor, Expr, ExprKernel, KernelArgs, Lowered,
//!     NativeKernel, Operation, Options, Pipeline, State,
//! };
//!
//! /// A "decoder": sample `i` is the 2×2×3 image `store[i]`, read through the context.
//! struct Decode(Arc<Vec<[u8; 12]>>);
//!
//! unsafe extern "C" fn decode(args: *const KernelArgs) -> i32 {
//!     // SAFETY: pipeline-jit passes valid arguments for the duration of the call.
//!     let a = unsafe { &*args };
//!     // SAFETY: the context was registered as `Vec<[u8; 12]>` below.
//!     let store: &Vec<[u8; 12]> = unsafe { a.context() };
//!     match store.get(a.sample as usize) {
//!         // SAFETY: the output is this call's own buffer of `output_len` bytes.
//!         Some(img) => unsafe { a.output() }.copy_from_slice(img),
//!         None => return 1, // reported as Error::Kernel naming the sample
//!     }
//!     0
//! }
//!
//! impl Operation for Decode {
//!     fn name(&self) -> String { "Decode".into() }
//!     fn lower(&self, _input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
//!         let out = State::cpu([2, 2, 3], ElemType::U8);
//!         Ok(Lowered::Native(NativeKernel::new(out, decode, self.0.clone())))
//!     }
//! }
//!
//! /// An expressible op from the IR builder: `255 - x`.
//! struct Invert;
//! impl Operation for Invert {
//!     fn name(&self) -> String { "Invert".into() }
//!     fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
//!         if input.dtype != ElemType::U8 {
//!             return Err(format!("expects u8, got {:?}", input.dtype).into());
//!         }
//!         let x = Expr::input_identity(input.shape.len());
//!         let expr = Expr::constant(ElemType::U8, 255.0).bin(BinOp::Sub, x);
//!         Ok(Lowered::Expr(ExprKernel { output: input.clone(), expr, random: vec![] }))
//!     }
//! }
//!
//! let store = Arc::new(vec![[0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110]; 4]);
//! // Decode, then Invert + flip + normalize + CHW fused into one loop nest.
//! let pipeline = Pipeline::new(State::cpu([0], ElemType::U8))
//!     .then(Decode(store))
//!     .then(Invert)
//!     .then(RandomHorizontalFlip(0.5))
//!     .then(NormalizeImage { mean: vec![0.0; 3], std: vec![255.0; 3], dtype: ElemType::F32 })
//!     .then(ToChw);
//! let plan = pipeline.plan()?;
//! assert_eq!(plan.output().shape, vec![3, 2, 2]);
//! assert_eq!(plan.segments().len(), 2); // the native call, then one fused nest
//!
//! let ids = [0, 1, 2, 3];
//! let mut outputs = Vec::new();
//! for compile in [true, false] {
//!     let ex = Executor::new(&pipeline, &Options { num_workers: 2, compile })?;
//!     let mut out = vec![0u8; ids.len() * plan.output_bytes()];
//!     ex.run(BatchBuffers { sample_ids: &ids, input: &[], output: &mut out, seed: 7, epoch: 0 })?;
//!     outputs.push(out);
//! }
//! assert_eq!(outputs[0], outputs[1]); // JIT and interpreter agree to the bit
//! let first = f32::from_ne_bytes(outputs[0][..4].try_into().unwrap());
//! // Channel 0, row 0, column 0: 255 - 0 (not flipped) or 255 - 30 (flipped), over 255.
//! assert!(first == 1.0 || first == 225.0 / 255.0);
//! # Ok::<(), pipeline_jit::Error>(())
//! ```
//!
//! # Safety
//!
//! `unsafe` lives in `call` (calling generated code and native kernels, freeing JIT
//! memory) and in the `Send`/`Sync` impls for the kernel context and the compiled stage.
//! Generated code cannot address outside its buffers: shapes are validated before code
//! generation, loads are clamped into their buffer, stores follow the loop nest over the
//! output shape, and every buffer is checked against the plan before a call.

mod call;
mod compiled;
pub mod error;
mod eval;
pub mod exec;
pub mod half;
pub mod ir;
mod jit;
pub mod op;
pub mod ops;
pub mod plan;
pub mod rng;
pub mod state;

pub use call::panic_message;
pub use error::{Error, ExtensionError, Result};
pub use exec::{BatchBuffers, Executor, Options};
pub use ir::{BinOp, CmpOp, Cond, Expr, ExprKernel, Index, RandSpec};
pub use jit::{set_vector_code, vector_code};
pub use op::{KernelArgs, KernelCall, KernelFn, Lowered, NativeKernel, Operation};
pub use plan::{BufferInfo, BufferKind, Pipeline, Plan, Segment, Step};
pub use state::{Device, ElemType, State};
