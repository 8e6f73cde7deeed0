//! The stage: slots of pinned host and device buffers, one stream and two events per slot,
//! allocated once; `acquire` → fill host buffers → `to_device` → consumer → drop.
//!
//! Ordering rules, and the event that enforces each:
//!
//! - the consumer reads a batch only after its copy and kernels: the slot's `ready` event,
//!   waited on by the consumer's stream ([`StagedBatch::wait_on`]) or the host
//!   ([`StagedBatch::synchronize`]);
//! - the producer rewrites a slot's pinned buffers, and the next copy and kernel overwrite its
//!   device buffers, only after the consumer's work on the previous batch has completed: the
//!   slot's `released` event, recorded on the consumer's stream when the batch is dropped and
//!   waited on by [`Stage::acquire`] before it hands that slot out again. Since the consumer's
//!   stream waited on `ready`, `released` also implies the previous copy out of the pinned
//!   buffers has finished.
//!
//! No call here synchronises the whole device.

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{
    CudaEvent, CudaSlice, CudaStream, CudaView, DevicePtr, DeviceRepr, LaunchConfig,
    PinnedHostSlice, PushKernelArg, sys,
};

use crate::error::driver;
use crate::kernels::{BLOCK_THREADS, Kernels};
use crate::normalize::{ImageShape, NormalizeTable};
use crate::slot_table::SlotTable;
use crate::{Device, DeviceDtype, Error, Normalize, Result, SlotState};

/// What one output of the stage is and how it gets to the device.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceOutputKind {
    /// Bytes copied as they are. The host buffer holds `batch × sample_shape` elements of
    /// `dtype`; the device view has shape `[batch, sample_shape..]`.
    Raw {
        /// Element type (it only decides the view's type: the copy is bytewise).
        dtype: DeviceDtype,
        /// Shape of one sample (empty for a scalar per sample).
        sample_shape: Vec<usize>,
    },
    /// u8 images `[batch, height, width, channels]` on the host, turned on the device into
    /// `[batch, channels, height, width]` of `normalize.dtype` by the fused kernel.
    Image {
        /// Rows.
        height: usize,
        /// Columns.
        width: usize,
        /// Channels per pixel (the normalize vectors have this length).
        channels: usize,
        /// Per-channel mean/std and output type.
        normalize: Normalize,
        /// Whether the slot carries one flip flag per sample (non-zero = mirror left-right).
        flip: bool,
    },
}

/// One named output of the stage.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSpec {
    /// The name (a field name, for the facade).
    pub name: String,
    /// What it holds.
    pub kind: DeviceOutputKind,
}

impl OutputSpec {
    /// A raw output copied bytewise.
    pub fn raw(name: impl Into<String>, dtype: DeviceDtype, sample_shape: &[usize]) -> Self {
        OutputSpec {
            name: name.into(),
            kind: DeviceOutputKind::Raw {
                dtype,
                sample_shape: sample_shape.to_vec(),
            },
        }
    }

    /// An image output normalized (and optionally flipped) on the device.
    pub fn image(
        name: impl Into<String>,
        height: usize,
        width: usize,
        normalize: Normalize,
        flip: bool,
    ) -> Self {
        OutputSpec {
            name: name.into(),
            kind: DeviceOutputKind::Image {
                height,
                width,
                channels: normalize.mean.len(),
                normalize,
                flip,
            },
        }
    }
}

/// Everything a stage is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct StageConfig {
    /// Samples a slot holds (the loader's batch size).
    pub max_batch: usize,
    /// Batches the producer may run ahead of the consumer; the stage has
    /// `batches_ahead + 2` slots, as FFCV.
    pub batches_ahead: usize,
    /// The outputs, in order.
    pub outputs: Vec<OutputSpec>,
}

