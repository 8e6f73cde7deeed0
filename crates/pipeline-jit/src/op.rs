//! Operations: what a pipeline is made of, the contract of native kernels, and the
//! interpreter's specialised loops an operation may name ([`FastPath`]).

use std::any::Any;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::ExtensionError;
use crate::ir::ExprKernel;
use crate::state::State;

/// Arguments of one native-kernel call (one sample). `#[repr(C)]`: generated code fills it.
#[repr(C)]
#[derive(Debug)]
pub struct KernelArgs {
    /// The operation's context pointer (see [`NativeKernel::new`]).
    pub context: *const c_void,
    /// The sample id.
    pub sample: u64,
    /// Seed of this sample's generator for this operation ([`crate::rng::sample_rng`]).
    pub seed: u64,
    /// The sample's input (`input_len` readable bytes; may be null when 0).
    pub input: *const u8,
    /// Bytes of input.
    pub input_len: usize,
    /// The sample's output (`output_len` writable bytes; no alignment promised).
    pub output: *mut u8,
    /// Bytes of output.
    pub output_len: usize,
    /// Per-sample scratch space the operation asked for (`scratch_len` writable bytes,
    /// 16-byte aligned; may be null when 0).
    pub scratch: *mut u8,
    /// Bytes of scratch.
    pub scratch_len: usize,
}

impl KernelArgs {
    /// The sample's input bytes.
    ///
    /// # Safety
    /// Only inside a kernel call, on the arguments this crate passed.
    pub unsafe fn input(&self) -> &[u8] {
        if self.input_len == 0 {
            return &[];
        }
        // SAFETY: the caller of the kernel guarantees `input` is valid for `input_len` bytes.
        unsafe { std::slice::from_raw_parts(self.input, self.input_len) }
    }

    /// The sample's output bytes.
    ///
    /// # Safety
    /// Only inside a kernel call, on the arguments this crate passed, and at most once.
    #[allow(
        clippy::mut_from_ref,
        reason = "the output is a distinct buffer the call owns"
    )]
    pub unsafe fn output(&self) -> &mut [u8] {
        if self.output_len == 0 {
            return &mut [];
        }
        // SAFETY: the caller guarantees `output` is valid, exclusive, for `output_len` bytes.
        unsafe { std::slice::from_raw_parts_mut(self.output, self.output_len) }
    }

    /// The sample's scratch bytes.
    ///
    /// # Safety
    /// Only inside a kernel call, on the arguments this crate passed, and at most once.
    #[allow(
        clippy::mut_from_ref,
        reason = "the scratch is a distinct buffer the call owns"
    )]
    pub unsafe fn scratch(&self) -> &mut [u8] {
        if self.scratch_len == 0 {
            return &mut [];
        }
        // SAFETY: the caller guarantees `scratch` is valid, exclusive, for `scratch_len` bytes.
        unsafe { std::slice::from_raw_parts_mut(self.scratch, self.scratch_len) }
    }

    /// The operation's context, as the `T` given to [`NativeKernel::new`].
    ///
    /// # Safety
    /// Only inside a kernel call, and `T` must be the type the kernel was registered with.
    pub unsafe fn context<T>(&self) -> &T {
        // SAFETY: the pointer comes from `Arc::<T>::as_ptr` and the Arc outlives the call.
        unsafe { &*(self.context as *const T) }
    }
}

/// A native kernel: called once per sample; returns 0 on success, anything else is an error
/// code reported as [`crate::Error::Kernel`] naming the sample.
///
/// A panic cannot unwind out of an `extern "C"` function: Rust aborts the process there, so
/// no caller can catch it. Write kernels that may panic (anything indexing, unwrapping or
/// calling library code) with [`NativeKernel::from_fn`] instead, which catches panics inside
/// the call and reports them, with their message, as [`crate::Error::KernelFailed`].
///
/// # Safety contract (for callers, i.e. this crate)
/// `args` points to a valid [`KernelArgs`] whose pointers are valid for the stated lengths,
/// the input and output do not overlap, and nothing else writes the output or scratch during
/// the call. Kernels run concurrently on several threads with the same context.
pub type KernelFn = unsafe extern "C" fn(args: *const KernelArgs) -> i32;

/// A native operation lowered for an input state: the kernel, its context and its output.
#[derive(Clone)]
pub struct NativeKernel {
    /// The output state.
    pub output: State,
    /// Per-sample scratch bytes the kernel needs (allocated once, reused).
    pub scratch_bytes: usize,
    /// The kernel.
    pub kernel: KernelFn,
    context: Arc<dyn Any + Send + Sync>,
    context_ptr: *const c_void,
    /// Messages of failed calls, for kernels made by [`NativeKernel::from_fn`].
    pub(crate) failures: Option<Arc<KernelFailures>>,
}

