//! The loader visits samples in FFCV's recorded RANDOM orders (NumPy's
//! `default_rng(seed + epoch).permutation`), read back through the `index` field.

use crate::loader_support;

use ffcv::{Loader, Order};
use loader_support::fixture;
use serde_json::Value;

#[test]
fn random_orders_match_ffcvs_recorded_orders() {
    for name in ["scalars", "bytes_ndarray", "multipage"] {
        let text = std::fs::read_to_string(fixture(&format!("{name}.order.json"))).unwrap();
        let recorded: Value = serde_json::from_str(&text).unwrap();
        for case in recorded["random"].as_array().unwrap() {
            let seed = case["seed"].as_u64().unwrap();
            let epoch = case["epoch"].as_u64().unwrap();
            let want: Vec<i64> = case["order"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect();
            for os_cache in [true, false] {
                let mut loader = Loader::builder(fixture(&format!("{name}.beton")))
                    .batch_size(7)
                    .drop_last(false)
                    .order(Order::Random)
                    .seed(seed)
                    .os_cache(os_cache)
                    .num_workers(2)
                    .build()
                    .unwrap();
                loader.set_next_epoch(epoch);
                let mut got = Vec::new();
                for b in &mut loader {
                    got.extend(b.unwrap().get::<i64>("index").unwrap().to_vec());
                }
                assert_eq!(got, want, "{name} seed {seed} epoch {epoch}");
            }
        }
    }
}
