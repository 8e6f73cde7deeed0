//! A slot's resources: one output's pinned host buffer, device buffers and flip flags
//! ([`SlotBuffers`]), and the slot's stream, events and buffers together
//! ([`SlotResources`]), with their one-time allocation. The only `unsafe` here is the
//! pinned allocation.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, PinnedHostSlice};

use crate::error::driver;
use crate::stage_config::OutputLayout;
use crate::{Device, Result};

/// One output's buffers in one slot.
#[derive(Debug)]
pub(crate) struct SlotBuffers {
    /// Pinned host buffer the producer writes (flags 0: cached, not write-combined, so the
    /// CPU pipeline can also read what it wrote at full speed).
    pub(crate) host: PinnedHostSlice<u8>,
    /// The copy's destination: the output itself (raw) or the kernel's u8 input (image).
    pub(crate) device_in: CudaSlice<u8>,
    /// Per-sample flip flags, host and device (images built with `flip`).
    pub(crate) flips: Option<(PinnedHostSlice<u8>, CudaSlice<u8>)>,
    /// The kernel's output (images).
    pub(crate) device_out: Option<CudaSlice<u8>>,
}

/// A slot's stream, events and buffers; owned by the pool, a [`FillingSlot`] or a
/// [`StagedBatch`], never two at once.
///
/// [`FillingSlot`]: crate::FillingSlot
/// [`StagedBatch`]: crate::StagedBatch
#[derive(Debug)]
pub(crate) struct SlotResources {
    /// The stream the slot's copies and kernels run on.
    pub(crate) stream: Arc<CudaStream>,
    /// Recorded after the copies and kernels of the slot's batch.
    pub(crate) ready: CudaEvent,
    /// Recorded on the consumer's stream when the batch is released.
    pub(crate) released: CudaEvent,
    /// One entry per output, in the stage's order.
    pub(crate) buffers: Vec<SlotBuffers>,
}

impl SlotResources {
    /// Allocates one slot for `outputs` of `max_batch` samples: its stream, its two
    /// events, and every buffer zeroed (so that no uninitialised byte is ever copied).
    pub(crate) fn allocate(
        device: &Device,
        outputs: &[OutputLayout],
        max_batch: usize,
    ) -> Result<SlotResources> {
        let ctx = device.context();
        let stream = device.new_stream()?;
        let new_event = || ctx.new_event(None).map_err(driver("creating a slot event"));
        let (ready, released) = (new_event()?, new_event()?);
        let pinned = |len: usize| -> Result<PinnedHostSlice<u8>> {
            // SAFETY: flags 0 asks for ordinary cached page-locked memory. The memory is
            // uninitialised until the `fill(0)` below, and nothing reads it before then.
            let mut host = unsafe { ctx.alloc_pinned_with_flags::<u8>(len, 0) }.map_err(driver(
                format!("allocating {len} bytes of pinned host memory"),
            ))?;
            host.as_mut_slice()
                .map_err(driver("mapping pinned host memory"))?
                .fill(0);
            Ok(host)
        };
        let device_zeros = |len: usize| {
            stream
                .alloc_zeros::<u8>(len)
                .map_err(driver(format!("allocating {len} bytes of device memory")))
        };
        let mut buffers = Vec::with_capacity(outputs.len());
        for o in outputs {
            let host_bytes = o.host_sample_bytes * max_batch;
            let image = o.image.as_ref();
            buffers.push(SlotBuffers {
                host: pinned(host_bytes)?,
                device_in: device_zeros(host_bytes)?,
                flips: match image {
                    Some(img) if img.flip => Some((pinned(max_batch)?, device_zeros(max_batch)?)),
                    _ => None,
                },
                device_out: match image {
                    Some(_) => Some(device_zeros(o.device_sample_bytes() * max_batch)?),
                    None => None,
                },
            });
        }
        // Zeroing was enqueued on the slot stream; finish it before the slot is used.
        stream
            .synchronize()
            .map_err(driver("initialising slot buffers"))?;
        Ok(SlotResources {
            stream,
            ready,
            released,
            buffers,
        })
    }
}

/// Device bytes one slot of `outputs` for `max_batch` samples holds (inputs, outputs and
/// flags).
pub(crate) fn slot_device_bytes(outputs: &[OutputLayout], max_batch: usize) -> usize {
    outputs
        .iter()
        .map(|o| {
            let input = o.host_sample_bytes * max_batch;
            match &o.image {
                None => input,
                Some(img) => {
                    input
                        + o.device_sample_bytes() * max_batch
                        + if img.flip { max_batch } else { 0 }
                }
            }
        })
        .sum()
}
