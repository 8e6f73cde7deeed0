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

/// The error an extension point implemented by users returns: here why an operation
/// refused its incoming state ([`crate::Operation::lower`]); the facade's decoders and slot
/// stages return it too. A message, and the error that caused it when there is one (an
/// operation may fail on a parameter file it reads, a model it loads), reachable through
/// [`std::error::Error::source`] of the error that reports it (here
/// [`Error::InvalidOperation`]).
///
/// A `String` or `&str` converts into it, so a `String` error converts with `?` and
/// `Err(format!(...).into())` works.
///
/// ```
/// use pipeline_jit::ExtensionError;
///
/// let cause = std::io::Error::new(std::io::ErrorKind::NotFound, "weights.bin");
/// let e = ExtensionError::with_source("cannot load the kernel's table", cause);
/// assert_eq!(e.to_string(), "cannot load the kernel's table");
/// assert!(std::error::Error::source(&e).is_some());
/// ```
#[derive(Debug)]
pub struct ExtensionError {
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ExtensionError {
    /// An error with a message only.
    pub fn new(message: impl Into<String>) -> ExtensionError {
        ExtensionError {
            message: message.into(),
            source: None,
        }
    }

    /// An error with a message and the error that caused it.
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> ExtensionError {
        ExtensionError {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The message and the cause, for an error type that reports them.
    pub fn into_parts(
        self,
    ) -> (
        String,
        Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) {
        (self.message, self.source)
    }

    /// The message followed by the chain of causes (`message: cause: cause's cause`), for
    /// reports that keep text only.
    pub fn full_message(&self) -> String {
        let mut text = self.message.clone();
        let mut cause = std::error::Error::source(self);
        while let Some(e) = cause {
            text.push_str(": ");
            text.push_str(&e.to_string());
            cause = e.source();
        }
        text
    }
}

impl std::fmt::Display for ExtensionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExtensionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<String> for ExtensionError {
    fn from(message: String) -> ExtensionError {
        ExtensionError::new(message)
    }
}

impl From<&str> for ExtensionError {
    fn from(message: &str) -> ExtensionError {
        ExtensionError::new(message)
    }
}
