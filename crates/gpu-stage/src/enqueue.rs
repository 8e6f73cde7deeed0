//! The device work of one batch, enqueued on its slot's stream: the copies of every
//! output's first samples out of the pinned buffers, the normalize kernel of each image
//! output, and the slot's `ready` event after them. The only `unsafe` here is the kernel
//! launch.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice, PushKernelArg};

use crate::error::driver;
use crate::kernels::BLOCK_THREADS;
use crate::slot_buffers::SlotResources;
use crate::stage_state::StageInner;
use crate::{Error, Result};

/// Copies and kernels for one batch, on the slot's stream.
pub(crate) fn enqueue(
    stage: &StageInner,
    res: &mut SlotResources,
    slot: usize,
    batch_len: usize,
) -> Result<()> {
    let SlotResources {
        stream,
        ready,
        buffers,
        ..
    } = res;
    for (i, (layout, buf)) in stage.outputs.iter().zip(buffers.iter_mut()).enumerate() {
        let bytes = batch_len * layout.host_sample_bytes;
        copy_prefix(
            stream,
            &buf.host,
            &mut buf.device_in,
            bytes,
            slot,
            &layout.name,
        )?;
        let Some(img) = &layout.image else { continue };
        if let Some((host, dev)) = &mut buf.flips {
            copy_prefix(stream, host, dev, batch_len, slot, &layout.name)?;
        }
        let (Some(kernels), Some(table), Some(out)) = (
            stage.kernels.as_ref(),
            stage.tables[i].as_ref(),
            buf.device_out.as_mut(),
        ) else {
            return Err(Error::InvalidOutput {
                output: layout.name.clone(),
                reason: "image output without its kernel or table".to_owned(),
            });
        };
        let func = match layout.device_dtype.size() {
            8 => &kernels.lookup64,
            4 => &kernels.lookup32,
            _ => &kernels.lookup16,
        };
        let pixels = (batch_len * img.height * img.width) as u64;
        let blocks = pixels
            .div_ceil(u64::from(BLOCK_THREADS))
            .clamp(1, u64::from(kernels.max_blocks)) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (BLOCK_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let dims = [
            batch_len as u64,
            img.height as u64,
            img.width as u64,
            img.channels as u64,
        ];
        let null_flips: u64 = 0;
        let mut launch = stream.launch_builder(func);
        launch.arg(&buf.device_in).arg(table);
        match &buf.flips {
            Some((_, dev)) => launch.arg(dev),
            None => launch.arg(&null_flips),
        };
        launch
            .arg(&mut *out)
            .arg(&dims[0])
            .arg(&dims[1])
            .arg(&dims[2])
            .arg(&dims[3]);
        // SAFETY: the arguments match the kernel's parameters in order and type (four
        // device pointers, the flags one possibly null, then four 64-bit integers). The
        // kernel reads `batch × height × width × channels` input bytes, `batch` flags and
        // `256 × channels` table entries, and writes as many output elements: all within
        // the buffers, which were sized for `max_batch ≥ batch` samples of this layout.
        unsafe { launch.launch(cfg) }.map_err(driver(format!(
            "launching the normalize kernel of {:?}",
            layout.name
        )))?;
    }
    ready
        .record(stream)
        .map_err(driver(format!("recording the ready event of slot {slot}")))
}

/// Asynchronous copy of the first `bytes` bytes of a pinned buffer to a device buffer.
fn copy_prefix(
    stream: &Arc<CudaStream>,
    host: &PinnedHostSlice<u8>,
    device: &mut CudaSlice<u8>,
    bytes: usize,
    slot: usize,
    output: &str,
) -> Result<()> {
    let src = host
        .as_slice()
        .map_err(driver(format!("mapping host buffer of slot {slot}")))?;
    let (Some(src), Some(mut dst)) = (src.get(..bytes), device.try_slice_mut(..bytes)) else {
        return Err(Error::InvalidOutput {
            output: output.to_owned(),
            reason: format!("copy of {bytes} bytes exceeds the slot buffers"),
        });
    };
    // The source is page-locked, so this is a true asynchronous DMA: the slot protocol (no
    // host write before the release event) keeps the bytes stable until it has run.
    stream.memcpy_htod(src, &mut dst).map_err(driver(format!(
        "copying {output:?} of slot {slot} to the device"
    )))
}
