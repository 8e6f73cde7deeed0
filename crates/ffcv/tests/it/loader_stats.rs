//! The loader's counters (`Loader::stats`): who waited on whom. The producer's slow
//! pipelines show up as the consumer's wait in `next`, a consumer that holds batches
//! shows up as the producer's wait for queue room, and a slot stage's time is its own
//! counter; without a GPU stage the copy counters stay at zero. Only facts that follow
//! from the code's structure are asserted (a sleep inside a timed region makes that
//! region at least as long), never how fast anything ran.

use crate::loader_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ffcv::decode::{DecoderOutput, FieldInfo, SampleInput, default_decoder};
use ffcv::format::FieldType;
use ffcv::{Attachment, Decoder, Loader, LoaderStats, PipelineSpec, SlotOutput, SlotStage};
use loader_support::fixture;

/// `scalars.beton`: 100 samples, fields `index` (Int) and `value` (Float).
const SAMPLES: u64 = 100;

/// The Int decoder, slowed down by a sleep per sample, and without its copy rule so that
/// every sample goes through `decode`.
struct Slow {
    inner: Arc<dyn Decoder>,
    per_sample: Duration,
    calls: Arc<AtomicUsize>,
}

impl Decoder for Slow {
    fn name(&self) -> String {
        format!("Slow({})", self.inner.name())
    }

    fn declare(&self, field: &FieldInfo<'_>) -> Result<DecoderOutput, ffcv::ExtensionError> {
        self.inner.declare(field)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        s: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.per_sample);
        self.inner.decode(input, out, s)
    }
}

/// A slot stage that sleeps on every batch and counts its calls.
struct Sleepy {
    per_batch: Duration,
    calls: AtomicUsize,
}

impl SlotStage for Sleepy {
    fn process(
        &self,
        _slot: usize,
        _outputs: &mut [SlotOutput<'_>],
    ) -> Result<Option<Attachment>, ffcv::ExtensionError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.per_batch);
        Ok(None)
    }
}

fn run_epoch(loader: &mut Loader) -> (usize, u64) {
    let mut batches = 0;
    let mut samples = 0;
    for batch in loader.iter() {
        let batch = batch.unwrap();
        batches += 1;
        samples += batch.sample_ids().len() as u64;
    }
    (batches, samples)
}

/// Without a GPU stage, or before any batch, these counters are zero.
fn assert_no_gpu(stats: &LoaderStats) {
    assert_eq!(stats.h2d_bytes, 0, "{stats:?}");
    assert_eq!(stats.h2d_timed_batches, 0, "{stats:?}");
    assert_eq!(stats.h2d_time, Duration::ZERO, "{stats:?}");
}

#[test]
fn a_fresh_loader_has_counted_nothing_and_an_epoch_counts_both_sides() {
    let mut loader = Loader::builder(fixture("scalars.beton"))
        .batch_size(30)
        .drop_last(false)
        .num_workers(1)
        .build()
        .unwrap();
    let fresh = loader.stats();
    assert_eq!(fresh.epochs, 0);
    assert_eq!(fresh.batches, 0);
    assert_eq!(fresh.consumer_wait, Duration::ZERO);
    assert_eq!(fresh.wait_slot, Duration::ZERO);
    assert_eq!(fresh.decode, Duration::ZERO);
    assert_no_gpu(&fresh);

    assert_eq!(run_epoch(&mut loader), (4, SAMPLES));
    let one = loader.stats();
    assert_eq!((one.epochs, one.batches, one.samples), (1, 4, SAMPLES));
    // Eight bytes per Int and per Float value.
    assert_eq!(one.payload_bytes, SAMPLES * 16);
    assert!(one.consumer_wait > Duration::ZERO, "{one:?}");
    assert!(one.wait_slot > Duration::ZERO, "{one:?}");
    // No slot stage: its timer never runs.
    assert_eq!(one.slot_stage, Duration::ZERO);
    assert_no_gpu(&one);

    // The counters are sums over epochs: each grows with a second epoch.
    run_epoch(&mut loader);
    let two = loader.stats();
    assert_eq!((two.epochs, two.batches, two.samples), (2, 8, 2 * SAMPLES));
    assert!(two.consumer_wait > one.consumer_wait, "{one:?} {two:?}");
    assert!(two.wait_slot > one.wait_slot, "{one:?} {two:?}");
    assert!(two.decode > one.decode, "{one:?} {two:?}");
    assert_no_gpu(&two);
}

#[test]
fn a_slow_pipeline_is_decode_time_and_the_consumer_waits_for_it() {
    let per_sample = Duration::from_millis(1);
    let calls = Arc::new(AtomicUsize::new(0));
    let slow = Slow {
        inner: default_decoder(&FieldType::Int).unwrap(),
        per_sample,
        calls: Arc::clone(&calls),
    };
    let mut loader = Loader::builder(fixture("scalars.beton"))
        .batch_size(25)
        .num_workers(1)
        .pipeline("index", PipelineSpec::new(slow))
        .build()
        .unwrap();
    assert_eq!(run_epoch(&mut loader), (4, SAMPLES));
    assert_eq!(calls.load(Ordering::SeqCst), SAMPLES as usize);
    let stats = loader.stats();
    // One worker runs the sleeps one after another inside the producer's decode timer.
    assert!(
        stats.decode >= per_sample * SAMPLES as u32,
        "decode {:?} < {} sleeps of {per_sample:?}",
        stats.decode,
        SAMPLES
    );
    assert!(stats.consumer_wait > Duration::ZERO, "{stats:?}");
    assert_eq!(stats.slot_stage, Duration::ZERO);
    assert_no_gpu(&stats);
}

#[test]
fn a_consumer_holding_batches_makes_the_producer_wait_for_queue_room() {
    let mut loader = Loader::builder(fixture("scalars.beton"))
        .batch_size(10)
        .batches_ahead(1)
        .num_workers(1)
        .build()
        .unwrap();
    let mut held = Vec::new();
    for batch in loader.iter() {
        // Keep each batch for a while, as a training step would.
        std::thread::sleep(Duration::from_millis(2));
        held.push(batch.unwrap());
        if held.len() > 2 {
            held.remove(0);
        }
    }
    drop(held);
    let stats = loader.stats();
    assert_eq!(stats.batches, 10);
    assert!(stats.wait_slot > Duration::ZERO, "{stats:?}");
    assert!(stats.consumer_wait > Duration::ZERO, "{stats:?}");
    assert_no_gpu(&stats);
}

#[test]
fn the_slot_stage_has_its_own_timer() {
    let per_batch = Duration::from_millis(2);
    let stage = Arc::new(Sleepy {
        per_batch,
        calls: AtomicUsize::new(0),
    });
    let mut loader = Loader::builder(fixture("scalars.beton"))
        .batch_size(20)
        .num_workers(1)
        .slot_stage(stage.clone())
        .build()
        .unwrap();
    assert_eq!(run_epoch(&mut loader), (5, SAMPLES));
    assert_eq!(stage.calls.load(Ordering::SeqCst), 5);
    let stats = loader.stats();
    // The timer encloses `process`, so it holds at least the five sleeps.
    assert!(stats.slot_stage >= per_batch * 5, "{stats:?}");
    // A custom slot stage is not a GPU stage: no copy counters.
    assert_no_gpu(&stats);
}
