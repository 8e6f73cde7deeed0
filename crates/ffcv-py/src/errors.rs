//! Rust errors as Python exceptions: the classes live in `ffcv_rs/errors.py` (so that a
//! configuration error can also be a `ValueError`); this module picks the class and keeps
//! the Rust message unchanged.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Which `ffcv_rs.errors` class an error becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `FFCVError`: anything without a more precise class.
    Base,
    /// `BadFileError`: the `.beton` file is missing, unreadable or corrupt.
    BadFile,
    /// `ConfigError` (also a `ValueError`): the loader or writer settings are refused.
    Config,
    /// `DecodeError`: a sample of a field could not be decoded.
    Decode,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Base => "FFCVError",
            Kind::BadFile => "BadFileError",
            Kind::Config => "ConfigError",
            Kind::Decode => "DecodeError",
        }
    }
}

/// An exception of class `kind` with `message`; `field` and `sample` become attributes of
/// a `DecodeError`.
pub fn make(
    py: Python<'_>,
    kind: Kind,
    message: String,
    field: Option<&str>,
    sample: Option<u64>,
) -> PyErr {
    let built = (|| -> PyResult<PyErr> {
        let module = py.import("ffcv_rs.errors")?;
        let class = module.getattr(kind.class_name())?;
        let kwargs = PyDict::new(py);
        if kind == Kind::Decode {
            kwargs.set_item("field", field)?;
            kwargs.set_item("sample", sample)?;
        }
        let value = class.call((message.clone(),), Some(&kwargs))?;
        Ok(PyErr::from_value(value))
    })();
    // If the Python half of the package cannot be imported the message still gets out.
    built.unwrap_or_else(|_| PyRuntimeError::new_err(message))
}

/// The class a facade error belongs to.
fn kind_of(e: &ffcv::Error) -> Kind {
    use ffcv::format::Error as F;
    match e {
        ffcv::Error::Format(F::InvalidConfig { .. } | F::InvalidPageSize { .. }) => Kind::Config,
        ffcv::Error::Format(_) => Kind::BadFile,
        ffcv::Error::Config { .. }
        | ffcv::Error::NoDecoder { .. }
        | ffcv::Error::Order(_)
        | ffcv::Error::Pipeline { .. }
        | ffcv::Error::State { .. }
        | ffcv::Error::Resume { .. } => Kind::Config,
        ffcv::Error::Cache(ffcv::page_cache::Error::MemoryBudget { .. }) => Kind::Config,
        ffcv::Error::Decode { .. } => Kind::Decode,
        _ => Kind::Base,
    }
}

/// A facade error as the matching `ffcv_rs.errors` exception, with the same message
/// followed by the causes it does not already say (a user's decoder or field handler may
/// fail with a cause, which the facade keeps as the error's source).
pub fn from_ffcv(py: Python<'_>, e: ffcv::Error) -> PyErr {
    let kind = kind_of(&e);
    let (field, sample) = match &e {
        ffcv::Error::Decode { field, sample, .. } => (Some(field.as_str()), Some(*sample)),
        _ => (None, None),
    };
    make(py, kind, ffcv::message_with_causes(&e), field, sample)
}

/// A beton-io error (from the writer) as the matching exception.
pub fn from_format(py: Python<'_>, e: ffcv::format::Error) -> PyErr {
    from_ffcv(py, ffcv::Error::Format(e))
}

/// A `ConfigError` (also a `ValueError`) with `message`.
pub fn config(py: Python<'_>, message: impl Into<String>) -> PyErr {
    make(py, Kind::Config, message.into(), None, None)
}
