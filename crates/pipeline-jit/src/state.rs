//! Pipeline state: what a buffer holds (shape, element type, device) at each point of a pipeline.

use crate::error::{Error, Result};

/// Element type of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer (16-bit image samples).
    U16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// IEEE half precision (binary16), stored as its bits; computed in `f64` and rounded
    /// once, to nearest even (see the `half` module).
    F16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
}

impl ElemType {
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            ElemType::U8 => 1,
            ElemType::U16 | ElemType::F16 => 2,
            ElemType::I32 | ElemType::F32 => 4,
            ElemType::I64 | ElemType::F64 => 8,
        }
    }

    /// Whether the type is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, ElemType::F16 | ElemType::F32 | ElemType::F64)
    }

    /// All element types, for tests and enumeration.
    pub const ALL: [ElemType; 7] = [
        ElemType::U8,
        ElemType::U16,
        ElemType::I32,
        ElemType::I64,
        ElemType::F16,
        ElemType::F32,
        ElemType::F64,
    ];
}

/// Where a buffer lives. Only `Cpu` buffers are produced by this crate's executors; a
/// device stage (the GPU crate's `ToDevice`) takes over after the last CPU operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host memory.
    Cpu,
    /// A CUDA device, by ordinal.
    Cuda(u32),
}

/// What one sample's buffer holds at some point of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// Shape of one sample (row-major; the batch dimension is not included).
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: ElemType,
    /// Where the buffer lives.
    pub device: Device,
}

impl State {
    /// A CPU state.
    pub fn cpu(shape: impl Into<Vec<usize>>, dtype: ElemType) -> Self {
        State {
            shape: shape.into(),
            dtype,
            device: Device::Cpu,
        }
    }

    /// Number of elements of one sample, checked against overflow.
    pub fn elements(&self) -> Result<usize> {
        self.shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| Error::TooLarge {
                shape: self.shape.clone(),
            })
    }

    /// Bytes of one sample, checked against overflow.
    pub fn bytes(&self) -> Result<usize> {
        self.elements()?
            .checked_mul(self.dtype.size())
            .ok_or_else(|| Error::TooLarge {
                shape: self.shape.clone(),
            })
    }
}
