//! A batch on the device ([`StagedBatch`]), owning its slot until dropped: the consumer
//! waits on it, reads its outputs as [`DeviceTensor`] views, typed cudarc views or host
//! copies, and releases it, which records the slot's release event on the consumer's
//! stream. The only `unsafe` here is the typed view of device bytes.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, CudaView, DevicePtr, sys};

use crate::error::driver;
use crate::slot_buffers::SlotResources;
use crate::slot_table::SlotTable;
use crate::stage_config::OutputLayout;
use crate::stage_state::StageInner;
use crate::{DeviceDtype, DeviceElement, Error, Result, SlotState};

/// A batch on the device, owning its slot until dropped.
///
/// Before using the data, make the consumer stream wait ([`wait_on`](Self::wait_on)) or wait
/// on the host ([`synchronize`](Self::synchronize)). Drop the batch (or call
/// [`release`](Self::release)) after enqueuing the last work that reads it: the release event
/// is recorded on the consumer stream then, and the slot is reused only after it completes.
#[derive(Debug)]
pub struct StagedBatch {
    stage: Arc<StageInner>,
    slot: usize,
    res: Option<Box<SlotResources>>,
    batch_len: usize,
    consumer: Option<Arc<CudaStream>>,
}

/// A device view of one output of a staged batch.
#[derive(Debug, Clone)]
pub struct DeviceTensor<'a> {
    /// The output's name.
    pub name: &'a str,
    /// Device address of the first element.
    pub ptr: sys::CUdeviceptr,
    /// Shape: `[batch, sample_shape..]` (`[B, C, H, W]` for images).
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DeviceDtype,
    /// Bytes the view covers.
    pub bytes: usize,
    /// The slot stream that produced it.
    pub stream: &'a Arc<CudaStream>,
    /// Recorded after the copy and kernels: wait on it before reading.
    pub ready: &'a CudaEvent,
}

impl StagedBatch {
    /// The batch of slot `slot`, just enqueued, with its resources.
    pub(crate) fn new(
        stage: Arc<StageInner>,
        slot: usize,
        res: Box<SlotResources>,
        batch_len: usize,
    ) -> Self {
        StagedBatch {
            stage,
            slot,
            res: Some(res),
            batch_len,
            consumer: None,
        }
    }

    /// Samples in the batch.
    pub fn len(&self) -> usize {
        self.batch_len
    }

    /// True for an empty batch (never: staging needs at least one sample).
    pub fn is_empty(&self) -> bool {
        self.batch_len == 0
    }

    /// The slot index.
    pub fn slot(&self) -> usize {
        self.slot
    }

    fn res(&self) -> Result<&SlotResources> {
        self.res.as_deref().ok_or(Error::SlotState {
            slot: self.slot,
            action: "use a released batch",
            state: SlotState::Releasing,
        })
    }

    /// The slot stream the copy and kernels ran on.
    pub fn stream(&self) -> Result<&Arc<CudaStream>> {
        Ok(&self.res()?.stream)
    }

    /// The event recorded after this batch's copy and kernels.
    pub fn ready_event(&self) -> Result<&CudaEvent> {
        Ok(&self.res()?.ready)
    }

    /// Makes `consumer` wait (on the device) until the batch is ready, and remembers it: the
    /// release event will be recorded on it. One consumer stream per batch.
    pub fn wait_on(&mut self, consumer: &Arc<CudaStream>) -> Result<()> {
        if let Some(previous) = &self.consumer
            && previous != consumer
        {
            return Err(Error::SecondConsumerStream { slot: self.slot });
        }
        if consumer.context() != self.stage.device.context() {
            return Err(Error::Driver {
                during: format!(
                    "waiting on slot {} from a stream of another context",
                    self.slot
                ),
                source: cudarc::driver::DriverError(sys::CUresult::CUDA_ERROR_INVALID_CONTEXT),
            });
        }
        let res = self.res()?;
        consumer
            .wait(&res.ready)
            .map_err(driver(format!("waiting on slot {} ready event", self.slot)))?;
        self.consumer = Some(consumer.clone());
        Ok(())
    }

    /// Blocks the calling thread until the batch is ready (for a CPU consumer). Waits on this
    /// slot's event only.
    pub fn synchronize(&self) -> Result<()> {
        self.res()?
            .ready
            .synchronize()
            .map_err(driver(format!("waiting on slot {} ready event", self.slot)))
    }

