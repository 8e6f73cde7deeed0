//! Stages batches from pinned host memory onto a CUDA device, FFCV-style: one stream per
//! slot, events guarding every reuse, and an NVRTC-compiled kernel that turns u8 HWC images
//! into normalized f64/f32/f16/bf16 CHW on the device.
//!
//! # Overview
//!
//! - [`Device`] opens a CUDA device after checking that the driver library is present
//!   ([`driver_available`]): on a machine without CUDA every entry point returns
//!   [`Error::NoDriver`] or [`Error::NoDevice`] instead of panicking. [`DeviceSpec`] parses
//!   `--device cuda:N`.
//! - [`Stage`] is built once per loader from a [`StageConfig`]: `batches_ahead + 2` slots,
//!   each with pinned host buffers (flags 0: cached, so the CPU pipeline writes at full
//!   speed), device buffers, its own stream and two events. Nothing is allocated per batch or
//!   per epoch, so device memory stays flat.
//! - [`Stage::acquire`] lends a [`FillingSlot`]: the producer writes its host buffers, then
//!   [`FillingSlot::to_device`] enqueues the copies and kernels on the slot's stream and
//!   returns a [`StagedBatch`] with [`DeviceTensor`] views (address, shape, dtype, stream,
//!   ready event). The consumer makes its stream wait on the batch
//!   ([`StagedBatch::wait_on`]) or waits on the host ([`StagedBatch::synchronize`]); dropping
//!   the batch records a release event on the consumer's stream, and the slot is handed out
//!   again only once that event has completed. The [`SlotTable`] is that life cycle, free of
//!   CUDA.
//! - [`DeviceOutputKind::Image`] outputs run the fused kernel ([`KERNEL_SOURCE`], compiled once per
//!   stage): layout change, per-channel normalize via a 256-entry table computed in f64 as
//!   FFCV's `NormalizeImage` does, and an optional per-sample horizontal flip.
//!   [`normalize_reference`] is the same computation on the CPU, bit for bit.
//!
//! # Example
//!
//! Stage a batch of labels and RGB images, normalized to f16 on the device; without a CUDA
//! device it says so and stops:
//!
//! ```
//! use gpu_stage::{Device, DeviceSpec, DeviceDtype, Normalize, OutputSpec, Stage, StageConfig};
//!
//! # fn main() -> Result<(), gpu_stage::Error> {
//! let spec: DeviceSpec = "cuda:0".parse()?;
//! let device = match Device::from_spec(spec) {
//!     Ok(device) => device,
//!     Err(e @ (gpu_stage::Error::NoDriver | gpu_stage::Error::NoDevice { .. })) => {
//!         println!("skipped: {e}");
//!         return Ok(());
//!     }
//!     Err(e) => return Err(e),
//! };
//! let stage = Stage::new(
//!     &device,
//!     StageConfig {
//!         max_batch: 8,
//!         batches_ahead: 2,
//!         outputs: vec![
//!             OutputSpec::raw("label", DeviceDtype::I64, &[]),
//!             OutputSpec::image("image", 32, 32, Normalize::imagenet(DeviceDtype::F16), true),
//!         ],
//!     },
//! )?;
//! let consumer = device.new_stream()?;
//!
//! let mut slot = stage.acquire()?;
//! for (i, label) in slot.host_mut(0)?.chunks_exact_mut(8).enumerate() {
//!     label.copy_from_slice(&(i as i64).to_le_bytes());
//! }
//! slot.host_mut(1)?.fill(128); // the CPU pipeline's decoded HWC pixels
//! slot.flips_mut(1)?.fill(0);
//! let mut batch = slot.to_device(8)?;
//!
//! batch.wait_on(&consumer)?; // the consumer stream waits for the copy and the kernel
//! let images = batch.tensor(1)?;
//! assert_eq!(images.shape, [8, 3, 32, 32]);
//! assert_eq!(images.dtype, DeviceDtype::F16);
//! // ... enqueue work reading `images.ptr` on `consumer`, then:
//! drop(batch); // records the release event on `consumer`
//! # Ok(())
//! # }
//! ```
//!
//! # Running on a GPU host
//!
//! The driver library (`libcuda.so.1`) must be on the loader path (it is wherever the NVIDIA
//! driver is installed). NVRTC (`libnvrtc.so.13` for CUDA 13) is needed only for image
//! outputs; it is looked up on `LD_LIBRARY_PATH`, then under `$CUDA_HOME/lib64`,
//! `$CUDA_PATH/lib64` and `/usr/local/cuda*/lib64`. `examples/gpu_checks.rs` runs the
//! crate-level checks on a GPU.

mod device;
mod device_element;
mod dtype;
mod enqueue;
mod error;
mod filling_slot;
mod kernels;
mod library;
mod normalize;
mod slot_buffers;
mod slot_state;
mod slot_table;
mod spec;
mod stage;
mod stage_config;
mod stage_state;
mod staged_batch;

pub use cudarc;
pub use device::{Device, MemInfo};
pub use device_element::DeviceElement;
pub use dtype::{
    DeviceDtype, bf16_bits_to_f64, f16_bits_to_f64, f64_to_bf16_bits, f64_to_f16_bits,
};
pub use error::{Error, Result};
pub use filling_slot::FillingSlot;
pub use kernels::KERNEL_SOURCE;
pub use library::{driver_available, nvrtc_available};
pub use normalize::{ImageShape, MAX_CHANNELS, Normalize, NormalizeTable, normalize_reference};
pub use slot_state::SlotState;
pub use slot_table::{Acquired, SlotTable};
pub use spec::DeviceSpec;
pub use stage::Stage;
pub use stage_config::{DeviceOutputInfo, DeviceOutputKind, OutputSpec, StageConfig};
pub use staged_batch::{DeviceTensor, StagedBatch};
