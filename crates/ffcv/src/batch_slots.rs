//! The loader's batch slots: output buffers allocated once and handed from the producer to
//! a [`crate::Batch`] guard and back. A slot is either free (in the pool), being filled (owned by
//! the producer) or held (owned by a batch): ownership moves, so a held batch can never
//! be overwritten. When the producer needs a slot and none is free, the pool grows by one.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::memory::{SlotAllocator, SlotMemory};

/// A hook run on every batch after the CPU pipelines, on the producer thread, and told
/// when the batch's guard drops. This is where a GPU stage copies pinned slot buffers to
/// the device on the slot's stream and records the event that guards the slot's reuse.
pub trait SlotStage: Send + Sync {
    /// Called once a batch's CPU outputs are complete, before the batch is queued. What it
    /// returns is attached to the batch ([`crate::Batch::attachment`], e.g. device tensors
    /// and the event that says when they are ready) and dropped when the batch drops.
    fn process(
        &self,
        slot: usize,
        outputs: &mut [SlotOutput<'_>],
    ) -> Result<Option<Attachment>, crate::ExtensionError>;

    /// Called when the batch in `slot` has been dropped by the consumer, after its
    /// attachment was dropped (the slot's buffers may be refilled once this returns).
    fn released(&self, _slot: usize) {}
}

/// What a [`SlotStage`] attaches to a batch.
pub type Attachment = Box<dyn Any + Send + Sync>;

/// One output buffer of a slot, as a [`SlotStage`] sees it.
#[derive(Debug)]
pub struct SlotOutput<'a> {
    /// The output's name.
    pub name: &'a str,
    /// The rows of the batch's samples.
    pub bytes: &'a mut [u8],
    /// Samples in the batch.
    pub samples: usize,
}

/// One output's part of a slot.
pub(crate) struct OutputBuffer {
    /// The rows (`batch_size * row_bytes`).
    pub(crate) memory: Box<dyn SlotMemory>,
    /// Per-sample lengths (empty for outputs without lengths).
    pub(crate) lengths: Vec<u64>,
    /// Per row: how many leading bytes may be non-zero, so that a padded copy only
    /// zeroes what an earlier batch wrote past its new length. Empty: unknown (every
    /// byte may be non-zero), as after allocation, a slot stage or a failed fill.
    pub(crate) dirty: Vec<u64>,
}

/// One slot's buffers.
pub(crate) struct Slot {
    pub(crate) index: usize,
    /// One entry per output, in the loader's output order.
    pub(crate) outputs: Vec<OutputBuffer>,
    /// The batch's sample ids.
    pub(crate) sample_ids: Vec<u64>,
    /// What the slot stage attached to the batch in this slot.
    pub(crate) attachment: Option<Attachment>,
    sizes: Vec<usize>,
}

struct PoolState {
    free: Vec<Slot>,
    /// Slots in existence (free, filling or held).
    total: usize,
    next_index: usize,
}

/// The slots of one loader.
pub(crate) struct SlotPool {
    state: Mutex<PoolState>,
    allocator: Arc<dyn SlotAllocator>,
    stage: Option<Arc<dyn SlotStage>>,
    /// Slots the loader plans for (`batches_ahead + 2`).
    target: usize,
    allocations: AtomicUsize,
    /// The process the pool was made in: see [`SlotPool::give_back`].
    pid: u32,
}

impl SlotPool {
    pub(crate) fn new(
        allocator: Arc<dyn SlotAllocator>,
        stage: Option<Arc<dyn SlotStage>>,
        target: usize,
    ) -> SlotPool {
        SlotPool {
            state: Mutex::new(PoolState {
                free: Vec::new(),
                total: 0,
                next_index: 0,
            }),
            allocator,
            stage,
            target,
            allocations: AtomicUsize::new(0),
            pid: std::process::id(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A free slot whose buffers have `sizes` bytes (one per output), allocating one if
    /// none is free. Never blocks and never takes a slot a batch holds.
    pub(crate) fn take(&self, sizes: &[usize]) -> std::io::Result<Slot> {
        let mut st = self.lock();
        while let Some(slot) = st.free.pop() {
            if slot.sizes == sizes {
                return Ok(slot);
            }
            // Sizes changed (recompile): this slot's buffers no longer fit; free them.
            st.total -= 1;
        }
        st.total += 1;
        let index = st.next_index;
        st.next_index += 1;
        if st.total > self.target {
            tracing::warn!(
                slots = st.total,
                planned = self.target,
                "every batch slot is held by the consumer; growing the pool by one \
                 (drop batches sooner, or raise batches_ahead)"
            );
        }
        drop(st);
        let made = self.allocate(index, sizes);
        if made.is_err() {
            self.lock().total -= 1;
        }
        made
    }

    fn allocate(&self, index: usize, sizes: &[usize]) -> std::io::Result<Slot> {
        let outputs = sizes
            .iter()
            .map(|&b| {
                Ok(OutputBuffer {
                    memory: self.allocator.allocate(b)?,
                    lengths: Vec::new(),
                    dirty: Vec::new(),
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        self.allocations.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            slot = index,
            bytes = sizes.iter().sum::<usize>(),
            "allocated batch slot"
        );
        Ok(Slot {
            index,
            outputs,
            sample_ids: Vec::new(),
            attachment: None,
            sizes: sizes.to_vec(),
        })
    }

    /// Returns a slot to the pool (a batch dropped, or the producer did not use it).
    pub(crate) fn give_back(&self, mut slot: Slot) {
        if std::process::id() != self.pid {
            // A batch freed in a forked child: the pool's lock may have been held by one
            // of the parent's threads at the fork, and then nobody ever releases it there.
            // The slot is the child's copy of the memory; leaving it is harmless.
            std::mem::forget(slot);
            return;
        }
        let index = slot.index;
        // Whatever the stage attached (device views, events) goes before the slot is free.
        drop(slot.attachment.take());
        self.lock().free.push(slot);
        if let Some(stage) = &self.stage {
            stage.released(index);
        }
    }

    /// The hook after the CPU stages, if any.
    pub(crate) fn stage(&self) -> Option<&Arc<dyn SlotStage>> {
        self.stage.as_ref()
    }

    /// Slots in existence.
    pub(crate) fn total(&self) -> usize {
        self.lock().total
    }

    /// How many slots were ever allocated.
    pub(crate) fn allocations(&self) -> usize {
        self.allocations.load(Ordering::Relaxed)
    }
}
