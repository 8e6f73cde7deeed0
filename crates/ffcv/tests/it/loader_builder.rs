//! The builder: FFCV's defaults, the seed rules, `len`, `next_epoch`, `filter`, and the
//! invalid combinations `build()` refuses with a clear error.

use crate::loader_support;

use ffcv::{DecoderChoice, Error, FilterValue, Loader, Order};
use loader_support::fixture;

fn scalars() -> String {
    fixture("scalars.beton")
}

fn config_error(builder: ffcv::LoaderBuilder) -> String {
    match builder.build() {
        Err(e @ Error::Config { .. }) => e.to_string(),
        Err(e) => panic!("expected a configuration error, got {e:?}"),
        Ok(_) => panic!("expected a configuration error, the loader built"),
    }
}

#[test]
fn invalid_combinations_fail_at_build_with_a_reason() {
    let b = || Loader::builder(scalars()).batch_size(8);
    assert!(config_error(Loader::builder(scalars())).contains("batch_size is required"));
    assert!(config_error(b().batch_size(0)).contains("batch_size must be at least 1"));
    assert!(config_error(b().num_workers(0)).contains("num_workers"));
    assert!(config_error(b().num_workers(-2)).contains("num_workers"));
    assert!(config_error(b().batches_ahead(0)).contains("batches_ahead"));
    assert!(config_error(b().rank(1).world_size(2)).contains("without distributed"));
    assert!(config_error(b().indices(vec![3, 100])).contains("indices[1] = 100"));
    assert!(
        config_error(b().disable("index").disable("value")).contains("every field is disabled")
    );
    let text = config_error(b().decoder("label", DecoderChoice::Default));
    assert!(
        text.contains("\"label\"") && text.contains("index, value"),
        "{text}"
    );
    let text = config_error(b().decoder("value", "int".parse().unwrap()));
    assert!(
        text.contains("IntDecoder") && text.contains("FloatField"),
        "{text}"
    );
    let custom: std::sync::Arc<dyn ffcv::traversal::TraversalOrder> =
        std::sync::Arc::new(ffcv::traversal::Sequential::all(100));
    assert!(
        config_error(b().order(Order::Custom(custom.clone())).indices(vec![1])).contains("indices")
    );
    assert!(
        config_error(
            b().order(Order::Custom(custom))
                .distributed(true)
                .world_size(2)
        )
        .contains("distributed")
    );
    // Rank out of range is the order's error.
    let err = b()
        .distributed(true)
        .world_size(2)
        .rank(2)
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Order(_)), "{err:?}");
    assert!(err.to_string().contains("rank 2 is out of range"), "{err}");
}

#[test]
fn defaults_are_ffcvs() {
    let loader = Loader::builder(scalars()).batch_size(8).build().unwrap();
    assert_eq!(loader.num_workers(), ffcv::affinity_cpus());
    assert_eq!(loader.len(), 12); // 100 / 8 with drop_last
    assert_eq!(loader.next_epoch(), 0);
    assert_eq!(loader.order(0), (0..100).collect::<Vec<u64>>()); // Sequential
    let keep = Loader::builder(scalars())
        .batch_size(8)
        .drop_last(false)
        .build()
        .unwrap();
    assert_eq!(keep.len(), 13);
}

#[test]
fn the_seed_is_drawn_recorded_and_repeatable() {
    let a = Loader::builder(scalars())
        .batch_size(8)
        .order(Order::Random)
        .build()
        .unwrap();
    let seed = a.seed();
    assert!(seed <= u64::from(u32::MAX));
    let b = Loader::builder(scalars())
        .batch_size(8)
        .order(Order::Random)
        .seed(seed)
        .build()
        .unwrap();
    assert_eq!(a.order(0), b.order(0));
    assert_eq!(a.order(3), b.order(3));
    assert_ne!(a.order(0), a.order(1), "Random reshuffles each epoch");
}