/// A checked output: sizes per sample and, for images, the lookup table.
#[derive(Debug)]
struct OutputLayout {
    name: String,
    /// Bytes per sample in the pinned host buffer (and the device input buffer).
    host_sample_bytes: usize,
    /// Shape of one sample on the device, and its element type.
    device_sample_shape: Vec<usize>,
    device_dtype: DeviceDtype,
    image: Option<ImageLayout>,
}

#[derive(Debug)]
struct ImageLayout {
    height: usize,
    width: usize,
    channels: usize,
    flip: bool,
    table: NormalizeTable,
}

impl OutputLayout {
    fn device_sample_bytes(&self) -> usize {
        self.host_sample_bytes * self.elem_scale()
    }

    /// Device bytes per host byte: 1 for raw outputs, the output dtype's size for images.
    fn elem_scale(&self) -> usize {
        if self.image.is_some() {
            self.device_dtype.size()
        } else {
            1
        }
    }
}

/// Largest buffer the stage will allocate, far above any batch and far below where size
/// arithmetic or cudarc's own checks could overflow.
const MAX_BUFFER_BYTES: usize = 1 << 40;

fn check_output(spec: &OutputSpec, max_batch: usize) -> Result<OutputLayout> {
    let invalid = |reason: String| Error::InvalidOutput {
        output: spec.name.clone(),
        reason,
    };
    let product = |dims: &[usize]| {
        dims.iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| invalid(format!("shape {dims:?} overflows")))
    };
    let layout = match &spec.kind {
        DeviceOutputKind::Raw {
            dtype,
            sample_shape,
        } => {
            let elems = product(sample_shape)?;
            OutputLayout {
                name: spec.name.clone(),
                host_sample_bytes: elems
                    .checked_mul(dtype.size())
                    .ok_or_else(|| invalid("sample size overflows".to_owned()))?,
                device_sample_shape: sample_shape.clone(),
                device_dtype: *dtype,
                image: None,
            }
        }
        DeviceOutputKind::Image {
            height,
            width,
            channels,
            normalize,
            flip,
        } => {
            if normalize.mean.len() != *channels {
                return Err(invalid(format!(
                    "{channels} channels but {} normalize means",
                    normalize.mean.len()
                )));
            }
            let table = NormalizeTable::new(&spec.name, normalize)?;
            OutputLayout {
                name: spec.name.clone(),
                host_sample_bytes: product(&[*height, *width, *channels])?,
                device_sample_shape: vec![*channels, *height, *width],
                device_dtype: normalize.dtype,
                image: Some(ImageLayout {
                    height: *height,
                    width: *width,
                    channels: *channels,
                    flip: *flip,
                    table,
                }),
            }
        }
    };
    if layout.host_sample_bytes == 0 {
        return Err(invalid("a sample holds no bytes".to_owned()));
    }
    let slot_bytes = layout
        .host_sample_bytes
        .checked_mul(layout.elem_scale())
        .and_then(|b| b.checked_mul(max_batch))
        .filter(|&b| b <= MAX_BUFFER_BYTES)
        .ok_or_else(|| {
            invalid(format!(
                "{max_batch} samples of {} bytes exceed the {MAX_BUFFER_BYTES}-byte buffer limit",
                layout.host_sample_bytes
            ))
        })?;
    debug_assert!(slot_bytes >= layout.host_sample_bytes);
    Ok(layout)
}

fn check_config(config: &StageConfig) -> Result<Vec<OutputLayout>> {
    let stage_error = |reason: &str| Error::InvalidOutput {
        output: "(stage)".to_owned(),
        reason: reason.to_owned(),
    };
    if config.max_batch == 0 {
        return Err(stage_error("max_batch must be at least 1"));
    }
    if config.outputs.is_empty() {
        return Err(stage_error("a stage needs at least one output"));
    }
    let outputs = config
        .outputs
        .iter()
        .map(|o| check_output(o, config.max_batch))
        .collect::<Result<Vec<_>>>()?;
    for (i, o) in outputs.iter().enumerate() {
        if outputs[..i].iter().any(|p| p.name == o.name) {
            return Err(Error::InvalidOutput {
                output: o.name.clone(),
                reason: "two outputs have this name".to_owned(),
            });
        }
    }
    Ok(outputs)
}

