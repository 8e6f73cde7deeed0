//! `loader/photos/views/*` rows: two RandomResizedCrop-224 views of each photograph
//! (`LoaderBuilder::view`, FFCV-SSL's `custom_field_mapper`) against one view, on the
//! photograph data set, one worker. Two two-view loaders are measured: the default, where
//! the JPEG of a sample is decoded once for both views when rgb-image's rule expects that
//! to be cheaper (`ViewsPolicy::Auto`), and each view decoded on its own
//! (`ViewsPolicy::PerView`, what two independent decoders cost). The three passes' timed
//! epochs alternate (one view, two views, two decodes, one view, ...), so a change of load
//! hits all of them; `cost_vs_one_view` is a two-view epoch's median seconds over the
//! one-view epoch's, and `ratio` the throughput against one view (its inverse).

use std::cell::RefCell;
use std::hint::black_box;

use ffcv::decode::RandomResizedCropRGBImageDecoder;
use ffcv::image::ViewsPolicy;
use ffcv::{Loader, LoaderBuilder, Order, PipelineSpec};
use serde_json::json;

use crate::datasets::Dataset;
use crate::report::Row;
use crate::timing::interleaved;

/// Timed epochs per pass (after one warm-up epoch of each).
const REPS: usize = 5;
/// Samples per batch.
const BATCH: usize = 128;

/// The rows' names: the default two-view loader and the one that decodes per view.
pub fn row_names() -> [String; 2] {
    [
        "loader/photos/views/1t/rrc224x2".to_owned(),
        "loader/photos/views/1t/rrc224x2/per-view".to_owned(),
    ]
}

fn epoch(loader: &RefCell<Loader>) -> Result<(), String> {
    for batch in loader.borrow_mut().iter() {
        black_box(batch.map_err(|e| e.to_string())?.len());
    }
    Ok(())
}

fn rrc() -> PipelineSpec {
    PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((224, 224)))
}

/// The rows for the photograph data set.
pub fn rows(dataset: &Dataset) -> Result<Vec<Row>, String> {
    let err = |e: ffcv::Error| e.to_string();
    let base = || -> LoaderBuilder {
        Loader::builder(&dataset.path)
            .batch_size(BATCH)
            .num_workers(1)
            .order(Order::Random)
            .seed(0)
            .disable("label")
            .pipeline(dataset.field.as_str(), rrc())
    };
    let two = |policy| {
        base()
            .view("image_0", dataset.field.as_str(), rrc())
            .views_policy(policy)
            .build()
    };
    let one = RefCell::new(base().build().map_err(err)?);
    let once = RefCell::new(two(ViewsPolicy::Auto).map_err(err)?);
    let twice = RefCell::new(two(ViewsPolicy::PerView).map_err(err)?);
    let samples = (one.borrow().len() * BATCH) as f64;
    let [t1, t2, t2x] = interleaved(REPS, [&|| epoch(&one), &|| epoch(&once), &|| epoch(&twice)])?;
    let payload = {
        let stats = one.borrow().stats();
        stats.payload_bytes as f64 / stats.epochs.max(1) as f64
    };
    let [auto_name, twice_name] = row_names();
    let make = |name: String, how: &str, t: &crate::timing::Timing| {
        let mut row = Row {
            name,
            config: format!(
                "{}: image and image_0 = image, both random-resized-crop:224x224, {how}; \
                 1 worker, OS cache, Random, batch {BATCH}; vs image alone",
                dataset.label
            ),
            samples_per_sec: samples / t.median(),
            bytes_per_sec: payload / t.median(),
            ratio: Some(t1.median() / t.median()),
            ratio_to: Some("one view".to_owned()),
            ..Row::default()
        };
        for (key, value) in [
            ("dataset", json!(dataset.label)),
            ("cost_vs_one_view", json!(t.median() / t1.median())),
            ("epoch_seconds", t.summary()),
            ("baseline_epoch_seconds", t1.summary()),
            ("alternated_with", json!("one view")),
        ] {
            row.extra.insert(key.to_owned(), value);
        }
        row
    };
    Ok(vec![
        make(
            auto_name,
            "decoded once where the rule expects it to pay",
            &t2,
        ),
        make(twice_name, "each view decoded on its own", &t2x),
    ])
}