/// One call of a closure kernel ([`NativeKernel::from_fn`]): the sample and its buffers as
/// safe slices.
#[derive(Debug)]
pub struct KernelCall<'a> {
    /// The sample id.
    pub sample: u64,
    /// Seed of this sample's generator for this operation ([`crate::rng::sample_rng`]).
    pub seed: u64,
    /// The sample's input bytes.
    pub input: &'a [u8],
    /// The sample's output bytes (exactly the output state's size).
    pub output: &'a mut [u8],
    /// The scratch space asked for with [`NativeKernel::with_scratch`].
    pub scratch: &'a mut [u8],
}

/// The messages of a closure kernel's latest failed calls, by sample, so that the executor
/// can attach the message to the error it returns. Bounded: calls whose error nobody asks
/// for (other chunks failing in the same batch) cannot make it grow.
#[derive(Debug, Default)]
pub(crate) struct KernelFailures(Mutex<VecDeque<(u64, String)>>);

/// Failure messages kept per kernel.
const KEPT_FAILURES: usize = 64;

impl KernelFailures {
    pub(crate) fn record(&self, sample: u64, message: String) {
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if q.len() == KEPT_FAILURES {
            q.pop_front();
        }
        q.push_back((sample, message));
    }

    /// Takes the latest message recorded for `sample`.
    pub(crate) fn take(&self, sample: u64) -> Option<String> {
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let at = q.iter().rposition(|(s, _)| *s == sample)?;
        q.remove(at).map(|(_, m)| m)
    }
}

impl std::fmt::Debug for NativeKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeKernel")
            .field("output", &self.output)
            .field("scratch_bytes", &self.scratch_bytes)
            .finish()
    }
}

// SAFETY: the context pointer points into `context`, an `Arc<dyn Any + Send + Sync>` kept
// alive by this struct; the pointee is `Send + Sync`, so sharing the pointer is sound.
unsafe impl Send for NativeKernel {}
// SAFETY: as above.
unsafe impl Sync for NativeKernel {}

// `NativeKernel::from_fn` is in `call.rs`, with the `extern "C"` trampoline it registers.
impl NativeKernel {
    /// A kernel whose context is `context`: the kernel receives `Arc::as_ptr(&context)` as
    /// [`KernelArgs::context`] and may cast it back to `*const T`.
    pub fn new<T: Send + Sync + 'static>(output: State, kernel: KernelFn, context: Arc<T>) -> Self {
        let context_ptr = Arc::as_ptr(&context) as *const c_void;
        NativeKernel {
            output,
            scratch_bytes: 0,
            kernel,
            context,
            context_ptr,
            failures: None,
        }
    }

    /// Ask for per-sample scratch space.
    pub fn with_scratch(mut self, bytes: usize) -> Self {
        self.scratch_bytes = bytes;
        self
    }

    /// The context pointer passed to the kernel.
    pub fn context_ptr(&self) -> *const c_void {
        let _keep_alive = &self.context;
        self.context_ptr
    }
}

/// What an operation becomes for a given input state.
#[derive(Debug, Clone)]
pub enum Lowered {
    /// An expressible operation (fused by the JIT with its expressible neighbours).
    Expr(ExprKernel),
    /// A native kernel (called per sample).
    Native(NativeKernel),
}

impl Lowered {
    /// The output state.
    pub fn output(&self) -> &State {
        match self {
            Lowered::Expr(k) => &k.output,
            Lowered::Native(k) => &k.output,
        }
    }
}

/// An operation of a pipeline.
///
/// From the incoming state it declares its outgoing state and buffers by lowering itself to
/// an [`ExprKernel`] (IR) or a [`NativeKernel`]. Returning `Err(reason)` rejects the state;
/// the pipeline reports it with the operation's name and position.
pub trait Operation: Send + Sync {
    /// A short name for errors and logs.
    fn name(&self) -> String;
    /// Lower the operation for `input`.
    fn lower(&self, input: &State) -> Result<Lowered, ExtensionError>;
    /// A specialised interpreter loop for this operation, if it has one (built-ins do);
    /// it must agree bit for bit with the IR it lowers to.
    #[doc(hidden)]
    fn fast_path(&self) -> Option<FastPath> {
        None
    }
}

/// A specialised interpreter loop of a built-in operation.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub enum FastPath {
    /// Reverse axis 1 of an `[H, W, C]` sample when the sample's `Rand(0)` is 1.
    Flip,
    /// `[H, W, C]` to `[C, H, W]`.
    ToChw,
    /// `out[h, w, c] = table[v * C + c]` for `u8` input `v` (bit patterns of the output type).
    Lut(Arc<[u64]>),
    /// Element-wise `as` conversion.
    Convert,
}
