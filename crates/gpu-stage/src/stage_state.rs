//! What a stage's handles share ([`StageInner`]: the device, the checked outputs, their
//! lookup tables on the device, the kernels, and the [`Pool`] of slots), below the
//! [`Stage`](crate::Stage) handle, the [`FillingSlot`](crate::FillingSlot) and the
//! [`StagedBatch`](crate::StagedBatch) that each hold it; and the wait, when the last of
//! them goes, for all work on the slots before their buffers are freed.

use std::sync::{Mutex, MutexGuard};

use cudarc::driver::CudaSlice;

use crate::kernels::Kernels;
use crate::slot_buffers::{SlotResources, slot_device_bytes};
use crate::slot_table::SlotTable;
use crate::stage_config::OutputLayout;
use crate::{Device, Error, Result};

/// The slots' life cycle and the resources of the slots not lent out.
#[derive(Debug)]
pub(crate) struct Pool {
    /// Each slot's state.
    pub(crate) table: SlotTable,
    /// Resources of slots the pool holds (free or releasing); `None` while lent out.
    pub(crate) parked: Vec<Option<Box<SlotResources>>>,
}

/// What a [`Stage`](crate::Stage) handle, its lent slots and its batches share.
#[derive(Debug)]
pub(crate) struct StageInner {
    pub(crate) device: Device,
    pub(crate) max_batch: usize,
    pub(crate) batches_ahead: usize,
    pub(crate) outputs: Vec<OutputLayout>,
    /// Lookup tables on the device, per output (images only).
    pub(crate) tables: Vec<Option<CudaSlice<u8>>>,
    /// The compiled kernels, when an output is an image.
    pub(crate) kernels: Option<Kernels>,
    /// The slots; see [`lock_pool`](Self::lock_pool).
    pub(crate) pool: Mutex<Pool>,
}

impl StageInner {
    /// The pool, also after a panic poisoned its lock.
    pub(crate) fn lock_pool(&self) -> MutexGuard<'_, Pool> {
        // A panic while holding the lock leaves the table consistent (each operation is one
        // assignment), so a poisoned lock is still usable.
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Device bytes one slot holds.
    pub(crate) fn slot_device_bytes(&self) -> usize {
        slot_device_bytes(&self.outputs, self.max_batch)
    }

    /// One more slot's resources, for these outputs.
    pub(crate) fn allocate_slot(&self) -> Result<SlotResources> {
        SlotResources::allocate(&self.device, &self.outputs, self.max_batch)
    }

    /// Output `output`'s layout, or the error naming how many outputs there are.
    pub(crate) fn output(&self, output: usize) -> Result<&OutputLayout> {
        self.outputs
            .get(output)
            .ok_or_else(|| Error::UnknownOutput {
                what: output.to_string(),
                count: self.outputs.len(),
            })
    }

    /// Moves slot `slot` on to staged in the table: its batch is on the way to the consumer.
    pub(crate) fn mark_staged(&self, slot: usize) -> Result<()> {
        self.lock_pool().table.stage(slot)
    }

    /// Returns a slot's resources to the pool and moves the table on with `update`.
    pub(crate) fn park(
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
