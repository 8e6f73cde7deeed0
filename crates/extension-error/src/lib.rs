//! The error every extension point of ffcv-rs returns: what a user's code implements and
//! the library calls. beton-io's field handlers (`FieldKind`, `CustomHandler`),
//! pipeline-jit's `Operation::lower` and the facade's `Decoder::declare`/`decode` and
//! `SlotStage::process` all fail with an [`ExtensionError`]: a message, and the error that
//! caused it when there is one (a handler may fail on a file it reads, a decoder on a model
//! it loads). The library reports it inside its own error naming the file, field and
//! sample, with the cause reachable through [`std::error::Error::source`].
//!
//! It is its own crate, below every other, because both beton-io and pipeline-jit have
//! extension points and neither may depend on the other: one type means one helper of the
//! user's serves a handler and a decoder alike. Both re-export it (`beton_io::ExtensionError`,
//! `pipeline_jit::ExtensionError`, `ffcv::ExtensionError` are this type).
//!
//! A `String` or `&str` converts into it, so an extension written against
//! `Result<_, String>` compiles unchanged once its signature names this type: `?` converts
//! a `String` error and `Err(format!(...).into())` works.
//!
//! ```
//! use extension_error::ExtensionError;
//!
//! fn read_table(path: &str) -> Result<Vec<u8>, ExtensionError> {
//!     std::fs::read(path)
//!         .map_err(|e| ExtensionError::with_source(format!("cannot read {path}"), e))
//! }
//!
//! let e = read_table("/no/such/table.bin").unwrap_err();
//! assert_eq!(e.to_string(), "cannot read /no/such/table.bin");
//! let cause = std::error::Error::source(&e).unwrap();
//! assert!(cause.downcast_ref::<std::io::Error>().is_some());
//! assert!(e.full_message().starts_with("cannot read /no/such/table.bin: "));
//!
//! let plain: ExtensionError = "no such thing".into();
//! assert!(std::error::Error::source(&plain).is_none());
//! ```

/// The error an extension point implemented by users returns (see the crate documentation):
/// a message, and the error that caused it when there is one, reachable through
/// [`std::error::Error::source`]. Its `Display` is the message alone; the library's error
/// that reports it names the place, and error reporters walk the sources.
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

    /// Whether it carries a cause: the library keeps the error itself (as the source of its
    /// own report) only then; without one the message says it all.
    pub fn has_source(&self) -> bool {
        self.source.is_some()
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
