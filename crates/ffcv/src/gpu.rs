//! `ToDevice`: the loader's GPU stage (FFCV's non-JIT stage after the CPU pipelines), built
//! on [`gpu_stage::Stage`].
//!
//! # How it fits the loader
//!
//! [`GpuStage`] is both the loader's [`SlotAllocator`] and its [`SlotStage`]:
//!
//! - **Allocator.** Every loader slot is bound to one slot of the [`gpu_stage::Stage`]: the
//!   loader's output buffers *are* that slot's pinned host buffers (page-locked, flags 0, so
//!   the CPU pipeline writes them at full speed), so there is no host copy between the CPU
//!   pipeline and the DMA. The loader asks for a slot's buffers output by output, in order;
//!   the first request of a slot binds a fresh stage slot, the others hand out its other
//!   buffers.
//! - **Reuse guard.** Before the producer writes a slot again, it must know that the
//!   consumer's GPU work on the slot's previous batch has completed. The first write access
//!   of a fill ([`SlotMemory::as_bytes_mut`], which the producer calls before decoding into a
//!   buffer) takes the bound stage slot back from the stage, which waits on that slot's
//!   release event, on the producer thread, as FFCV does.
//! - **Stage.** After the CPU pipelines, [`SlotStage::process`] enqueues the H2D copies (and
//!   the fused u8 HWC → float CHW normalize kernel, plus a per-sample horizontal flip if
//!   asked) on the slot's own stream and attaches a [`GpuBatch`] to the loader's batch
//!   ([`crate::Batch::attachment`]): device tensors (address, shape, dtype), the slot's
//!   stream and ready event. Dropping the batch records the release event on the consumer's
//!   stream (the one given to [`GpuBatch::wait_on`]; the slot's stream otherwise).
//!
//! Everything (slots, streams, events, the NVRTC kernels, the lookup tables) is created once
//! per loader, so device memory stays flat across epochs.
//!
//! # Example
//!
//! ```
//! use ffcv::gpu::{DeviceSpec, GpuBatch, ToDevice};
//! use ffcv::Loader;
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/ffcv-1.0.2/scalars.beton");
//! let built = Loader::builder(path)
//!     .batch_size(32)
//!     .to_device(ToDevice::new(DeviceSpec::Cuda(0)))
//!     .build();
//! let mut loader = match built {
//!     Ok(loader) => loader,
//!     Err(e) => {
//!         // Without CUDA: "... cuda:0: no CUDA driver found ...".
//!         println!("skipped: {e}");
//!         return;
//!     }
//! };
//! for batch in &mut loader {
//!     let batch = batch.unwrap();
//!     let gpu = batch.attachment::<GpuBatch>().unwrap();
//!     gpu.synchronize().unwrap(); // or gpu.wait_on(&consumer_stream)
//!     let index = gpu.tensor("index").unwrap();
//!     assert_eq!(index.shape, vec![32, 1]);
//! }
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use gpu_stage::cudarc::driver::{CudaEvent, CudaStream, sys};
use gpu_stage::{Device, FillingSlot, OutputSpec, Stage, StageConfig, StagedBatch};
use rand_core::{RngCore, SeedableRng};

pub use gpu_stage::{self, DeviceDtype, DeviceSpec, Normalize};

use crate::batch::OutputInfo;
use crate::batch_slots::{Attachment, SlotOutput, SlotStage};
use crate::memory::{SlotAllocator, SlotMemory};

/// What the loader's `ToDevice` stage does: the device, and which image outputs are
/// normalized (and flipped) on it. Every other output is copied as it is.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToDevice {
    /// The device (`cpu` means no GPU stage at all).
    pub device: DeviceSpec,
    /// Image outputs normalized on the device, by field name.
    pub images: Vec<(String, ImageOnDevice)>,
}

/// How one u8 `[H, W, C]` output becomes `[C, H, W]` floats on the device.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageOnDevice {
    /// Per-channel mean/std (u8 units) and the output type (f64, f32, f16 or bf16).
    pub normalize: Normalize,
    /// Mirror each sample left-right with probability 1/2 on the device (leave `false` when
    /// the CPU pipeline already flips). The draws come from the loader's seed and a batch
    /// counter, not from FFCV's per-sample generators; [`GpuBatch::flips`] says which
    /// samples were flipped.
    pub flip: bool,
}

