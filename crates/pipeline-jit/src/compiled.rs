//! A compiled pipeline stage as its callers see it: the JIT module that owns the code, the
//! function pointer, and the buffers the function addresses with their C layout
//! ([`BufDesc`]). The code generator ([`crate::jit`]) makes one; the executor and the
//! unsafe calls ([`crate::call`]) run it.

use std::time::Duration;

use cranelift_jit::JITModule;

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
    pub(crate) _tables: Vec<Box<[u8]>>,
}
