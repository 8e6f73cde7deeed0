//! `--device` strings: `cpu`, `cuda` (device 0) and `cuda:N`.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// Where a loader's outputs live, as given by `--device` or the loader builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeviceSpec {
    /// Host memory only: no GPU stage.
    #[default]
    Cpu,
    /// CUDA device with this ordinal.
    Cuda(usize),
}

/// Ordinals are passed to the driver as a C `int`.
const MAX_ORDINAL: usize = i32::MAX as usize;

impl DeviceSpec {
    /// The CUDA ordinal, if this names a CUDA device.
    pub fn cuda_ordinal(self) -> Option<usize> {
        match self {
            DeviceSpec::Cpu => None,
            DeviceSpec::Cuda(n) => Some(n),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self> {
        let invalid = |reason| Error::InvalidDeviceSpec {
            spec: spec.to_owned(),
            reason,
        };
        match spec {
            "" => return Err(invalid("empty")),
            "cpu" => return Ok(DeviceSpec::Cpu),
            "cuda" => return Ok(DeviceSpec::Cuda(0)),
            _ => {}
        }
        let Some(ordinal) = spec.strip_prefix("cuda:") else {
            return Err(invalid("unknown device kind"));
        };
        // Digits only: `usize::from_str` would accept a leading `+`, which no user means.
        if ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid("the ordinal must be a decimal number"));
        }
        match ordinal.parse::<usize>() {
            Ok(n) if n <= MAX_ORDINAL => Ok(DeviceSpec::Cuda(n)),
            _ => Err(invalid("the ordinal is too large")),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}
