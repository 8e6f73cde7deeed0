//! pipeline-jit's integration tests, one binary: the JIT equals the interpreter on built-in
//! and custom operations, plans and buffers, vector code, recompiling, reproducible draws.

mod common;

mod builtin_ops;
mod closure_kernels;
mod custom_ops;
mod image_kinds;
mod invalid_pipelines;
mod jit_matches_interpreter;
mod plan_buffers;
mod recompile;
mod reproducible_randomness;
mod vector_code;