impl ToDevice {
    /// Copies every output to `device` as it is.
    pub fn new(device: DeviceSpec) -> Self {
        ToDevice {
            device,
            images: Vec::new(),
        }
    }

    /// Normalizes the u8 HWC image output `field` on the device to CHW (fused with an
    /// optional flip).
    pub fn normalize(mut self, field: impl Into<String>, normalize: Normalize, flip: bool) -> Self {
        let field = field.into();
        self.images.retain(|(f, _)| *f != field);
        self.images.push((field, ImageOnDevice { normalize, flip }));
        self
    }
}

/// Why a GPU stage could not be built for a loader's outputs.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// The device or the stage failed (no driver, no device, NVRTC, allocation...).
    #[error("{device}: {source}")]
    Stage {
        /// The device asked for.
        device: DeviceSpec,
        /// What gpu-stage said.
        #[source]
        source: gpu_stage::Error,
    },
    /// An output cannot be staged as configured.
    #[error("{device}: output {output:?}: {reason}")]
    Output {
        /// The device asked for.
        device: DeviceSpec,
        /// The output (field) name.
        output: String,
        /// What is wrong.
        reason: String,
    },
}

/// A device view of one output of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuTensor {
    /// The output's name (the field).
    pub name: String,
    /// Device address of the first element.
    pub ptr: sys::CUdeviceptr,
    /// `[B, ...]`: the loader's row shape for copied outputs, `[B, C, H, W]` for
    /// normalized images.
    pub shape: Vec<usize>,
    /// Element type on the device (`U8` for outputs whose numpy type gpu-stage has no name
    /// for; their shape then ends with the item size).
    pub dtype: DeviceDtype,
    /// Bytes the view covers.
    pub bytes: usize,
}

/// What a GPU stage has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuStats {
    /// Batches staged.
    pub batches: u64,
    /// Bytes copied host → device.
    pub h2d_bytes: u64,
    /// Batches whose device time was measured (all but the first batch of each slot,
    /// whose stream was not known yet).
    pub timed_batches: u64,
    /// Bytes copied by the timed batches.
    pub timed_h2d_bytes: u64,
    /// Device time of the timed batches' copies and kernels: the union of their intervals,
    /// measured with CUDA events on the slot streams against one reference event. Copies of
    /// different slots that overlap in time count once (they share one copy engine, so
    /// summing each copy's own duration would count the shared time twice); an interval
    /// folded out of order may still be counted twice, so the throughput it gives is never
    /// overstated.
    pub device_time: Duration,
}

impl GpuStats {
    /// H2D throughput of the timed batches in bytes per second (copies and kernels).
    pub fn h2d_bytes_per_sec(&self) -> Option<f64> {
        let secs = self.device_time.as_secs_f64();
        (secs > 0.0).then(|| self.timed_h2d_bytes as f64 / secs)
    }
}

/// One loader output as the stage handles it.
#[derive(Debug)]
struct Planned {
    name: String,
    /// Bytes of the loader's slot buffer (`batch_size * row_bytes`).
    slot_bytes: usize,
    row_bytes: usize,
    flip: bool,
}

/// Device time measurement of one stage slot: events with timing, recorded around the copy.
#[derive(Debug)]
struct SlotTimer {
    start: CudaEvent,
    end: CudaEvent,
    /// Bytes of the batch being timed, until it is folded into the stats.
    pending: Option<u64>,
}

/// One stage slot bound to one loader slot.
#[derive(Debug)]
struct Bound {
    /// Address of each output's pinned host buffer (the loader slot's buffers).
    ptrs: Vec<usize>,
    /// The stage slot, while the producer owns it.
    filling: Option<FillingSlot>,
    /// Why taking the slot back failed (reported by the next `process`).
    error: Option<String>,
    /// The slot's stream, known once a batch was staged in it.
    stream: Option<Arc<CudaStream>>,
    timer: Option<SlotTimer>,
}

#[derive(Debug, Default)]
struct Registry {
    /// By stage slot index: the binding, if a loader slot owns that stage slot.
    bound: Vec<Option<Bound>>,
    /// The binding whose buffers the loader is asking for, and how many it got.
    building: Option<(Arc<Binding>, usize)>,
    /// Stage slots taken from the stage but bound to no loader slot.
    spare: Vec<FillingSlot>,
    stats: GpuStats,
    /// Where the union of timed intervals ends, in ms after `Inner::clock`.
    covered_until_ms: f64,
}

