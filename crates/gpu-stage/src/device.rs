//! A CUDA device handle: the checked way into cudarc (library present, ordinal in range).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, DriverError, sys::CUresult};

use crate::error::driver;
use crate::library::driver_available;
use crate::{DeviceSpec, Error, Result};

/// Free and total device memory, in bytes (`cuMemGetInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemInfo {
    /// Bytes not allocated by anyone.
    pub free: usize,
    /// Bytes on the device.
    pub total: usize,
}

/// An open CUDA device: its primary context and ordinal.
#[derive(Debug, Clone)]
pub struct Device {
    ctx: Arc<CudaContext>,
}

/// Maps the driver's "no device" answers to [`Error::NoDevice`], others to [`Error::Driver`].
fn init_error(during: &str) -> impl FnOnce(DriverError) -> Error + '_ {
    move |e| match e.0 {
        CUresult::CUDA_ERROR_NO_DEVICE
        | CUresult::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | CUresult::CUDA_ERROR_NOT_INITIALIZED => Error::NoDevice {
            detail: format!("{e}"),
        },
        _ => driver(during)(e),
    }
}

impl Device {
    /// Number of CUDA devices the driver reports.
    pub fn count() -> Result<usize> {
        if !driver_available() {
            return Err(Error::NoDriver);
        }
        let n = CudaContext::device_count().map_err(init_error("counting CUDA devices"))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Opens device `ordinal` (retains its primary context, shared with other users of the
    /// driver API in this process, e.g. PyTorch).
    pub fn open(ordinal: usize) -> Result<Self> {
        let count = Device::count()?;
        if count == 0 {
            return Err(Error::NoDevice {
                detail: "0 devices".to_owned(),
            });
        }
        if ordinal >= count {
            return Err(Error::DeviceNotPresent { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(init_error(&format!("opening CUDA device {ordinal}")))?;
        Ok(Device { ctx })
    }

    /// Opens the device a [`DeviceSpec`] names; `cpu` is an error (there is nothing to open).
    pub fn from_spec(spec: DeviceSpec) -> Result<Self> {
        match spec {
            DeviceSpec::Cuda(n) => Device::open(n),
            DeviceSpec::Cpu => Err(Error::InvalidDeviceSpec {
                spec: spec.to_string(),
                reason: "not a CUDA device",
            }),
        }
    }

    /// The cudarc context, for allocating and launching alongside the stage.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The device's marketing name (e.g. `NVIDIA H200`).
    pub fn name(&self) -> Result<String> {
        self.ctx.name().map_err(driver("reading the device name"))
    }

    /// Compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        self.ctx
            .compute_capability()
            .map_err(driver("reading the compute capability"))
    }

    /// Free and total device memory.
    pub fn mem_info(&self) -> Result<MemInfo> {
        let (free, total) = self
            .ctx
            .mem_get_info()
            .map_err(driver("reading device memory (cuMemGetInfo)"))?;
        Ok(MemInfo { free, total })
    }

    /// A new non-blocking stream, e.g. for a consumer.
    pub fn new_stream(&self) -> Result<Arc<CudaStream>> {
        self.ctx.new_stream().map_err(driver("creating a stream"))
    }
}
