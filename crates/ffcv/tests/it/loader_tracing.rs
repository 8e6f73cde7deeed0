//! The loader's tracing spans: `fill` per batch (the CPU pipelines), `slot_stage` around a
//! slot stage, `slot_wait` around the producer's wait for queue room, and `consumer_wait`
//! around the consumer's wait in `next`, each with its epoch and batch. A subscriber that
//! records every span the `ffcv` crate opens checks that each appears exactly where it
//! should. The test runs in its own process: the subscriber is global (the producer runs on
//! its own thread).

use crate::loader_support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ffcv::{Attachment, Loader, SlotOutput, SlotStage};
use loader_support::fixture;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One opened span: its name and its integer fields.
type Opened = (&'static str, BTreeMap<&'static str, u64>);

#[derive(Default)]
struct Capture {
    next_id: AtomicU64,
    spans: Arc<Mutex<Vec<Opened>>>,
}

struct Fields<'a>(&'a mut BTreeMap<&'static str, u64>);

impl Visit for Fields<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name(), value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name(), value as u64);
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl Subscriber for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("ffcv")
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = BTreeMap::new();
        span.record(&mut Fields(&mut fields));
        self.spans
            .lock()
            .unwrap()
            .push((span.metadata().name(), fields));
        Id::from_u64(self.next_id.fetch_add(1, Ordering::SeqCst) + 1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}
    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}
    fn event(&self, _event: &Event<'_>) {}
    fn enter(&self, _span: &Id) {}
    fn exit(&self, _span: &Id) {}
}

struct Nothing;

impl SlotStage for Nothing {
    fn process(
        &self,
        _slot: usize,
        _outputs: &mut [SlotOutput<'_>],
    ) -> Result<Option<Attachment>, ffcv::ExtensionError> {
        Ok(None)
    }
}

/// The (epoch, batch) fields of the spans named `name`, in the order they opened.
fn batches_of(spans: &[Opened], name: &str) -> Vec<(u64, u64)> {
    spans
        .iter()
        .filter(|(n, _)| *n == name)
        .map(|(_, f)| (f["epoch"], f["batch"]))
        .collect()
}

/// Runs one epoch, failing on any error; returns the batches.
fn run_epoch(loader: &mut Loader) -> usize {
    let mut batches = 0;
    for batch in loader.iter() {
        batch.unwrap();
        batches += 1;
    }
    batches
}

#[test]
fn each_batch_opens_fill_slot_wait_and_consumer_wait_spans() {
    ffcv_testkit::own_process(
        module_path!(),
        "each_batch_opens_fill_slot_wait_and_consumer_wait_spans",
        || {
            let capture = Capture::default();
            let spans = Arc::clone(&capture.spans);
            tracing::subscriber::set_global_default(capture).unwrap();

            // 100 samples in batches of 30: three full batches and one of 10.
            let mut loader = Loader::builder(fixture("scalars.beton"))
                .batch_size(30)
                .drop_last(false)
                .num_workers(1)
                .build()
                .unwrap();
            assert_eq!(run_epoch(&mut loader), 4);
            let seen = std::mem::take(&mut *spans.lock().unwrap());
            let each: Vec<(u64, u64)> = (0..4).map(|b| (0, b)).collect();
            assert_eq!(batches_of(&seen, "fill"), each);
            let samples: Vec<u64> = seen
                .iter()
                .filter(|(n, _)| *n == "fill")
                .map(|(_, f)| f["samples"])
                .collect();
            assert_eq!(samples, [30, 30, 30, 10]);
            // Every batch is sent through the queue, whether or not it had to wait for room.
            assert_eq!(batches_of(&seen, "slot_wait"), each);
            // One wait per batch, plus the call that finds the epoch over.
            let consumer: Vec<(u64, u64)> = (0..5).map(|b| (0, b)).collect();
            assert_eq!(batches_of(&seen, "consumer_wait"), consumer);
            assert!(batches_of(&seen, "slot_stage").is_empty());
            assert_eq!(seen.iter().filter(|(n, _)| *n == "epoch").count(), 1);

            // With a slot stage, each batch also opens a `slot_stage` span; the next epoch is 1.
            let mut staged = Loader::builder(fixture("scalars.beton"))
                .batch_size(50)
                .num_workers(1)
                .slot_stage(Arc::new(Nothing))
                .build()
                .unwrap();
            staged.set_next_epoch(1);
            assert_eq!(run_epoch(&mut staged), 2);
            let seen = std::mem::take(&mut *spans.lock().unwrap());
            assert_eq!(batches_of(&seen, "slot_stage"), [(1, 0), (1, 1)]);
            assert_eq!(batches_of(&seen, "fill"), [(1, 0), (1, 1)]);
            assert_eq!(batches_of(&seen, "consumer_wait"), [(1, 0), (1, 1), (1, 2)]);
        },
    );
}