#[derive(Debug)]
struct Inner {
    spec: DeviceSpec,
    device: Device,
    stage: Stage,
    outputs: Vec<Planned>,
    seed: u64,
    batch_counter: AtomicU64,
    reg: Mutex<Registry>,
    /// A reference event recorded (and completed) when the stage was built: the zero of the
    /// timed intervals, so that overlapping copies of different slots count once.
    clock: Option<CudaEvent>,
}

/// The loader's GPU stage: pinned slot buffers and the copy (and normalize) to a CUDA
/// device. Built by [`crate::LoaderBuilder::build`] when a device is set
/// ([`crate::LoaderBuilder::device`], [`crate::LoaderBuilder::to_device`]); cheap to clone.
#[derive(Debug, Clone)]
pub struct GpuStage {
    inner: Arc<Inner>,
}

fn lock(m: &Mutex<Registry>) -> MutexGuard<'_, Registry> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// gpu-stage's element type for a loader output's numpy type, if it has one.
fn stage_dtype(info: &OutputInfo) -> Option<DeviceDtype> {
    let t = crate::decode::pipeline_dtype(&info.dtype)?;
    Some(match t {
        pipeline_jit::ElemType::U8 => DeviceDtype::U8,
        pipeline_jit::ElemType::I32 => DeviceDtype::I32,
        pipeline_jit::ElemType::I64 => DeviceDtype::I64,
        pipeline_jit::ElemType::F16 => DeviceDtype::F16,
        pipeline_jit::ElemType::F32 => DeviceDtype::F32,
        pipeline_jit::ElemType::F64 => DeviceDtype::F64,
        // No device kernel takes 16-bit samples: such outputs stay on the host.
        pipeline_jit::ElemType::U16 => return None,
    })
}

