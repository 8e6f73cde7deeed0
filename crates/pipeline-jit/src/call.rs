//! The crate's unsafe calls, kept together: generated stage functions, native kernels, and
//! releasing a JIT module's code memory. Each function checks what it can and states the
//! invariant it relies on. Closure kernels live here whole ([`NativeKernel::from_fn`], its
//! context and its `extern "C"` trampoline), so that the trampoline's one assumption, that
//! its context is a `ClosureContext`, is kept by code in this file alone.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cranelift_jit::JITModule;

use crate::compiled::{BufDesc, Compiled, JitBuffer};
use crate::op::{KernelArgs, KernelCall, KernelFailures, NativeKernel};
use crate::state::State;

/// The signature of a generated stage (see [`crate::jit`]).
type StageFn = unsafe extern "C" fn(u64, *const u64, *const i64, *const BufDesc, *mut u64) -> i32;

/// Release a module's code memory.
pub(crate) fn free_module(module: JITModule) {
    // SAFETY: callers pass a module whose functions never ran or can no longer run: either
    // compilation failed (no pointer was handed out) or the owning `Compiled` is being
    // dropped, which needs exclusive access, so no `run` (which borrows it) is in flight.
    unsafe { module.free_memory() }
}

impl Drop for Compiled {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            free_module(m);
        }
    }
}

/// One chunk of samples for a compiled stage: their ids and random draws
/// (`rand_per_sample` each), the input rows (`input_bytes` apart) and the output rows
/// (`output_bytes` apart). Named, since the three sizes are easy to swap.
pub(crate) struct StageChunk<'a> {
    pub(crate) ids: &'a [u64],
    pub(crate) rand: &'a [i64],
    pub(crate) rand_per_sample: usize,
    pub(crate) input: &'a [u8],
    pub(crate) input_bytes: usize,
    pub(crate) output: &'a mut [u8],
    pub(crate) output_bytes: usize,
}

/// Run the stage on one chunk of `ids.len()` samples, with `scratch` holding one buffer
/// per scratch slot of the stage. On a kernel failure returns
/// `Err((position in chunk, step index, code))`.
///
/// Panics if a buffer does not match the stage's layout (a bug in [`crate::exec`]).
pub(crate) fn run_stage(
    c: &Compiled,
    chunk: StageChunk<'_>,
    scratch: &mut [&mut [u8]],
) -> Result<(), (usize, usize, i32)> {
    let StageChunk {
        ids,
        rand,
        rand_per_sample,
        input,
        input_bytes,
        output,
        output_bytes,
    } = chunk;
    let n = ids.len();
    assert_eq!(rand.len(), n * rand_per_sample, "random table size");
    assert!(input.len() >= n * input_bytes, "input chunk size");
    assert!(output.len() >= n * output_bytes, "output chunk size");
    let mut scratch_iter = scratch.iter_mut();
    let mut descs = Vec::with_capacity(c.buffers.len());
    for b in &c.buffers {
        descs.push(match *b {
            JitBuffer::Input => BufDesc {
                base: input.as_ptr() as *mut u8,
                stride: input_bytes as u64,
            },
            JitBuffer::Output => BufDesc {
                base: output.as_mut_ptr(),
                stride: output_bytes as u64,
            },
            JitBuffer::Scratch(bytes) => {
                let s = scratch_iter
                    .next()
                    .expect("a scratch buffer per scratch slot");
                assert!(s.len() >= bytes, "scratch size");
                BufDesc {
                    base: s.as_mut_ptr(),
                    stride: 0,
                }
            }
        });
    }
    let mut err = [0u64; 2];
    // SAFETY: `func` was produced by `jit::compile` with exactly this signature and its
    // module is alive (owned by `c`). The buffers match the layout the code was generated
    // for and are as large as it addresses: sample `pos < n` of buffer `i` is
    // `base + pos * stride` with `stride` bytes (checked above), scratch buffers hold the
    // declared bytes; the generated code stores only into output and scratch buffers
    // (never into `input`, which is why casting it to `*mut` is sound) and clamps every
    // load into its buffer (see the invariant in `jit`).
    let code = unsafe {
        let f: StageFn = std::mem::transmute::<*const u8, StageFn>(c.func);
        f(
            n as u64,
            ids.as_ptr(),
            rand.as_ptr(),
            descs.as_ptr(),
            err.as_mut_ptr(),
        )
    };
    if code == 0 {
        Ok(())
    } else {
        Err((err[0] as usize, err[1] as usize, code))
    }
}

