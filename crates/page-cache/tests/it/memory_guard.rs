//! The memory guard: a schedule needing more slot memory than `max_memory` fails with a
//! clear error before anything is allocated or started; slot memory is allocated once
//! and reused by later epochs that fit in it.

use crate::common;

use std::sync::Arc;

use beton_io::Reader;
use page_cache::{Error, ProcessCache, ProcessConfig};

use common::{batches_of, fixture};

const MIB2: u64 = 2 * 1024 * 1024;

fn cache(max_memory: Option<u64>) -> ProcessCache {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let config = ProcessConfig {
        max_memory,
        reader_threads: 2,
        ..ProcessConfig::default()
    };
    ProcessCache::new(reader, &config).unwrap()
}

/// Batches that each need one page of multipage (6 samples per page, pages 1..=7):
/// with prefetch 3, 4 pages are alive at once, so 4 slots.
fn one_page_per_batch() -> Vec<Vec<u64>> {
    batches_of(&(0..36).collect::<Vec<_>>(), 6)
}

#[test]
fn guard_fires_before_any_allocation_and_names_need_and_budget() {
    let cache = cache(Some(4 * MIB2 - 1));
    let err = cache
        .schedule_epoch(&one_page_per_batch())
        .err()
        .expect("over budget");
    match &err {
        Error::MemoryBudget {
            needed,
            budget,
            num_slots,
            page_size,
            ..
        } => {
            assert_eq!(*needed, 4 * MIB2);
            assert_eq!(*budget, 4 * MIB2 - 1);
            assert_eq!(*num_slots, 4);
            assert_eq!(*page_size, MIB2);
        }
        other => panic!("unexpected error {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("8388608 bytes"), "{msg}");
    assert!(msg.contains("8388607 bytes"), "{msg}");
    assert!(msg.contains("QuasiRandom"), "{msg}");
    assert!(msg.contains("multipage.beton"), "{msg}");
    // Nothing was allocated, no reader thread started.
    assert_eq!(cache.slot_memory_bytes(), 0);
    assert_eq!(cache.slot_allocations(), 0);
    assert_eq!(cache.live_reader_threads(), 0);
}

#[test]
fn schedule_exactly_at_the_budget_is_accepted() {
    let cache = cache(Some(4 * MIB2));
    let epoch = cache.schedule_epoch(&one_page_per_batch()).unwrap();
    assert_eq!(epoch.stats().num_slots, 4);
    assert_eq!(cache.slot_memory_bytes(), 4 * MIB2);
}

#[test]
fn a_random_order_over_every_page_needs_more_slots_than_a_page_wise_one() {
    // Sample i of batch b alternates between far-apart pages, so every page stays
    // alive for most of the epoch: the guard fires for a budget the page-wise order fits.
    let cache = cache(Some(4 * MIB2));
    let interleaved: Vec<u64> = (0..6)
        .flat_map(|i| (0..6).map(move |p| p * 6 + i))
        .collect();
    let err = cache
        .schedule_epoch(&batches_of(&interleaved, 6))
        .err()
        .expect("over budget");
    assert!(
        matches!(err, Error::MemoryBudget { num_slots: 6, .. }),
        "{err:?}"
    );
    assert_eq!(cache.slot_allocations(), 0);
}

#[test]
fn default_budget_is_the_os_available_memory() {
    let cache = cache(None);
    // A small epoch fits any machine that runs the tests.
    let epoch = cache.schedule_epoch(&one_page_per_batch()).unwrap();
    assert_eq!(epoch.stats().slot_memory_bytes, 4 * MIB2);
    assert!(page_cache::available_memory().is_some());
}

#[test]
fn slot_memory_is_allocated_once_and_reused_across_epochs() {
    let cache = cache(None);
    for _ in 0..3 {
        let batches = one_page_per_batch();
        let mut epoch = cache.schedule_epoch(&batches).unwrap();
        for b in 0..batches.len() {
            epoch.start_batch(b).unwrap();
        }
    }
    assert_eq!(cache.slot_allocations(), 1);
    assert_eq!(cache.slot_memory_bytes(), 4 * MIB2);
    // A smaller epoch reuses the larger memory.
    {
        let mut epoch = cache.schedule_epoch(&[vec![0]]).unwrap();
        epoch.start_batch(0).unwrap();
        assert_eq!(epoch.stats().num_slots, 1);
    }
    assert_eq!(cache.slot_allocations(), 1);
    // A larger one replaces it (and is kept from then on).
    let all_at_once = vec![(0..40).collect::<Vec<u64>>()];
    drop(cache.schedule_epoch(&all_at_once).unwrap());
    assert_eq!(cache.slot_allocations(), 2);
    assert_eq!(cache.slot_memory_bytes(), 7 * MIB2);
    drop(cache.schedule_epoch(&one_page_per_batch()).unwrap());
    assert_eq!(cache.slot_allocations(), 2);
    // Every scheduled page was read or still held from the epoch before (retain_pages):
    // an epoch ends with pages 3..=6 in the four slots; the next one prefetches pages
    // 1..=4 at batch 0, keeps 3 and 4 and overwrites 5 and 6 for 1 and 2. So epochs 2
    // and 3 reuse two pages each; the one-batch epoch needs page 1, which is not held.
    let stats = cache.stats();
    assert_eq!((stats.pages_loaded, stats.pages_reused), (3 * 6 + 1 - 4, 4));
}
