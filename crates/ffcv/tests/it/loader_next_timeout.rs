//! `EpochIter::next_timeout` and `request_stop`: waiting in slices while the producer is
//! held (a slot stage that blocks until the test opens a gate stands in for a stalled
//! read), stopping without waiting, and the next epoch afterwards.

use crate::loader_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use ffcv::{Attachment, Loader, SlotOutput, SlotStage, WaitTimedOut};
use loader_support::fixture;

/// Holds every batch in the stage until the gate is opened.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    changed: Condvar,
    /// Batches that reached the stage.
    entered: AtomicUsize,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.changed.notify_all();
    }

    /// Waits until a batch is inside the stage.
    fn wait_entered(&self) {
        let mut open = self.open.lock().unwrap();
        while self.entered.load(Ordering::SeqCst) == 0 {
            open = self
                .changed
                .wait_timeout(open, Duration::from_millis(5))
                .unwrap()
                .0;
        }
    }
}

impl SlotStage for Gate {
    fn process(
        &self,
        _slot: usize,
        _outputs: &mut [SlotOutput<'_>],
    ) -> Result<Option<Attachment>, ffcv::ExtensionError> {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.changed.wait(open).unwrap();
        }
        Ok(None)
    }

    fn released(&self, _slot: usize) {}
}

fn gated_loader(gate: &Arc<Gate>) -> Loader {
    Loader::builder(fixture("scalars.beton"))
        .batch_size(10)
        .num_workers(2)
        .slot_stage(gate.clone())
        .build()
        .unwrap()
}

/// The sample ids of one epoch, each row's `index` checked against its id.
fn epoch_ids(loader: &mut Loader) -> Vec<u64> {
    let mut ids = Vec::new();
    for batch in loader.iter() {
        let batch = batch.unwrap();
        let index = batch.get::<i64>("index").unwrap();
        for (row, &sample) in batch.sample_ids().iter().enumerate() {
            assert_eq!(index[row], sample as i64);
        }
        ids.extend_from_slice(batch.sample_ids());
    }
    ids
}

/// A generous bound: only reached if a batch never comes.
const LONG: Duration = Duration::from_secs(120);

#[test]
fn a_held_producer_times_out_then_the_epoch_comes_whole() {
    let gate = Arc::new(Gate::default());
    let mut loader = gated_loader(&gate);
    let mut it = loader.iter();
    gate.wait_entered();
    // Nothing can come while the stage holds the first batch.
    assert_eq!(
        it.next_timeout(Duration::from_millis(10)).err(),
        Some(WaitTimedOut)
    );
    assert_eq!(
        it.next_timeout(Duration::from_millis(1)).err(),
        Some(WaitTimedOut)
    );
    assert!(!it.is_finished());
    gate.open();
    let mut ids = Vec::new();
    while let Some(batch) = it.next_timeout(LONG).expect("a batch within the bound") {
        ids.extend_from_slice(batch.unwrap().sample_ids());
    }
    assert_eq!(ids, (0..100).collect::<Vec<u64>>());
    // After the end it keeps saying so.
    assert!(matches!(it.next_timeout(LONG), Ok(None)));
    assert!(it.next().is_none());
}

#[test]
fn request_stop_returns_at_once_and_the_next_epoch_is_complete() {
    let gate = Arc::new(Gate::default());
    let mut loader = gated_loader(&gate);
    {
        let mut it = loader.iter();
        gate.wait_entered();
        it.request_stop();
        // Stopped: nothing more comes, without waiting for the held producer.
        assert!(matches!(it.next_timeout(LONG), Ok(None)));
        assert!(it.next().is_none());
        assert!(!it.is_finished(), "the producer is still inside the stage");
        gate.open();
        // Dropping the iterator joins the producer, which ends after the stage.
    }
    assert_eq!(loader.live_threads(), 0);
    assert_eq!(epoch_ids(&mut loader), (0..100).collect::<Vec<u64>>());
}
