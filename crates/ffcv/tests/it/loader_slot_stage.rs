//! The seam a GPU stage plugs into: slot buffers come from the loader's `SlotAllocator`
//! (pinned memory there), a `SlotStage` runs on every batch after the CPU pipelines and
//! attaches its result to the batch, and hears when the batch is dropped.

use crate::loader_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ffcv::{Attachment, HeapMemory, Loader, SlotAllocator, SlotMemory, SlotOutput, SlotStage};
use loader_support::fixture;

#[derive(Default)]
struct CountingAllocator {
    buffers: AtomicUsize,
}

impl SlotAllocator for CountingAllocator {
    fn allocate(&self, bytes: usize) -> std::io::Result<Box<dyn SlotMemory>> {
        self.buffers.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(HeapMemory::zeroed(bytes)?))
    }
}

/// Attaches the byte sum of every output; fails on batch `fail_at` if set.
#[derive(Default)]
struct Checksum {
    processed: Mutex<Vec<usize>>,
    released: Mutex<Vec<usize>>,
    fail_at: Option<usize>,
    calls: AtomicUsize,
}

impl SlotStage for Checksum {
    fn process(
        &self,
        slot: usize,
        outputs: &mut [SlotOutput<'_>],
    ) -> Result<Option<Attachment>, ffcv::ExtensionError> {
        if Some(self.calls.fetch_add(1, Ordering::SeqCst)) == self.fail_at {
            return Err("device lost".into());
        }
        self.processed.lock().unwrap().push(slot);
        let sum: u64 = outputs
            .iter()
            .flat_map(|o| o.bytes.iter())
            .map(|&b| u64::from(b))
            .sum();
        Ok(Some(Box::new(sum)))
    }

    fn released(&self, slot: usize) {
        self.released.lock().unwrap().push(slot);
    }
}

#[test]
fn every_batch_passes_the_stage_and_carries_its_attachment() {
    let alloc = Arc::new(CountingAllocator::default());
    let stage = Arc::new(Checksum::default());
    let mut loader = Loader::builder(fixture("bytes_ndarray.beton"))
        .batch_size(8)
        .batches_ahead(1)
        .num_workers(2)
        .slot_allocator(alloc.clone())
        .slot_stage(stage.clone())
        .build()
        .unwrap();
    for _ in 0..3 {
        for batch in &mut loader {
            let batch = batch.unwrap();
            let sum: u64 = batch
                .outputs()
                .iter()
                .flat_map(|o| batch.output(&o.name).unwrap().bytes().to_vec())
                .map(u64::from)
                .sum();
            assert_eq!(batch.attachment::<u64>(), Some(&sum));
            assert_eq!(batch.attachment::<String>(), None);
        }
    }
    assert_eq!(stage.processed.lock().unwrap().len(), 24);
    assert_eq!(stage.released.lock().unwrap().len(), 24);
    // Four outputs per slot; slots allocated once and reused over three epochs.
    let slots = loader.stats().slots;
    assert!(slots <= 3, "{slots}");
    assert_eq!(alloc.buffers.load(Ordering::SeqCst), 4 * slots);
}

#[test]
fn a_failing_stage_ends_the_epoch_with_its_message() {
    let stage = Arc::new(Checksum {
        fail_at: Some(2),
        ..Checksum::default()
    });
    let mut loader = Loader::builder(fixture("scalars.beton"))
        .batch_size(10)
        .slot_stage(stage)
        .build()
        .unwrap();
    let items: Vec<_> = loader.iter().collect();
    assert_eq!(items.len(), 3);
    assert!(items[0].is_ok() && items[1].is_ok());
    let err = items[2].as_ref().unwrap_err();
    assert!(
        matches!(err, ffcv::Error::SlotStage { batch: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("device lost"));
}
