//! `loader/resume/*` rows: the cost of taking a loader state after every batch. One
//! Random-order loader runs an epoch with and without `EpochIter::state()` (and its
//! JSON text) after each batch, the two passes interleaved; the ratio is their samples/s.

use std::cell::RefCell;
use std::hint::black_box;

use ffcv::{Loader, Order};
use serde_json::json;

use crate::datasets::Dataset;
use crate::report::Row;
use crate::timing::interleaved;

/// Timed epochs per pass (after one warm-up epoch of each).
const REPS: usize = 5;

/// The row's name for a data set.
pub fn row_name(label: &str) -> String {
    format!("loader/resume/{label}/state-every-batch")
}

/// One epoch; with `take_state`, a state (and its JSON) after every batch.
fn epoch(loader: &RefCell<Loader>, take_state: bool) -> Result<(), String> {
    let mut loader = loader.borrow_mut();
    let mut it = loader.iter();
    while let Some(batch) = it.next() {
        let batch = batch.map_err(|e| e.to_string())?;
        black_box(batch.len());
        drop(batch);
        if take_state {
            black_box(it.state().to_json().len());
        }
    }
    Ok(())
}

/// The row for `dataset`: every CPU, OS cache, Random order.
pub fn row(dataset: &Dataset, batch_size: usize) -> Result<Row, String> {
    let loader = Loader::builder(&dataset.path)
        .batch_size(batch_size)
        .order(Order::Random)
        .seed(0)
        .build()
        .map_err(|e| e.to_string())?;
    let samples = (loader.len() * batch_size) as f64;
    let batches = loader.len();
    let loader = RefCell::new(loader);
    let [plain, with_state] =
        interleaved(REPS, [&|| epoch(&loader, false), &|| epoch(&loader, true)])?;
    let (p, s) = (plain.median(), with_state.median());
    let stats = loader.borrow().stats();
    let payload = stats.payload_bytes as f64 / stats.epochs.max(1) as f64;
    let mut row = Row {
        name: row_name(&dataset.label),
        config: format!(
            "{} Random, OS cache, every CPU, batch {batch_size}: state() + to_json() after each of {batches} batches vs none",
            dataset.label
        ),
        samples_per_sec: samples / s,
        bytes_per_sec: payload / s,
        ratio: Some(p / s),
        ratio_to: Some("no state taken".to_owned()),
        ..Row::default()
    };
    for (key, value) in [
        ("dataset", json!(dataset.label)),
        ("epoch_seconds", with_state.summary()),
        ("baseline_epoch_seconds", plain.summary()),
        (
            "state_us_per_batch",
            json!((s - p) / batches.max(1) as f64 * 1e6),
        ),
    ] {
        row.extra.insert(key.to_owned(), value);
    }
    Ok(row)
}
