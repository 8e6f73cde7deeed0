//! The stage: slots of pinned host and device buffers, one stream and two events per slot,
//! allocated once, and the pool that lends them out; `acquire` → fill host buffers
//! ([`FillingSlot`]) → `to_device` → consumer ([`StagedBatch`]) → drop.
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
//!
//! [`StagedBatch`]: crate::StagedBatch
//! [`StagedBatch::wait_on`]: crate::StagedBatch::wait_on
//! [`StagedBatch::synchronize`]: crate::StagedBatch::synchronize

use std::sync::{Arc, Mutex};

use crate::error::driver;
use crate::kernels::Kernels;
use crate::normalize::{ImageShape, NormalizeTable};
use crate::slot_table::SlotTable;
use crate::stage_config::{OutputLayout, check_config};
use crate::stage_state::{Pool, StageInner};
use crate::{Device, DeviceOutputInfo, Error, FillingSlot, Result, SlotState, StageConfig};

/// Staging of batches onto one CUDA device: allocate once, reuse every epoch.
///
/// Cheap to clone (a shared handle); usable from a producer and a consumer thread at once.
#[derive(Debug, Clone)]
pub struct Stage {
    inner: Arc<StageInner>,
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
        let filling = FillingSlot::new(self.inner.clone(), acquired.slot, res);
        if acquired.wait_for_release {
            // On an error `filling` is dropped, which returns the slot to the pool.
            filling.wait_for_release()?;
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
