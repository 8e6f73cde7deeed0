//! The crate's error type: every fallible call returns [`Error`] with the context a user can act on.

use cudarc::driver::DriverError;

/// Everything that can go wrong while probing CUDA, building a stage or staging a batch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CUDA driver library (`libcuda.so`) could not be loaded.
    #[error(
        "no CUDA driver found: libcuda.so could not be loaded (install the NVIDIA driver, or run without a CUDA device)"
    )]
    NoDriver,
    /// The driver loaded but reports no usable device.
    #[error("no CUDA device: the driver is installed but reports no usable GPU ({detail})")]
    NoDevice {
        /// What the driver said.
        detail: String,
    },
    /// The requested ordinal is beyond the devices the driver reports.
    #[error("device {ordinal} not present: the driver reports {count} CUDA device(s)")]
    DeviceNotPresent {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver sees.
        count: usize,
    },
    /// NVRTC (`libnvrtc.so`) could not be loaded, so device kernels cannot be compiled.
    #[error(
        "NVRTC not found: libnvrtc.so could not be loaded (add the CUDA lib64 directory, e.g. /usr/local/cuda-13.0/lib64, to LD_LIBRARY_PATH)"
    )]
    NoNvrtc,
    /// A `--device` string that is not `cpu`, `cuda` or `cuda:N`.
    #[error("invalid device {spec:?}: {reason} (expected `cpu`, `cuda` or `cuda:N`)")]
    InvalidDeviceSpec {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver error while {during}: {source}")]
    Driver {
        /// What the stage was doing.
        during: String,
        /// The driver's error code.
        #[source]
        source: DriverError,
    },
    /// NVRTC rejected the kernel source.
    #[error("NVRTC failed to compile the gpu-stage kernels (options {options:?}): {log}")]
    Compile {
        /// Options passed to NVRTC.
        options: Vec<String>,
        /// NVRTC's log or error.
        log: String,
    },
    /// A stage description that cannot be built.
    #[error("invalid stage output {output:?}: {reason}")]
    InvalidOutput {
        /// The output's name.
        output: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A batch larger than the stage was built for.
    #[error("batch of {batch_len} samples exceeds the stage capacity of {max_batch}")]
    BatchTooLarge {
        /// Samples in the batch.
        batch_len: usize,
        /// Samples a slot holds.
        max_batch: usize,
    },
    /// An output index or name that the stage does not have.
    #[error("no output {what} in this stage ({count} outputs)")]
    UnknownOutput {
        /// The index or name asked for.
        what: String,
        /// How many outputs the stage has.
        count: usize,
    },
    /// An output asked for with an element type that does not match its dtype.
    #[error("output {output:?} holds {dtype}, not {requested}")]
    DtypeMismatch {
        /// The output's name.
        output: String,
        /// Its dtype.
        dtype: crate::DeviceDtype,
        /// The Rust type asked for.
        requested: &'static str,
    },
    /// An output that has no per-sample flip flags was asked for them.
    #[error("output {output:?} was not built with per-sample flip flags")]
    NoFlipFlags {
        /// The output's name.
        output: String,
    },
    /// A slot moved through its life cycle out of order (a bug in the caller or here).
    #[error("slot {slot}: cannot {action} while it is {state}")]
    SlotState {
        /// The slot index.
        slot: usize,
        /// What was attempted.
        action: &'static str,
        /// The state it was in.
        state: crate::SlotState,
    },
    /// A slot index beyond the table.
    #[error("no slot {slot} ({slots} slots)")]
    UnknownSlot {
        /// The slot asked for.
        slot: usize,
        /// How many slots there are.
        slots: usize,
    },
    /// A batch was handed to a second consumer stream; one release event covers one stream.
    #[error(
        "slot {slot}: batch already waited on by another consumer stream; use one consumer stream per batch"
    )]
    SecondConsumerStream {
        /// The slot index.
        slot: usize,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wraps a driver error with what the stage was doing.
pub(crate) fn driver(during: impl Into<String>) -> impl FnOnce(DriverError) -> Error {
    let during = during.into();
    move |source| Error::Driver { during, source }
}
