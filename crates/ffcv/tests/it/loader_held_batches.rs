//! A batch the consumer still holds is never overwritten: the producer takes a new slot
//! (growing the pool, with a warning) rather than reuse a held one.

use crate::loader_support;

use ffcv::{Batch, Loader, Order};
use loader_support::{blob, write_blobs};

/// A batch's sample ids, index values and blob bytes, copied.
type Snapshot = (Vec<u64>, Vec<i64>, Vec<u8>);

fn snapshot(batch: &Batch) -> Snapshot {
    (
        batch.sample_ids().to_vec(),
        batch.get::<i64>("index").unwrap().to_vec(),
        batch.output("blob").unwrap().bytes().to_vec(),
    )
}

#[test]
fn holding_every_batch_of_an_epoch_keeps_each_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "held", 120);
    for os_cache in [true, false] {
        let mut loader = Loader::builder(&path)
            .batch_size(8)
            .batches_ahead(1)
            .num_workers(2)
            .os_cache(os_cache)
            .order(Order::Random)
            .seed(1)
            .build()
            .unwrap();
        let mut held: Vec<(Batch, Snapshot)> = Vec::new();
        for batch in loader.iter() {
            let batch = batch.unwrap();
            let snap = snapshot(&batch);
            held.push((batch, snap));
        }
        assert_eq!(held.len(), 15);
        // Every batch lives in its own slot: 15 held > 3 planned, so the pool grew.
        let mut slots: Vec<usize> = held.iter().map(|(b, _)| b.slot_index()).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), held.len(), "a held slot was reused");
        assert!(loader.stats().slots >= held.len());
        for (batch, snap) in &held {
            assert_eq!(&snapshot(batch), snap, "batch {} changed", batch.index());
            let blobs = batch.output("blob").unwrap();
            for (row, &sample) in batch.sample_ids().iter().enumerate() {
                assert_eq!(blobs.value(row), &blob(sample)[..]);
            }
        }
        // Once dropped, the slots are reused by the next epoch instead of allocating more.
        let slots_before = loader.stats().slot_allocations;
        drop(held);
        for batch in loader.iter() {
            batch.unwrap();
        }
        assert_eq!(loader.stats().slot_allocations, slots_before);
    }
}

#[test]
fn a_held_batch_survives_while_later_batches_are_produced() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "held2", 200);
    let mut loader = Loader::builder(&path)
        .batch_size(4)
        .batches_ahead(2)
        .num_workers(2)
        .os_cache(false)
        .build()
        .unwrap();
    let mut it = loader.iter();
    let first = it.next().unwrap().unwrap();
    let snap = snapshot(&first);
    let mut later = 0;
    for batch in it.by_ref() {
        let batch = batch.unwrap();
        assert_ne!(batch.slot_index(), first.slot_index());
        later += 1;
    }
    assert_eq!(later, 49);
    assert_eq!(snapshot(&first), snap);
    assert_eq!(first.sample_ids(), &[0, 1, 2, 3]);
    drop(it);
    // Normal consumption (one batch at a time) needs no more than batches_ahead + 2
    // slots, plus the one the first batch kept.
    assert!(loader.stats().slots <= 2 + 2 + 1, "{:?}", loader.stats());
}