/// Call a native kernel for one sample.
pub(crate) fn call_kernel(
    k: &NativeKernel,
    sample: u64,
    seed: u64,
    input: &[u8],
    output: &mut [u8],
    scratch: &mut [u8],
) -> i32 {
    let args = KernelArgs {
        context: k.context_ptr(),
        sample,
        seed,
        input: input.as_ptr(),
        input_len: input.len(),
        output: output.as_mut_ptr(),
        output_len: output.len(),
        scratch: scratch.as_mut_ptr(),
        scratch_len: scratch.len(),
    };
    // SAFETY: the arguments satisfy `KernelFn`'s contract: every pointer comes from a live
    // slice of the stated length, input and output are distinct buffers, and this thread
    // holds the only mutable borrows of output and scratch for the call.
    unsafe { (k.kernel)(&args) }
}

/// The body of a closure kernel: `Err(message)` fails the sample with that message.
type KernelClosure = dyn Fn(KernelCall<'_>) -> Result<(), String> + Send + Sync;

/// What a closure kernel's context pointer points to.
struct ClosureContext {
    body: Box<KernelClosure>,
    failures: Arc<KernelFailures>,
}

impl NativeKernel {
    /// A kernel written as a safe closure, called once per sample with the sample's buffers
    /// ([`KernelCall`]). The closure may run on several threads at once. `Err(message)` or a
    /// panic fails the sample: the run ends with [`crate::Error::KernelFailed`] carrying the
    /// message (a panic's as `panicked: ...`), and the process keeps running.
    pub fn from_fn<F>(output: State, body: F) -> Self
    where
        F: Fn(KernelCall<'_>) -> Result<(), String> + Send + Sync + 'static,
    {
        let failures = Arc::new(KernelFailures::default());
        let context = Arc::new(ClosureContext {
            body: Box::new(body),
            failures: Arc::clone(&failures),
        });
        let mut kernel = NativeKernel::new(output, closure_kernel, context);
        kernel.failures = Some(failures);
        kernel
    }
}

/// Return codes of [`closure_kernel`] (the message is kept in the context).
const CLOSURE_FAILED: i32 = 1;
const CLOSURE_PANICKED: i32 = 2;

/// The `extern "C"` entry point of every [`NativeKernel::from_fn`] kernel: rebuilds the
/// safe slices and runs the closure under `catch_unwind`, so that a panic never reaches the
/// `extern "C"` boundary (where Rust would abort the process).
///
/// # Safety
/// `args` satisfies [`crate::KernelFn`]'s contract and its context is the
/// `ClosureContext` that [`NativeKernel::from_fn`] registered with this function.
pub(crate) unsafe extern "C" fn closure_kernel(args: *const KernelArgs) -> i32 {
    // SAFETY: callers pass a valid, live `KernelArgs` (the `KernelFn` contract).
    let args = unsafe { &*args };
    // SAFETY: `from_fn` registers this function only with a `ClosureContext`, kept alive
    // by the `NativeKernel` for as long as the kernel can be called.
    let ctx: &ClosureContext = unsafe { args.context() };
    // SAFETY: inside a kernel call, on this crate's arguments; each slice is taken once,
    // and input, output and scratch are distinct buffers.
    let (input, output, scratch) = unsafe { (args.input(), args.output(), args.scratch()) };
    let call = KernelCall {
        sample: args.sample,
        seed: args.seed,
        input,
        output,
        scratch,
    };
    match catch_unwind(AssertUnwindSafe(|| (ctx.body)(call))) {
        Ok(Ok(())) => 0,
        Ok(Err(message)) => {
            ctx.failures.record(args.sample, message);
            CLOSURE_FAILED
        }
        Err(panic) => {
            ctx.failures
                .record(args.sample, format!("panicked: {}", panic_message(&*panic)));
            CLOSURE_PANICKED
        }
    }
}

/// The text of a panic payload (`panic!` gives a `&str` or a `String`).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

// SAFETY: after `finalize_definitions`, the module is only touched again by `Drop`, which
// has exclusive access; `func` points to immutable, finalized code that any thread may
// call concurrently (the generated code keeps no state of its own).
unsafe impl Send for Compiled {}
// SAFETY: as above; shared access only ever calls `func`.
unsafe impl Sync for Compiled {}