impl GpuStage {
    /// Opens the device and builds the stage for a loader's `outputs` (`batch_size`
    /// samples per slot, `batches_ahead + 2` slots). `seed` drives on-device flips.
    pub fn new(
        to_device: &ToDevice,
        outputs: &[OutputInfo],
        batch_size: usize,
        batches_ahead: usize,
        seed: u64,
    ) -> Result<GpuStage, GpuError> {
        let spec = to_device.device;
        let bad = |output: &str, reason: String| GpuError::Output {
            device: spec,
            output: output.to_owned(),
            reason,
        };
        for (name, _) in &to_device.images {
            if !outputs.iter().any(|o| &o.name == name) {
                let names: Vec<&str> = outputs.iter().map(|o| o.name.as_str()).collect();
                return Err(bad(
                    name,
                    format!("no such output (the batches have: {})", names.join(", ")),
                ));
            }
        }
        let mut specs = Vec::with_capacity(outputs.len());
        let mut planned = Vec::with_capacity(outputs.len());
        for o in outputs {
            let image = to_device.images.iter().find(|(f, _)| *f == o.name);
            let (spec_o, flip) = match image {
                Some((_, img)) => {
                    let (h, w, c) = match (stage_dtype(o), o.shape.as_slice()) {
                        (Some(DeviceDtype::U8), &[h, w, c]) => (h, w, c),
                        _ => {
                            return Err(bad(
                                &o.name,
                                format!(
                                    "normalizing on the device needs u8 [H, W, C] rows, not {} {:?}",
                                    o.dtype.descr(),
                                    o.shape
                                ),
                            ));
                        }
                    };
                    if img.normalize.mean.len() != c {
                        return Err(bad(
                            &o.name,
                            format!(
                                "{c} channels but {} normalize means",
                                img.normalize.mean.len()
                            ),
                        ));
                    }
                    (
                        OutputSpec::image(&o.name, h, w, img.normalize.clone(), img.flip),
                        img.flip,
                    )
                }
                None => {
                    let spec_o = match stage_dtype(o) {
                        Some(d) => OutputSpec::raw(&o.name, d, &o.shape),
                        // Types gpu-stage has no name for travel as bytes.
                        None => OutputSpec::raw(&o.name, DeviceDtype::U8, &[o.row_bytes]),
                    };
                    (spec_o, false)
                }
            };
            specs.push(spec_o);
            planned.push(Planned {
                name: o.name.clone(),
                slot_bytes: o.row_bytes.checked_mul(batch_size).ok_or_else(|| {
                    bad(
                        &o.name,
                        format!("{batch_size} rows of {} bytes overflow", o.row_bytes),
                    )
                })?,
                row_bytes: o.row_bytes,
                flip,
            });
        }
        let config = StageConfig {
            max_batch: batch_size,
            batches_ahead,
            outputs: specs,
        };
        let stage_err = |source| GpuError::Stage {
            device: spec,
            source,
        };
        // Check shapes before touching the driver, so that a bad configuration is reported
        // as such on any machine.
        let infos = config.validate().map_err(stage_err)?;
        for (info, p) in infos.iter().zip(&planned) {
            if info.host_sample_bytes != p.row_bytes {
                return Err(bad(
                    &p.name,
                    format!(
                        "the stage holds {} bytes per sample, the loader writes {}",
                        info.host_sample_bytes, p.row_bytes
                    ),
                ));
            }
        }
        let device = Device::from_spec(spec).map_err(stage_err)?;
        let stage = Stage::new(&device, config).map_err(stage_err)?;
        let clock = reference_event(&device);
        tracing::debug!(
            device = %spec,
            slots = stage.num_slots(),
            slot_device_bytes = stage.slot_device_bytes(),
            "gpu stage built"
        );
        Ok(GpuStage {
            inner: Arc::new(Inner {
                spec,
                device,
                stage,
                outputs: planned,
                seed,
                batch_counter: AtomicU64::new(0),
                reg: Mutex::new(Registry::default()),
                clock,
            }),
        })
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// The device as given (`cuda:N`).
    pub fn spec(&self) -> DeviceSpec {
        self.inner.spec
    }

    /// The gpu-stage [`Stage`] underneath (slot states, normalize tables, outputs).
    pub fn stage(&self) -> &Stage {
        &self.inner.stage
    }

    /// Counters and device time of every batch staged so far (waits for the copies still
    /// in flight, so that their times count).
    pub fn stats(&self) -> GpuStats {
        let mut reg = lock(&self.inner.reg);
        let Registry {
            bound,
            stats,
            covered_until_ms,
            ..
        } = &mut *reg;
        for b in bound.iter_mut().flatten() {
            if let Some(t) = &mut b.timer {
                fold_timer(t, stats, self.inner.clock.as_ref(), covered_until_ms);
            }
        }
        *stats
    }
}

/// An event with timing recorded on a fresh stream and completed: the zero of the stage's
/// device clock. `None` (each batch then timed alone) if the driver refuses.
fn reference_event(device: &Device) -> Option<CudaEvent> {
    let event = device
        .context()
        .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        .ok()?;
    let stream = device.new_stream().ok()?;
    event.record(&stream).ok()?;
    event.synchronize().ok()?;
    Some(event)
}

/// Adds a finished timed batch to the stats: the part of its interval (copy and kernels,
/// in ms after `clock`) not already covered by earlier batches.
fn fold_timer(
    t: &mut SlotTimer,
    stats: &mut GpuStats,
    clock: Option<&CudaEvent>,
    covered_until_ms: &mut f64,
) {
    let Some(bytes) = t.pending.take() else {
        return;
    };
    let interval = match clock {
        Some(clock) => clock.elapsed_ms(&t.start).and_then(|start| {
            clock
                .elapsed_ms(&t.end)
                .map(|end| (f64::from(start), f64::from(end)))
        }),
        // No reference event: the batch's own duration.
        None => t.start.elapsed_ms(&t.end).map(|ms| (0.0, f64::from(ms))),
    };
    match interval {
        Ok((start, end)) if start.is_finite() && end.is_finite() && end >= start => {
            let busy = if clock.is_none() {
                end - start
            } else {
                let busy = (end - start.max(*covered_until_ms)).max(0.0);
                *covered_until_ms = covered_until_ms.max(end);
                busy
            };
            stats.timed_batches += 1;
            stats.timed_h2d_bytes += bytes;
            stats.device_time += Duration::from_secs_f64(busy / 1e3);
        }
        Ok(_) => {}
        Err(e) => tracing::debug!(error = %e, "gpu stage: reading a copy timer"),
    }
}

impl Inner {
    /// A stage slot no loader slot is bound to, for a new binding.
    fn take_unbound(&self, reg: &mut Registry) -> Result<FillingSlot, gpu_stage::Error> {
        if let Some(f) = reg.spare.pop() {
            return Ok(f);
        }
        loop {
            let f = self.stage.acquire()?;
            let s = f.slot();
            match reg.bound.get_mut(s) {
                Some(Some(b)) => {
                    // Bound to a loader slot that the loader holds free: keep it for it.
                    b.filling = Some(f);
                }
                _ => return Ok(f),
            }
        }
    }

