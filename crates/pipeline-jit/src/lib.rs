//! A Cranelift JIT for FFCV-style decode/transform pipelines, with an interpreter that
//! defines the semantics.
#![doc = "placeholder"]

mod call;
pub mod error;
mod eval;
pub mod exec;
pub mod ir;
mod jit;
pub mod op;
pub mod ops;
pub mod plan;
pub mod rng;
pub mod state;

pub use error::{Error, Result};
pub use exec::{Batch, Executor, Options};
pub use ir::{BinOp, CmpOp, Cond, Expr, ExprKernel, Index, RandSpec};
pub use op::{KernelArgs, KernelFn, Lowered, NativeKernel, Operation};
pub use plan::{BufferInfo, BufferKind, Pipeline, Plan, Segment, Step};
pub use state::{DType, Device, State};