#[test]
fn distributed_random_without_a_seed_uses_zero() {
    let l = Loader::builder(scalars())
        .batch_size(8)
        .order(Order::Random)
        .distributed(true)
        .world_size(2)
        .rank(1)
        .build()
        .unwrap();
    assert_eq!(l.seed(), 0);
}

#[test]
fn each_epoch_advances_next_epoch_and_uses_its_order() {
    let mut loader = Loader::builder(scalars())
        .batch_size(25)
        .order(Order::Random)
        .seed(11)
        .num_workers(1)
        .build()
        .unwrap();
    for epoch in 0..3 {
        assert_eq!(loader.next_epoch(), epoch);
        let expected = loader.order(epoch);
        let mut it = loader.iter();
        assert_eq!(it.epoch(), epoch);
        let mut got = Vec::new();
        for b in it.by_ref() {
            let b = b.unwrap();
            assert_eq!(b.epoch(), epoch);
            got.extend(b.get::<i64>("index").unwrap().iter().map(|&v| v as u64));
        }
        assert_eq!(got, expected);
    }
    loader.set_next_epoch(1);
    let first: Vec<u64> = loader.iter().next().unwrap().unwrap().sample_ids().to_vec();
    assert_eq!(first, loader.order(1)[..25]);
}

#[test]
fn filter_keeps_the_matching_samples_with_the_same_knobs() {
    let loader = Loader::builder(scalars())
        .batch_size(4)
        .drop_last(false)
        .order(Order::Random)
        .seed(4)
        .build()
        .unwrap();
    let mut even = loader
        .filter("index", |v| matches!(v, FilterValue::Int(i) if i % 2 == 0))
        .unwrap();
    assert_eq!(even.seed(), 4);
    assert_eq!(even.indices().len(), 50);
    assert_eq!(even.len(), 13);
    let mut seen = Vec::new();
    for b in &mut even {
        seen.extend(b.unwrap().get::<i64>("index").unwrap().to_vec());
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..100).step_by(2).collect::<Vec<i64>>());
    // Float predicates see the value bit for bit (sample 1 is -0.0, sample 4 NaN).
    let negative = loader
        .filter(
            "value",
            |v| matches!(v, FilterValue::Float(x) if x.is_sign_negative()),
        )
        .unwrap();
    assert!(negative.indices().contains(&1));
    assert!(matches!(
        loader.filter("nope", |_| true).unwrap_err(),
        Error::Config { .. }
    ));
}

#[test]
fn indices_restrict_and_order_the_samples() {
    let mut loader = Loader::builder(scalars())
        .batch_size(3)
        .drop_last(false)
        .indices(vec![9, 2, 2, 50])
        .build()
        .unwrap();
    assert_eq!(loader.len(), 2);
    let ids: Vec<u64> = loader
        .iter()
        .flat_map(|b| b.unwrap().sample_ids().to_vec())
        .collect();
    assert_eq!(ids, vec![9, 2, 2, 50]);
}

/// An order that names a sample the file does not have.
struct PastTheEnd;

impl ffcv::traversal::TraversalOrder for PastTheEnd {
    fn order(&self, _epoch: u64) -> Vec<u64> {
        vec![0, 1, 100]
    }
}

#[test]
fn a_user_order_past_the_end_is_an_error_not_a_read() {
    let mut loader = Loader::builder(scalars())
        .batch_size(2)
        .drop_last(false)
        .order(Order::Custom(std::sync::Arc::new(PastTheEnd)))
        .build()
        .unwrap();
    assert_eq!(loader.len(), 2);
    let items: Vec<_> = loader.iter().collect();
    assert_eq!(items.len(), 1);
    let err = items[0].as_ref().unwrap_err();
    assert!(err.to_string().contains("sample 100"), "{err}");
}

#[test]
fn quasi_random_over_a_file_without_data_pages_is_refused_as_ffcv_does() {
    let err = Loader::builder(scalars())
        .batch_size(2)
        .order(Order::QuasiRandom)
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Order(_)), "{err:?}");
    assert!(err.to_string().contains("QuasiRandom"), "{err}");
}
