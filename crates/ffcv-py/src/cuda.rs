//! The consumer's side of a CUDA batch exported through DLPack: the stream handshake of the
//! protocol, on raw stream handles (the consumer's stream is a plain integer, not a cudarc
//! stream). With `unsafe` for the driver calls, like [`crate::dlpack`].
//!
//! DLPack's rule: `__dlpack__(stream=s)` must make the consumer's stream `s` wait for the
//! producer's work before it returns. Here that is `cuStreamWaitEvent(s, ready)`, `ready`
//! being the event gpu-stage recorded after the batch's copies and kernels. The protocol
//! says nothing about the way back, but the loader must not refill a slot while the
//! consumer's kernels still read it: when the export's owner drops (the consumer's tensor
//! died, so its last kernels are enqueued), an event is recorded on `s` and the slot's
//! stream is made to wait for it, before the batch itself drops and gpu-stage records the
//! slot's release event on the slot stream.

use std::sync::Arc;

use ffcv::gpu::GpuBatch;
use ffcv::gpu::gpu_stage::cudarc::driver::{result, sys};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// `CU_STREAM_LEGACY`: DLPack's `stream=1` (and `None`) for CUDA.
const STREAM_LEGACY: usize = 1;
/// `CU_STREAM_PER_THREAD`: DLPack's `stream=2`.
const STREAM_PER_THREAD: usize = 2;

/// The consumer stream named by `__dlpack__`'s `stream` argument for a CUDA export:
/// `None` (no synchronisation asked, `-1`) or a stream handle. `0` is refused, as the
/// protocol says (it is ambiguous).
pub fn consumer_stream(stream: Option<i64>) -> PyResult<Option<usize>> {
    match stream {
        None => Ok(Some(STREAM_LEGACY)),
        Some(-1) => Ok(None),
        Some(0) => Err(PyValueError::new_err(
            "stream=0 is ambiguous for CUDA (DLPack): pass 1 for the legacy default stream, \
             2 for the per-thread default stream, or a stream handle",
        )),
        Some(1) => Ok(Some(STREAM_LEGACY)),
        Some(2) => Ok(Some(STREAM_PER_THREAD)),
        Some(s) if s > 0 => Ok(Some(s as usize)),
        Some(s) => Err(PyValueError::new_err(format!(
            "stream={s} is not a CUDA stream handle"
        ))),
    }
}

fn driver_err(during: &str, e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(format!("{during}: {e}"))
}

/// Makes the consumer's stream wait (on the device) until `gpu`'s copies and kernels are done.
pub fn consumer_waits(gpu: &GpuBatch, consumer: usize) -> PyResult<()> {
    let ctx = gpu.stage().device().context();
    ctx.bind_to_thread()
        .map_err(|e| driver_err("binding the loader's CUDA context", e))?;
    let ready = gpu
        .with_staged(|s| s.ready_event().map(|e| e.cu_event()))
        .map_err(|e| driver_err("the batch's ready event", e))?;
    // SAFETY: `ready` belongs to the staged batch, which `gpu` (borrowed from a batch that
    // is alive) keeps; `consumer` is a stream handle of the consumer's, which the protocol
    // makes the caller keep valid for the call (1 and 2 are the driver's own default
    // stream handles). cuStreamWaitEvent only enqueues a wait.
    unsafe {
        result::stream::wait_event(
            consumer as sys::CUstream,
            ready,
            sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
        )
    }
    .map_err(|e| driver_err("making the consumer's stream wait for the batch", e))
}

/// Makes the slot's stream wait for everything enqueued on `consumer` so far (the slot is
/// released after that). Errors fall back to waiting on the host.
fn slot_waits_for_consumer(gpu: &GpuBatch, consumer: usize) {
    let attempt = || -> Result<(), String> {
        let ctx = gpu.stage().device().context();
        ctx.bind_to_thread().map_err(|e| e.to_string())?;
        let slot_stream = gpu.stream().map_err(|e| e.to_string())?;
        let event = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(|e| e.to_string())?;
        // SAFETY: `event` was just created in the current context and is destroyed only
        // here, after the wait on it is enqueued (the driver defers freeing an event that
        // pending work still uses); `consumer` is the handle the consumer gave, whose
        // tensor has just died, and the slot stream is alive while `gpu` is.
        unsafe {
            let recorded = result::event::record(event, consumer as sys::CUstream).and_then(|_| {
                result::stream::wait_event(
                    slot_stream.cu_stream(),
                    event,
                    sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            });
            let _ = result::event::destroy(event);
            recorded.map_err(|e| e.to_string())
        }
    };
    if let Err(e) = attempt() {
        tracing::warn!(error = %e, "DLPack export: ordering the slot after the consumer's stream failed; synchronising the device");
        if let Err(e) = gpu.stage().device().context().synchronize() {
            tracing::error!(error = %e, "DLPack export: synchronising the device failed");
        }
    }
}

/// What a CUDA DLPack capsule owns: the batch (hence its slot), and the consumer stream
/// the slot must wait for before it is reused.
pub struct CudaOwner {
    /// Keeps the slot; dropped after the stream ordering below.
    pub batch: Option<Arc<ffcv::Batch>>,
    /// The consumer's stream (`None`: the consumer asked for no synchronisation).
    pub consumer: Option<usize>,
}

impl Drop for CudaOwner {
    fn drop(&mut self) {
        let Some(batch) = self.batch.take() else {
            return;
        };
        if let (Some(consumer), Some(gpu)) = (self.consumer, batch.attachment::<GpuBatch>()) {
            slot_waits_for_consumer(gpu, consumer);
        }
        drop(batch);
    }
}
