//! A slot lent to the producer ([`FillingSlot`]): the pinned host buffers and flip flags
//! it writes, then `to_device`, which enqueues the batch and hands out a [`StagedBatch`];
//! dropped unstaged, the slot goes back to the pool.

use std::sync::Arc;

use crate::enqueue::enqueue;
use crate::error::driver;
use crate::slot_buffers::SlotResources;
use crate::slot_table::SlotTable;
use crate::stage_state::StageInner;
use crate::{Error, Result, SlotState, StagedBatch};

/// A slot lent to the producer: write the host buffers, then [`to_device`](Self::to_device).
/// Dropping it unstaged returns the slot to the pool.
#[derive(Debug)]
pub struct FillingSlot {
    stage: Arc<StageInner>,
    slot: usize,
    res: Option<Box<SlotResources>>,
}

impl FillingSlot {
    /// Lends slot `slot`, with its resources, to the producer.
    pub(crate) fn new(stage: Arc<StageInner>, slot: usize, res: Box<SlotResources>) -> Self {
        FillingSlot {
            stage,
            slot,
            res: Some(res),
        }
    }

    /// Waits until the consumer's work on this slot's previous batch has completed (the
    /// slot's release event), before the producer may write its buffers.
    pub(crate) fn wait_for_release(&self) -> Result<()> {
        if let Some(res) = &self.res {
            res.released.synchronize().map_err(driver(format!(
                "waiting for the consumer to release slot {}",
                self.slot
            )))?;
        }
        Ok(())
    }

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
        stage.mark_staged(self.slot)?;
        Ok(StagedBatch::new(stage, self.slot, res, batch_len))
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
