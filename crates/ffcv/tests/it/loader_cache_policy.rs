//! The loader's cache policy: FFCV's `os_cache` flag and the process-cache knobs, given in
//! any order, name the same `CachePolicy` as `cache_policy`, and a loader built either way
//! reads the same samples.

use ffcv::page_cache::{Advice, CachePolicy, OsAdvice, OsConfig, ProcessConfig};
use ffcv::{Error, Loader};

const SCALARS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/ffcv-1.0.2/scalars.beton"
);

const BYTES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/ffcv-1.0.2/bytes_ndarray.beton"
);

/// An epoch's `index` values and `blob` rows, in order.
fn epoch(loader: &mut Loader) -> (Vec<i64>, Vec<u8>) {
    let (mut index, mut blob) = (Vec::new(), Vec::new());
    for batch in loader.iter() {
        let batch = batch.unwrap();
        index.extend_from_slice(batch.get::<i64>("index").unwrap().as_slice());
        blob.extend_from_slice(batch.get::<u8>("blob").unwrap().as_slice());
    }
    (index, blob)
}

#[test]
fn process_knobs_count_whether_given_before_or_after_os_cache() {
    let before = Loader::builder(SCALARS)
        .prefetch_ahead(5)
        .reader_threads(2)
        .max_memory(1 << 30)
        .os_cache(false);
    let after = Loader::builder(SCALARS)
        .os_cache(false)
        .prefetch_ahead(5)
        .reader_threads(2)
        .max_memory(1 << 30);
    let expected = CachePolicy::Process(ProcessConfig {
        prefetch_ahead: 5,
        reader_threads: 2,
        max_memory: Some(1 << 30),
        ..ProcessConfig::default()
    });
    assert_eq!(before.cache_policy_in_use(), expected);
    assert_eq!(after.cache_policy_in_use(), expected);
    // Switching back to the OS cache keeps the OS cache's own knobs.
    assert_eq!(
        before.os_cache(true).cache_policy_in_use(),
        CachePolicy::Os(OsConfig::default())
    );
}

#[test]
fn the_default_is_the_os_cache_and_a_policy_sets_its_knobs() {
    assert_eq!(
        Loader::builder(SCALARS).cache_policy_in_use(),
        CachePolicy::Os(OsConfig::default())
    );
    let os = CachePolicy::Os(OsConfig {
        advice: OsAdvice::Fixed(Advice::Random),
    });
    let builder = Loader::builder(SCALARS).cache_policy(os.clone());
    assert_eq!(builder.cache_policy_in_use(), os);
    let process = CachePolicy::Process(ProcessConfig {
        hold_all_pages: true,
        ..ProcessConfig::default()
    });
    let builder = builder.cache_policy(process.clone());
    assert_eq!(builder.cache_policy_in_use(), process);
    // FFCV's flag still switches between the two, each with the knobs it was given.
    assert_eq!(builder.clone().os_cache(true).cache_policy_in_use(), os);
    assert_eq!(
        builder.os_cache(true).os_cache(false).cache_policy_in_use(),
        process
    );
}

#[test]
fn a_policy_is_checked_like_the_knobs() {
    let zero_readers = CachePolicy::Process(ProcessConfig {
        reader_threads: 0,
        ..ProcessConfig::default()
    });
    let err = Loader::builder(SCALARS)
        .batch_size(10)
        .cache_policy(zero_readers)
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config { reason, .. } if reason == "reader_threads must be at least 1"),
        "{err}"
    );
    // The OS cache starts no readers, so the process knob does not matter there.
    Loader::builder(SCALARS)
        .batch_size(10)
        .reader_threads(0)
        .build()
        .unwrap();
}

#[test]
fn both_policies_deliver_the_same_samples() {
    let mut os = Loader::builder(BYTES)
        .batch_size(16)
        .num_workers(2)
        .drop_last(false)
        .cache_policy(CachePolicy::Os(OsConfig {
            advice: OsAdvice::Off,
        }))
        .build()
        .unwrap();
    let mut process = Loader::builder(BYTES)
        .batch_size(16)
        .num_workers(2)
        .drop_last(false)
        .cache_policy(CachePolicy::Process(ProcessConfig {
            reader_threads: 2,
            prefetch_ahead: 1,
            ..ProcessConfig::default()
        }))
        .build()
        .unwrap();
    let (os_index, os_blob) = epoch(&mut os);
    let (process_index, process_blob) = epoch(&mut process);
    assert_eq!(os_index, (0..64).collect::<Vec<i64>>());
    assert_eq!(process_index, os_index);
    assert!(os_blob.iter().any(|&b| b != 0));
    assert!(
        process_blob == os_blob,
        "the two caches read different blob bytes"
    );
    assert_eq!(os.stats().storage_bytes_read, 0);
    assert!(process.stats().storage_bytes_read > 0);
}