    /// Takes stage slot `s` back from the stage for its loader slot, waiting (in
    /// `Stage::acquire`) for the consumer's work on its previous batch.
    fn claim(&self, reg: &mut Registry, s: usize) -> Result<(), String> {
        if reg
            .bound
            .get(s)
            .and_then(Option::as_ref)
            .is_some_and(|b| b.filling.is_some())
        {
            return Ok(());
        }
        match self.stage.slot_states().get(s) {
            Some(gpu_stage::SlotState::Free | gpu_stage::SlotState::Releasing) => {}
            other => {
                return Err(format!(
                    "gpu stage slot {s} is {other:?}: its loader slot is written while its \
                     batch is still staged"
                ));
            }
        }
        // Only the producer acquires, under the registry lock, so slot `s` stays available
        // until the loop reaches it; every slot taken on the way goes to its own binding.
        loop {
            let f = self.stage.acquire().map_err(|e| e.to_string())?;
            let got = f.slot();
            if got == s {
                if let Some(Some(b)) = reg.bound.get_mut(s) {
                    b.filling = Some(f);
                }
                return Ok(());
            }
            match reg.bound.get_mut(got) {
                Some(Some(b)) => b.filling = Some(f),
                _ => reg.spare.push(f),
            }
        }
    }

    /// Called by the producer's first write access to a slot buffer of stage slot `s`.
    fn prepare_write(&self, s: usize) {
        let mut reg = lock(&self.reg);
        if let Err(e) = self.claim(&mut reg, s) {
            tracing::error!(slot = s, error = %e, "gpu stage: taking a slot back");
            if let Some(Some(b)) = reg.bound.get_mut(s) {
                b.error.get_or_insert(e);
            }
        }
    }

    /// The flags for one batch's flipped outputs: half of the samples, drawn from the
    /// seed and the batch counter.
    fn draw_flips(&self, n: usize) -> Vec<u8> {
        let batch = self.batch_counter.fetch_add(1, Ordering::Relaxed);
        let mut z = self.seed ^ batch.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(z ^ (z >> 31));
        (0..n).map(|_| (rng.next_u32() >> 31) as u8).collect()
    }
}

/// Ties a loader slot's buffers to their stage slot; dropping the last buffer unbinds it.
#[derive(Debug)]
struct Binding {
    inner: Arc<Inner>,
    slot: usize,
}

impl Drop for Binding {
    fn drop(&mut self) {
        let taken = lock(&self.inner.reg)
            .bound
            .get_mut(self.slot)
            .and_then(Option::take);
        // Dropping a held `FillingSlot` returns it to the stage (outside the registry lock).
        drop(taken);
    }
}

impl SlotAllocator for GpuStage {
    fn allocate(&self, bytes: usize) -> std::io::Result<Box<dyn SlotMemory>> {
        let inner = &self.inner;
        let mut reg = lock(&inner.reg);
        let (binding, index) = match reg.building.take() {
            Some(b) => b,
            None => {
                let mut f = inner
                    .take_unbound(&mut reg)
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                let mut ptrs = Vec::with_capacity(inner.outputs.len());
                for i in 0..inner.outputs.len() {
                    let host = f
                        .host_mut(i)
                        .map_err(|e| std::io::Error::other(e.to_string()))?;
                    ptrs.push(host.as_mut_ptr() as usize);
                }
                let s = f.slot();
                if reg.bound.len() <= s {
                    reg.bound.resize_with(s + 1, || None);
                }
                let timer = match (
                    inner
                        .device
                        .context()
                        .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)),
                    inner
                        .device
                        .context()
                        .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)),
                ) {
                    (Ok(start), Ok(end)) => Some(SlotTimer {
                        start,
                        end,
                        pending: None,
                    }),
                    _ => None,
                };
                reg.bound[s] = Some(Bound {
                    ptrs,
                    filling: Some(f),
                    error: None,
                    stream: None,
                    timer,
                });
                (
                    Arc::new(Binding {
                        inner: Arc::clone(inner),
                        slot: s,
                    }),
                    0,
                )
            }
        };
        let planned = inner.outputs.get(index);
        let Some(planned) = planned.filter(|p| p.slot_bytes == bytes) else {
            drop(reg);
            // `binding` drops here, unbinding the half-built slot.
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "gpu stage: a slot buffer of {bytes} bytes was asked for output {index}, the \
                     stage was built for {:?} (outputs must keep their shapes: rebuild the \
                     loader instead of recompile with a GPU stage)",
                    planned.map(|p| (&p.name, p.slot_bytes))
                ),
            ));
        };
        let s = binding.slot;
        let ptr = reg.bound[s].as_ref().map_or(0, |b| b.ptrs[index]);
        if index + 1 < inner.outputs.len() {
            reg.building = Some((Arc::clone(&binding), index + 1));
        }
        drop(reg);
        Ok(Box::new(PinnedSlot {
            binding,
            ptr,
            len: planned.slot_bytes,
        }))
    }
}

