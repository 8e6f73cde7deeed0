//! `loader/mixture/*` rows: a weighted mixture of 3 sources (`Loader::builder_mixture`,
//! weights 0.5/0.3/0.2, Random order per source) against a Random-order loader over one
//! file, the same number of samples per epoch, the two passes interleaved; the ratio is
//! their samples/s. The 3 sources are the data set's file named 3 times (each stitched
//! into the map as its own shard), so the two loaders decode the same bytes and the ratio
//! isolates the mixture's order, its 3-file dataset and its batching.

use std::cell::RefCell;
use std::hint::black_box;

use ffcv::{Loader, Order, traversal};
use serde_json::json;

use crate::datasets::Dataset;
use crate::report::Row;
use crate::timing::interleaved;

/// Timed epochs per pass (after one warm-up epoch of each).
const REPS: usize = 11;

/// The weights of the 3 sources.
const WEIGHTS: [f64; 3] = [0.5, 0.3, 0.2];

/// The row's name for a data set.
pub fn row_name(label: &str) -> String {
    format!("loader/mixture/{label}/3-sources")
}

fn epoch(loader: &RefCell<Loader>) -> Result<(), String> {
    for batch in loader.borrow_mut().iter() {
        black_box(batch.map_err(|e| e.to_string())?.len());
    }
    Ok(())
}

/// The row for `dataset`: every CPU, OS cache, Random order, `batch_size`.
pub fn row(dataset: &Dataset, batch_size: usize) -> Result<Row, String> {
    let err = |e: ffcv::Error| e.to_string();
    let one = Loader::builder(&dataset.path)
        .batch_size(batch_size)
        .order(Order::Random)
        .seed(0)
        .build()
        .map_err(err)?;
    let n = one.len() as u64 * batch_size as u64;
    let path = dataset.path.to_string_lossy().into_owned();
    let opened = Loader::builder_mixture([path.clone(), path.clone(), path], &WEIGHTS)
        .order(Order::Random)
        .seed(0)
        .samples_per_epoch(n)
        .open()
        .map_err(err)?;
    // What computing one epoch's order costs (the producer does it at each epoch start).
    let started = std::time::Instant::now();
    black_box(traversal::TraversalOrder::order(opened.order().as_ref(), 1).len());
    let order_ms = started.elapsed().as_secs_f64() * 1e3;
    let mixture = opened
        .loader_builder()
        .batch_size(batch_size)
        .build()
        .map_err(err)?;
    let batches = one.len();
    let (one, mixture) = (RefCell::new(one), RefCell::new(mixture));
    let [single, mixed] = interleaved(REPS, [&|| epoch(&one), &|| epoch(&mixture)])?;
    let (s, m) = (single.median(), mixed.median());
    let stats = mixture.borrow().stats();
    let payload = stats.payload_bytes as f64 / stats.epochs.max(1) as f64;
    let mut row = Row {
        name: row_name(&dataset.label),
        config: format!(
            "{} as 3 sources weighted 0.5/0.3/0.2, Random per source, OS cache, every CPU, \
             batch {batch_size}, {batches} batches vs one file Random",
            dataset.label
        ),
        samples_per_sec: n as f64 / m,
        bytes_per_sec: payload / m,
        ratio: Some(s / m),
        ratio_to: Some("one file, Random".to_owned()),
        ..Row::default()
    };
    for (key, value) in [
        ("dataset", json!(dataset.label)),
        ("epoch_seconds", mixed.summary()),
        ("baseline_epoch_seconds", single.summary()),
        ("order_ms", json!(order_ms)),
    ] {
        row.extra.insert(key.to_owned(), value);
    }
    Ok(row)
}
