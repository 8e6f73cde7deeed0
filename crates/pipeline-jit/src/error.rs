//! The crate's error type: every failure names the operation, buffer or sample it concerns.

/// Errors from building, compiling or running a pipeline.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operation refused its incoming state (wrong rank, dtype, channel count, ...).
    #[error("operation {index} ({op}): {reason}")]
    InvalidOperation {
        /// Position of the operation in its pipeline.
        index: usize,
        /// The operation's name.
        op: String,
        /// What is wrong with the incoming state or the operation's parameters, and the
        /// error behind it when the operation gave one.
        #[source]
        reason: ExtensionError,
    },
    /// A pipeline without operations.
    #[error("pipeline has no operations")]
    EmptyPipeline,
    /// A state's byte size overflows `usize`.
    #[error("state {shape:?} is too large to allocate")]
    TooLarge {
        /// The offending shape.
        shape: Vec<usize>,
    },
    /// A caller-provided buffer is too small or misaligned for the batch.
    #[error("{buffer} buffer: {reason}")]
    Buffer {
        /// Which buffer (`input` or `output`).
        buffer: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A native kernel reported a failure for one sample.
    #[error("operation {index} ({op}) failed on sample {sample} with code {code}")]
    Kernel {
        /// Position of the operation in its pipeline.
        index: usize,
        /// The operation's name.
        op: String,
        /// The sample id being processed.
        sample: u64,
        /// The kernel's non-zero return code.
        code: i32,
    },
    /// A closure kernel ([`crate::NativeKernel::from_fn`]) returned an error or panicked
    /// for one sample.
    #[error("operation {index} ({op}) failed on sample {sample}: {message}")]
    KernelFailed {
        /// Position of the operation in its pipeline.
        index: usize,
        /// The operation's name.
        op: String,
        /// The sample id being processed.
        sample: u64,
        /// The closure's error, or `panicked: ` and the panic's message.
        message: String,
    },
    /// Cranelift could not build or compile the stage function.
    #[error("code generation failed: {0}")]
    Codegen(String),
    /// The worker thread pool could not be created.
    #[error("thread pool: {0}")]
    ThreadPool(String),
}

/// The crate's `Result`.
pub type Result<T> = std::result::Result<T, Error>;

/// Why an operation refused its incoming state ([`crate::Operation::lower`]): the error
/// every extension point returns (its own crate, `extension-error`, so that beton-io's field
/// handlers share it), reported here inside [`Error::InvalidOperation`].
pub use extension_error::ExtensionError;