impl SlotStage for GpuStage {
    fn process(
        &self,
        _slot: usize,
        outputs: &mut [SlotOutput<'_>],
    ) -> Result<Option<Attachment>, crate::ExtensionError> {
        let inner = &self.inner;
        let Some(first) = outputs.first() else {
            return Err("gpu stage: a batch without outputs".to_owned().into());
        };
        let n = first.samples;
        let addr = first.bytes.as_ptr() as usize;
        let mut reg = lock(&inner.reg);
        let Some(s) = reg
            .bound
            .iter()
            .position(|b| b.as_ref().is_some_and(|b| b.ptrs.first() == Some(&addr)))
        else {
            return Err("gpu stage: the batch's buffers were not allocated by this stage".into());
        };
        if let Some(e) = reg.bound[s].as_mut().and_then(|b| b.error.take()) {
            return Err(e.into());
        }
        inner.claim(&mut reg, s)?;
        let Registry {
            bound,
            stats,
            covered_until_ms,
            ..
        } = &mut *reg;
        let Some(b) = bound[s].as_mut() else {
            return Err(format!("gpu stage slot {s} lost its binding").into());
        };
        let Some(mut filling) = b.filling.take() else {
            return Err(format!("gpu stage slot {s} is not held by the producer").into());
        };
        let mut flips = vec![Vec::new(); inner.outputs.len()];
        for (i, p) in inner.outputs.iter().enumerate() {
            if p.flip {
                let drawn = inner.draw_flips(n);
                let host = filling.flips_mut(i).map_err(|e| e.to_string())?;
                host[..n].copy_from_slice(&drawn);
                flips[i] = drawn;
            }
        }
        let bytes: u64 = inner.outputs.iter().map(|p| (p.row_bytes * n) as u64).sum();
        // Time the copy on the slot's stream when the stream is known (from its first batch).
        let timed = match (&b.stream, &mut b.timer) {
            (Some(stream), Some(t)) => {
                fold_timer(t, stats, inner.clock.as_ref(), covered_until_ms);
                t.start.record(stream).is_ok()
            }
            _ => false,
        };
        let staged = filling.to_device(n).map_err(|e| e.to_string())?;
        let stream = staged.stream().map_err(|e| e.to_string())?.clone();
        if timed
            && let Some(t) = &mut b.timer
            && t.end.record(&stream).is_ok()
        {
            t.pending = Some(bytes);
        }
        b.stream = Some(stream);
        stats.batches += 1;
        stats.h2d_bytes += bytes;
        drop(reg);
        let mut tensors = Vec::with_capacity(inner.outputs.len());
        for i in 0..inner.outputs.len() {
            let t = staged.tensor(i).map_err(|e| e.to_string())?;
            tensors.push(GpuTensor {
                name: t.name.to_owned(),
                ptr: t.ptr,
                shape: t.shape,
                dtype: t.dtype,
                bytes: t.bytes,
            });
        }
        Ok(Some(Box::new(GpuBatch {
            staged: Mutex::new(staged),
            tensors,
            flips,
            stage: self.clone(),
        })))
    }
}

/// What a GPU stage attaches to each batch ([`crate::Batch::attachment`]): the batch on the
/// device. Make your stream wait on it ([`GpuBatch::wait_on`]) or wait on the host
/// ([`GpuBatch::synchronize`]) before reading the tensors; drop the loader's batch after
/// enqueuing the last work that reads them.
#[derive(Debug)]
pub struct GpuBatch {
    staged: Mutex<StagedBatch>,
    tensors: Vec<GpuTensor>,
    flips: Vec<Vec<u8>>,
    stage: GpuStage,
}

impl GpuBatch {
    fn staged(&self) -> MutexGuard<'_, StagedBatch> {
        self.staged.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The device tensors, in output order.
    pub fn tensors(&self) -> &[GpuTensor] {
        &self.tensors
    }