impl OutputLayout {
    fn info(&self) -> DeviceOutputInfo {
        DeviceOutputInfo {
            name: self.name.clone(),
            dtype: self.device_dtype,
            sample_shape: self.device_sample_shape.clone(),
            host_sample_bytes: self.host_sample_bytes,
        }
    }
}

impl StageConfig {
    /// Checks the configuration without a device and describes the outputs as the device
    /// will hold them (what [`Stage::new`] checks before allocating anything).
    pub fn validate(&self) -> Result<Vec<DeviceOutputInfo>> {
        Ok(check_config(self)?.iter().map(OutputLayout::info).collect())
    }
}

/// One output's buffers in one slot.
#[derive(Debug)]
struct SlotBuffers {
    /// Pinned host buffer the producer writes (flags 0: cached, not write-combined, so the
    /// CPU pipeline can also read what it wrote at full speed).
    host: PinnedHostSlice<u8>,
    /// The copy's destination: the output itself (raw) or the kernel's u8 input (image).
    device_in: CudaSlice<u8>,
    /// Per-sample flip flags, host and device (images built with `flip`).
    flips: Option<(PinnedHostSlice<u8>, CudaSlice<u8>)>,
    /// The kernel's output (images).
    device_out: Option<CudaSlice<u8>>,
}

/// A slot's stream, events and buffers; owned by the pool, a [`FillingSlot`] or a
/// [`StagedBatch`], never two at once.
#[derive(Debug)]
struct SlotResources {
    stream: Arc<CudaStream>,
    ready: CudaEvent,
    released: CudaEvent,
    buffers: Vec<SlotBuffers>,
}

#[derive(Debug)]
struct Pool {
    table: SlotTable,
    /// Resources of slots the pool holds (free or releasing); `None` while lent out.
    parked: Vec<Option<Box<SlotResources>>>,
}

#[derive(Debug)]
struct StageInner {
    device: Device,
    max_batch: usize,
    batches_ahead: usize,
    outputs: Vec<OutputLayout>,
    /// Lookup tables on the device, per output (images only).
    tables: Vec<Option<CudaSlice<u8>>>,
    kernels: Option<Kernels>,
    pool: Mutex<Pool>,
}

/// Staging of batches onto one CUDA device: allocate once, reuse every epoch.
///
/// Cheap to clone (a shared handle); usable from a producer and a consumer thread at once.
#[derive(Debug, Clone)]
pub struct Stage {
    inner: Arc<StageInner>,
}

/// Public description of one output, as the device sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceOutputInfo {
    /// The output's name.
    pub name: String,
    /// Element type on the device.
    pub dtype: DeviceDtype,
    /// Shape of one sample on the device (CHW for images).
    pub sample_shape: Vec<usize>,
    /// Bytes per sample in the host buffer.
    pub host_sample_bytes: usize,
}