    fn device_buffer(&self, output: usize) -> Result<(&OutputLayout, &CudaSlice<u8>)> {
        let layout = self.stage.output(output)?;
        let buf = &self.res()?.buffers[output];
        Ok((layout, buf.device_out.as_ref().unwrap_or(&buf.device_in)))
    }

    /// Index of the output named `name`.
    pub fn output_index(&self, name: &str) -> Result<usize> {
        self.stage
            .outputs
            .iter()
            .position(|o| o.name == name)
            .ok_or_else(|| Error::UnknownOutput {
                what: format!("{name:?}"),
                count: self.stage.outputs.len(),
            })
    }

    /// The device view of output `output`: address, shape, dtype, and the stream and event
    /// that make using it safe.
    pub fn tensor(&self, output: usize) -> Result<DeviceTensor<'_>> {
        let (layout, buf) = self.device_buffer(output)?;
        let res = self.res()?;
        let (ptr, _record) = buf.device_ptr(&res.stream);
        let mut shape = Vec::with_capacity(layout.device_sample_shape.len() + 1);
        shape.push(self.batch_len);
        shape.extend_from_slice(&layout.device_sample_shape);
        Ok(DeviceTensor {
            name: &layout.name,
            ptr,
            bytes: self.batch_len * layout.device_sample_bytes(),
            shape,
            dtype: layout.device_dtype,
            stream: &res.stream,
            ready: &res.ready,
        })
    }

    /// Output `output` as a typed cudarc view of `len() × sample elements` elements
    /// (f16/bf16 outputs as `u16` bit patterns).
    pub fn view<T: DeviceElement>(&self, output: usize) -> Result<CudaView<'_, T>> {
        let (layout, buf) = self.device_buffer(output)?;
        if !T::accepts(layout.device_dtype) {
            return Err(Error::DtypeMismatch {
                output: layout.name.clone(),
                dtype: layout.device_dtype,
                requested: T::NAME,
            });
        }
        let bytes = self.batch_len * layout.device_sample_bytes();
        let len = bytes / std::mem::size_of::<T>();
        // SAFETY: `T` accepts this output's dtype, so the bytes are `len` valid `T` values
        // (every bit pattern is a valid integer or float); the buffer is 256-byte aligned by
        // the allocator and covers at least `bytes` bytes.
        unsafe { buf.transmute::<T>(len) }.ok_or_else(|| Error::InvalidOutput {
            output: layout.name.clone(),
            reason: format!("view of {bytes} bytes exceeds the buffer"),
        })
    }

    /// A host copy of output `output` (the device bytes: CHW elements for images), made on
    /// the slot stream after the batch's own work; for checks and CPU consumers.
    pub fn copy_to_host(&self, output: usize) -> Result<Vec<u8>> {
        let (layout, buf) = self.device_buffer(output)?;
        let res = self.res()?;
        let bytes = self.batch_len * layout.device_sample_bytes();
        let view = buf.try_slice(..bytes).ok_or_else(|| Error::InvalidOutput {
            output: layout.name.clone(),
            reason: format!("view of {bytes} bytes exceeds the buffer"),
        })?;
        let mut out = vec![0u8; bytes];
        res.stream
            .memcpy_dtoh(&view, &mut out)
            .map_err(driver(format!(
                "copying {:?} back to the host",
                layout.name
            )))?;
        res.stream
            .synchronize()
            .map_err(driver("waiting for a copy back to the host"))?;
        Ok(out)
    }

    /// Records the release event on the consumer stream (or on the slot stream, for a host
    /// consumer) and returns the slot to the pool. Dropping does the same, logging errors.
    pub fn release(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        let Some(res) = self.res.take() else {
            return Ok(());
        };
        let stream = self.consumer.as_ref().unwrap_or(&res.stream);
        let recorded = res.released.record(stream).map_err(driver(format!(
            "recording the release event of slot {}",
            self.slot
        )));
        if recorded.is_err() {
            // Without the event, make sure by waiting here that nothing still uses the slot.
            let _ = stream.synchronize();
            let _ = res.stream.synchronize();
        }
        self.consumer = None;
        let parked = self.stage.park(self.slot, res, SlotTable::release);
        recorded.and(parked)
    }
}

impl Drop for StagedBatch {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::error!(error = %e, slot = self.slot, "gpu stage: releasing a batch");
        }
    }
}