    /// The device tensor of output `name`.
    pub fn tensor(&self, name: &str) -> Option<&GpuTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The per-sample flip flags the device applied to output `name` (1 = mirrored), if it
    /// is flipped on the device.
    pub fn flips(&self, name: &str) -> Option<&[u8]> {
        let i = self.tensors.iter().position(|t| t.name == name)?;
        let f = &self.flips[i];
        (!f.is_empty()).then_some(f.as_slice())
    }

    /// Makes `consumer` wait (on the device) for the copy and kernels; the batch's release
    /// event will then be recorded on `consumer` when the batch drops.
    pub fn wait_on(&self, consumer: &Arc<CudaStream>) -> Result<(), gpu_stage::Error> {
        self.staged().wait_on(consumer)
    }

    /// Blocks until the copy and kernels are done (for a host consumer).
    pub fn synchronize(&self) -> Result<(), gpu_stage::Error> {
        self.staged().synchronize()
    }

    /// The slot's stream, on which the copy and kernels ran.
    pub fn stream(&self) -> Result<Arc<CudaStream>, gpu_stage::Error> {
        Ok(self.staged().stream()?.clone())
    }

    /// A host copy of output `name` as the device holds it (for checks).
    pub fn copy_to_host(&self, name: &str) -> Result<Vec<u8>, gpu_stage::Error> {
        let staged = self.staged();
        let i = staged.output_index(name)?;
        staged.copy_to_host(i)
    }

    /// Full access to gpu-stage's batch (typed views, the ready event).
    pub fn with_staged<R>(&self, f: impl FnOnce(&mut StagedBatch) -> R) -> R {
        f(&mut self.staged())
    }

    /// The stage that staged this batch.
    pub fn stage(&self) -> &GpuStage {
        &self.stage
    }
}

/// A loader slot buffer: one pinned host buffer of the bound stage slot.
#[derive(Debug)]
struct PinnedSlot {
    binding: Arc<Binding>,
    ptr: usize,
    len: usize,
}

impl SlotMemory for PinnedSlot {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is the start of a pinned host allocation of at least `len` bytes
        // (`max_batch × row bytes`, checked at allocation), owned by the stage slot this
        // buffer is bound to. The stage never frees or moves a slot's pinned memory while
        // it lives, and `binding` keeps the stage alive. The bytes were zeroed by the stage
        // at allocation, so they are initialised; only the loader slot that owns this value
        // writes them, through `as_bytes_mut`.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        // Before the producer writes: take the stage slot back, which waits for the
        // consumer's work on the slot's previous batch (its release event).
        self.binding.inner.prepare_write(self.binding.slot);
        // SAFETY: as in `as_bytes`; `&mut self` makes this the only reference made through
        // this buffer, and no other buffer points at the same bytes. The DMA that reads
        // them runs only between `process` and the release event, which `prepare_write`
        // has waited for.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u8, self.len) }
    }
}

/// The GPU stage of a loader being built: the allocator and stage to install, or why not.
pub(crate) fn build_for_loader(
    to_device: &ToDevice,
    outputs: &[OutputInfo],
    batch_size: usize,
    batches_ahead: usize,
    seed: u64,
) -> Result<Option<GpuStage>, GpuError> {
    if to_device.device == DeviceSpec::Cpu {
        return Ok(None);
    }
    GpuStage::new(to_device, outputs, batch_size, batches_ahead, seed).map(Some)
}