impl Stage {
    /// Checks `config`, compiles the kernels if any output is an image, uploads the lookup
    /// tables and allocates `batches_ahead + 2` slots.
    pub fn new(device: &Device, config: StageConfig) -> Result<Self> {
        let outputs = check_config(&config)?;
        let kernels = if outputs.iter().any(|o| o.image.is_some()) {
            Some(Kernels::compile(device)?)
        } else {
            None
        };
        let setup = device.new_stream()?;
        let tables = outputs
            .iter()
            .map(|o| {
                o.image
                    .as_ref()
                    .map(|img| {
                        setup
                            .clone_htod(&img.table.to_device_bytes())
                            .map_err(driver(format!("uploading the table of {:?}", o.name)))
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        setup
            .synchronize()
            .map_err(driver("uploading lookup tables"))?;
        let num_slots = config.batches_ahead.saturating_add(2);
        let mut inner = StageInner {
            device: device.clone(),
            max_batch: config.max_batch,
            batches_ahead: config.batches_ahead,
            outputs,
            tables,
            kernels,
            pool: Mutex::new(Pool {
                table: SlotTable::new(0),
                parked: Vec::new(),
            }),
        };
        let mut parked = Vec::with_capacity(num_slots);
        for _ in 0..num_slots {
            parked.push(Some(Box::new(inner.allocate_slot()?)));
        }
        inner.pool = Mutex::new(Pool {
            table: SlotTable::new(num_slots),
            parked,
        });
        tracing::debug!(
            slots = num_slots,
            device_bytes = inner.slot_device_bytes() * num_slots,
            "gpu stage allocated"
        );
        Ok(Stage {
            inner: Arc::new(inner),
        })
    }

    /// The device this stage stages to.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Samples per slot.
    pub fn max_batch(&self) -> usize {
        self.inner.max_batch
    }

    /// The `batches_ahead` the stage was built with.
    pub fn batches_ahead(&self) -> usize {
        self.inner.batches_ahead
    }

    /// Slots now (`batches_ahead + 2`, plus any added because the consumer held them all).
    pub fn num_slots(&self) -> usize {
        self.inner.lock_pool().table.len()
    }

    /// The state of every slot, in index order.
    pub fn slot_states(&self) -> Vec<SlotState> {
        let pool = self.inner.lock_pool();
        (0..pool.table.len())
            .filter_map(|s| pool.table.state(s))
            .collect()
    }

    /// The outputs, as the device sees them.
    pub fn outputs(&self) -> Vec<DeviceOutputInfo> {
        self.inner.outputs.iter().map(OutputLayout::info).collect()
    }

    /// The lookup table image output `output` is normalized with (for the CPU reference).
    pub fn normalize_table(&self, output: usize) -> Option<&NormalizeTable> {
        Some(&self.inner.outputs.get(output)?.image.as_ref()?.table)
    }

    /// The host-side shape of image output `output` for a batch of `batch` samples.
    pub fn image_shape(&self, output: usize, batch: usize) -> Option<ImageShape> {
        let img = self.inner.outputs.get(output)?.image.as_ref()?;
        Some(ImageShape {
            batch,
            height: img.height,
            width: img.width,
            channels: img.channels,
        })
    }

    /// Device bytes one slot holds (all outputs, inputs and flags).
    pub fn slot_device_bytes(&self) -> usize {
        self.inner.slot_device_bytes()
    }

    /// Takes a slot for the producer to fill. Waits (on that slot's release event only) when
    /// the slot's previous consumer work may still run. When every slot is being filled or
    /// held by the consumer, adds a slot (logging a warning) rather than reuse a held one.
    pub fn acquire(&self) -> Result<FillingSlot> {
        let (acquired, res) = {
            let mut pool = self.inner.lock_pool();
            let acquired = match pool.table.acquire() {
                Some(a) => a,
                None => {
                    let res = self.inner.allocate_slot()?;
                    let slot = pool.table.grow();
                    pool.parked.push(Some(Box::new(res)));
                    tracing::warn!(
                        slots = slot + 1,
                        "every gpu-stage slot is held by the consumer; added a slot (drop batches sooner to avoid this)"
                    );
                    pool.table.acquire().ok_or(Error::UnknownSlot {
                        slot,
                        slots: slot + 1,
                    })?
                }
            };
            let res = pool.parked[acquired.slot].take();
            match res {
                Some(res) => (acquired, res),
                None => {
                    return Err(Error::SlotState {
                        slot: acquired.slot,
                        action: "acquire",
                        state: SlotState::Filling,
                    });
                }
            }
        };
        let filling = FillingSlot {
            stage: self.inner.clone(),
            slot: acquired.slot,
            res: Some(res),
        };
        if acquired.wait_for_release
            && let Some(res) = &filling.res
        {
            res.released.synchronize().map_err(driver(format!(
                "waiting for the consumer to release slot {}",
                acquired.slot
            )))?;
        }
        Ok(filling)
    }

    /// Waits until the stage is idle: every slot's pending copy, kernel and consumer work
    /// (through its release event) has completed. Slots lent out are not waited for.
    pub fn wait_idle(&self) -> Result<()> {
        let pool = self.inner.lock_pool();
        for res in pool.parked.iter().flatten() {
            res.released
                .synchronize()
                .map_err(driver("waiting for a release event"))?;
            res.stream
                .synchronize()
                .map_err(driver("waiting for a slot stream"))?;
        }
        Ok(())
    }
}

impl StageInner {
    fn lock_pool(&self) -> MutexGuard<'_, Pool> {
        // A panic while holding the lock leaves the table consistent (each operation is one
        // assignment), so a poisoned lock is still usable.
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn slot_device_bytes(&self) -> usize {
        self.outputs
            .iter()
            .map(|o| {
                let input = o.host_sample_bytes * self.max_batch;
                match &o.image {
                    None => input,
                    Some(img) => {
                        input
                            + o.device_sample_bytes() * self.max_batch
                            + if img.flip { self.max_batch } else { 0 }
                    }
                }
            })
            .sum()
    }

    fn allocate_slot(&self) -> Result<SlotResources> {
        let ctx = self.device.context();
        let stream = self.device.new_stream()?;
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
        let mut buffers = Vec::with_capacity(self.outputs.len());
        for o in &self.outputs {
            let host_bytes = o.host_sample_bytes * self.max_batch;
            let image = o.image.as_ref();
            buffers.push(SlotBuffers {
                host: pinned(host_bytes)?,
                device_in: device_zeros(host_bytes)?,
                flips: match image {
                    Some(img) if img.flip => {
                        Some((pinned(self.max_batch)?, device_zeros(self.max_batch)?))
                    }
                    _ => None,
                },
                device_out: match image {
                    Some(_) => Some(device_zeros(o.device_sample_bytes() * self.max_batch)?),
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

    fn output(&self, output: usize) -> Result<&OutputLayout> {
        self.outputs
            .get(output)
            .ok_or_else(|| Error::UnknownOutput {
                what: output.to_string(),
                count: self.outputs.len(),
            })
    }

    /// Returns a slot's resources to the pool and moves the table on with `update`.
    fn park(
        &self,
        slot: usize,
        res: Box<SlotResources>,
        update: impl FnOnce(&mut SlotTable, usize) -> Result<()>,
    ) -> Result<()> {
        let mut pool = self.lock_pool();
        if let Some(place) = pool.parked.get_mut(slot) {
            *place = Some(res);
        }
        update(&mut pool.table, slot)
    }
}

impl Drop for StageInner {
    fn drop(&mut self) {
        // Every slot is parked now (lent ones hold an `Arc` to us). Wait for all work that
        // may touch the buffers before cudarc frees them.
        let pool = self.pool.get_mut().unwrap_or_else(|p| p.into_inner());
        for res in pool.parked.iter().flatten() {
            if let Err(e) = res.released.synchronize() {
                tracing::error!(error = %e, "gpu stage: waiting for a release event at drop");
            }
            if let Err(e) = res.stream.synchronize() {
                tracing::error!(error = %e, "gpu stage: waiting for a slot stream at drop");
            }
        }
    }
}

/// A slot lent to the producer: write the host buffers, then [`to_device`](Self::to_device).
/// Dropping it unstaged returns the slot to the pool.
#[derive(Debug)]
pub struct FillingSlot {
    stage: Arc<StageInner>,
    slot: usize,
    res: Option<Box<SlotResources>>,
}

impl FillingSlot {
    /// The slot index.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Samples this slot holds at most.
    pub fn capacity(&self) -> usize {
        self.stage.max_batch
    }

    fn res_mut(&mut self) -> Result<&mut SlotResources> {
        self.res.as_deref_mut().ok_or(Error::SlotState {
            slot: self.slot,
            action: "use a slot already staged",
            state: SlotState::Staged,
        })
    }

    /// The pinned host buffer of `output` (`max_batch × host_sample_bytes` bytes; sample `i`
    /// at `i × host_sample_bytes`). For images, HWC u8 per sample.
    pub fn host_mut(&mut self, output: usize) -> Result<&mut [u8]> {
        self.stage.output(output)?;
        let slot = self.slot;
        let res = self.res_mut()?;
        res.buffers[output]
            .host
            .as_mut_slice()
            .map_err(driver(format!("mapping host buffer of slot {slot}")))
    }

    /// The per-sample flip flags of image `output` (`max_batch` bytes; non-zero = mirror).
    pub fn flips_mut(&mut self, output: usize) -> Result<&mut [u8]> {
        let name = self.stage.output(output)?.name.clone();
        let slot = self.slot;
        let res = self.res_mut()?;
        match &mut res.buffers[output].flips {
            Some((host, _)) => host
                .as_mut_slice()
                .map_err(driver(format!("mapping flip flags of slot {slot}"))),
            None => Err(Error::NoFlipFlags { output: name }),
        }
    }

    /// Enqueues, on this slot's stream, the copy of the first `batch_len` samples of every
    /// output and the image kernels, records the slot's `ready` event and hands the batch out.
    pub fn to_device(mut self, batch_len: usize) -> Result<StagedBatch> {
        if batch_len == 0 || batch_len > self.stage.max_batch {
            return Err(Error::BatchTooLarge {
                batch_len,
                max_batch: self.stage.max_batch,
            });
        }
        let stage = self.stage.clone();
        let Some(res) = self.res.take() else {
            return Err(Error::SlotState {
                slot: self.slot,
                action: "stage",
                state: SlotState::Staged,
            });
        };
        let mut res = res;
        if let Err(e) = enqueue(&stage, &mut res, self.slot, batch_len) {
            // Some copies may be in flight from the pinned buffers: let them finish before
            // the slot can be written again.
            if let Err(sync) = res.stream.synchronize() {
                tracing::error!(error = %sync, slot = self.slot, "gpu stage: cleanup after a failed enqueue");
            }
            self.res = Some(res);
            return Err(e);
        }
        stage.lock_pool().table.stage(self.slot)?;
        Ok(StagedBatch {
            stage,
            slot: self.slot,
            res: Some(res),
            batch_len,
            consumer: None,
        })
    }
}

impl Drop for FillingSlot {
    fn drop(&mut self) {
        if let Some(res) = self.res.take()
            && let Err(e) = self.stage.park(self.slot, res, SlotTable::abandon)
        {
            tracing::error!(error = %e, slot = self.slot, "gpu stage: returning an unstaged slot");
        }
    }
}

/// Copies and kernels for one batch, on the slot's stream.
fn enqueue(
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

/// Rust element types a device view can be read as.
pub trait DeviceElement: DeviceRepr + sealed::Sealed {
    /// The Rust type's name, for errors.
    const NAME: &'static str;
    /// Whether outputs of `dtype` can be viewed as this type (f16/bf16 as `u16` bits).
    fn accepts(dtype: DeviceDtype) -> bool;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($t:ty, $($d:ident)|+) => {
        impl sealed::Sealed for $t {}
        impl DeviceElement for $t {
            const NAME: &'static str = stringify!($t);
            fn accepts(dtype: DeviceDtype) -> bool {
                matches!(dtype, $(DeviceDtype::$d)|+)
            }
        }
    };
}
element!(u8, U8);
element!(u16, F16 | Bf16);
element!(i32, I32);
element!(i64, I64);
element!(f32, F32);
element!(f64, F64);

impl StagedBatch {
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
