//! Every sample's bytes read through the process cache equal those read through the OS
//! cache, for random batch schedules over the FFCV fixtures, and the process cache's
//! counters agree with its schedule.

use crate::common;

use std::sync::Arc;

use beton_io::Reader;
use page_cache::{CachePolicy, OsConfig, PageCache, ProcessConfig};
use proptest::prelude::*;

use common::{FIXTURES_WITH_DATA, batches_of, compare_epoch, fixture, process_config};

/// A random schedule: a shuffled subset of the samples, cut into batches.
fn schedule_strategy(
    num_samples: u64,
) -> impl Strategy<Value = (Vec<u64>, usize, usize, usize, bool)> {
    (
        proptest::sample::subsequence(
            (0..num_samples).collect::<Vec<_>>(),
            0..=num_samples as usize,
        )
        .prop_shuffle(),
        1usize..10,
        0usize..5,
        1usize..4,
        any::<bool>(),
    )
}

fn check(
    name: &str,
    order: &[u64],
    batch_size: usize,
    ahead: usize,
    threads: usize,
    map_pages: bool,
) {
    let reader = Arc::new(Reader::open(fixture(name)).unwrap());
    let batches = batches_of(order, batch_size);
    let config = ProcessConfig {
        map_pages,
        ..process_config(ahead, threads)
    };
    let epoch = compare_epoch(&reader, &config, &batches);
    let stats = epoch.stats();
    let page_cache::EpochContext::Process(pe) = &epoch else {
        panic!("expected a process epoch");
    };
    let schedule = pe.schedule();
    assert!(stats.peak_slots_in_use <= schedule.num_slots, "{stats:?}");
    assert_eq!(stats.num_slots, schedule.num_slots);
    // Mapped pages stay in the reader's map: no slot memory.
    let slot_bytes = if map_pages {
        0
    } else {
        schedule.num_slots as u64 * reader.page_size()
    };
    assert_eq!(stats.slot_memory_bytes, slot_bytes);
    assert_eq!(stats.page_read_errors, 0);
    // Each scheduled page is read exactly once per epoch, up to the end of its last
    // allocation.
    assert_eq!(stats.pages_loaded, schedule.pages.len() as u64);
    let expected_bytes: u64 = schedule
        .pages
        .iter()
        .map(|p| common::page_read_bytes(&reader, p.page, false))
        .sum();
    assert_eq!(stats.storage_bytes_read, expected_bytes);
    // The pages loaded are exactly the pages of the samples used.
    let mut used: Vec<u64> = order
        .iter()
        .flat_map(|&s| reader.page_map().pages_of_sample(s).to_vec())
        .collect();
    used.sort_unstable();
    used.dedup();
    let mut scheduled: Vec<u64> = schedule.pages.iter().map(|p| p.page).collect();
    scheduled.sort_unstable();
    assert_eq!(scheduled, used);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn multipage_random_schedules_read_identical_bytes((order, bs, ahead, threads, map) in schedule_strategy(40)) {
        check("multipage.beton", &order, bs, ahead, threads, map);
    }

    #[test]
    fn page_retry_random_schedules_read_identical_bytes((order, bs, ahead, threads, map) in schedule_strategy(12)) {
        check("page_retry.beton", &order, bs, ahead, threads, map);
    }

    #[test]
    fn bytes_ndarray_random_schedules_read_identical_bytes((order, bs, ahead, threads, map) in schedule_strategy(64)) {
        check("bytes_ndarray.beton", &order, bs, ahead, threads, map);
    }
}

#[test]
fn every_fixture_reads_identically_in_file_order_and_reversed() {
    for name in FIXTURES_WITH_DATA {
        let reader = Reader::open(fixture(name)).unwrap();
        let n = reader.num_samples();
        let forward: Vec<u64> = (0..n).collect();
        let backward: Vec<u64> = (0..n).rev().collect();
        check(name, &forward, 7, 3, 12, false);
        check(name, &forward, 7, 3, 12, true);
        check(name, &backward, 5, 0, 1, false);
        check(name, &backward, 3, 1, 2, true);
    }
}

#[test]
fn multipage_sequential_epoch_loads_each_data_page_once_with_few_slots() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let order: Vec<u64> = (0..40).collect();
    let batches = batches_of(&order, 7);
    let epoch = compare_epoch(&reader, &process_config(3, 12), &batches);
    let stats = epoch.stats();
    // Pages 1..=7 hold the data (6 samples each, 4 on page 7).
    assert_eq!(stats.pages_loaded, 7);
    // Up to the end of each page's last blob: less than 7 whole pages, more than the
    // blobs alone (250..350 KiB each, 40 of them).
    let blobs: u64 = reader.alloc_rows().map(|r| r.size).sum();
    let last_ends: u64 = (1..=7)
        .map(|p| common::page_read_bytes(&reader, p, false))
        .sum();
    assert_eq!(stats.storage_bytes_read, last_ends);
    assert!(blobs <= last_ends && last_ends < 7 * 2 * 1024 * 1024);
    // Batch b needs pages b+1 and b+2 (7 samples, 6 per page). Page p is first needed
    // by batch p-2 (page 1 by batch 0) and may be fetched 3 batches earlier; it leaves
    // after batch p-1. Alive at batch 0: pages 1..=5; at 1: 2..=6; at 2: 3..=7.
    assert_eq!(stats.num_slots, 5);
    assert_eq!(stats.peak_slots_in_use, 5);
}

#[test]
fn scalars_without_allocations_need_no_slots_and_no_threads() {
    let reader = Arc::new(Reader::open(fixture("scalars.beton")).unwrap());
    let cache = page_cache::ProcessCache::new(Arc::clone(&reader), &process_config(3, 12)).unwrap();
    let batches = batches_of(&(0..100).collect::<Vec<_>>(), 7);
    let mut epoch = cache.schedule_epoch(&batches).unwrap();
    assert_eq!(cache.live_reader_threads(), 0);
    for b in 0..batches.len() {
        epoch.start_batch(b).unwrap();
    }
    assert_eq!(epoch.stats().num_slots, 0);
    assert_eq!(cache.slot_memory_bytes(), 0);
}

#[test]
fn os_cache_reads_equal_the_reader_and_give_no_page_counters() {
    let reader = Arc::new(Reader::open(fixture("page_retry.beton")).unwrap());
    let cache = PageCache::new(Arc::clone(&reader), &CachePolicy::default()).unwrap();
    let batches = vec![vec![3, 1], vec![11]];
    let mut epoch = cache.schedule_epoch(&batches).unwrap();
    epoch.start_batch(0).unwrap();
    for row in reader
        .alloc_rows()
        .filter(|r| r.sample_id == 3 || r.sample_id == 1)
    {
        assert_eq!(
            epoch.read(row.ptr).unwrap(),
            reader.data_at(row.ptr).unwrap()
        );
    }
    epoch.start_batch(1).unwrap();
    assert_eq!(epoch.stats(), page_cache::CacheStats::default());
}

#[test]
fn contexts_are_shared_across_threads_while_pages_are_prefetched() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<PageCache>();
    assert_send_sync::<page_cache::EpochContext>();

    let reader = Arc::new(Reader::open(fixture("page_retry.beton")).unwrap());
    let ptrs = common::ptrs_by_sample(&reader);
    let cache = PageCache::new(
        Arc::clone(&reader),
        &CachePolicy::Process(process_config(3, 4)),
    )
    .unwrap();
    for round in 0..20u64 {
        // A different order each round: rotate the samples.
        let order: Vec<u64> = (0..12).map(|i| (i + round) % 12).collect();
        let batches = batches_of(&order, 2);
        let mut epoch = cache.schedule_epoch(&batches).unwrap();
        for (b, batch) in batches.iter().enumerate() {
            epoch.start_batch(b).unwrap();
            let epoch = &epoch;
            std::thread::scope(|scope| {
                for t in 0..4 {
                    let ptrs = &ptrs;
                    let reader = &reader;
                    scope.spawn(move || {
                        let s = batch[t % batch.len()];
                        for &ptr in &ptrs[&s] {
                            assert!(epoch.read(ptr).unwrap() == reader.data_at(ptr).unwrap());
                        }
                    });
                }
            });
        }
    }
    assert_eq!(cache.stats().page_read_errors, 0);
}

#[test]
fn os_cache_auto_advice_follows_the_order() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let cache = page_cache::OsCache::new(Arc::clone(&reader), &OsConfig::default());
    let sequential = batches_of(&(0..40).collect::<Vec<_>>(), 7);
    // Sequential: the default readahead (MADV_SEQUENTIAL measured slower).
    assert_eq!(
        cache.advice_for(&sequential),
        Some(page_cache::Advice::Normal)
    );
    let fixed = page_cache::OsCache::new(
        Arc::clone(&reader),
        &OsConfig {
            advice: page_cache::OsAdvice::Fixed(page_cache::Advice::Sequential),
        },
    );
    assert_eq!(
        fixed.advice_for(&sequential),
        Some(page_cache::Advice::Sequential)
    );
    // Jumping between far pages: random; the file fits in memory, so default readahead.
    let jumping: Vec<u64> = (0..20).flat_map(|i| [i, 39 - i]).collect();
    assert_eq!(
        cache.advice_for(&batches_of(&jumping, 7)),
        Some(page_cache::Advice::Normal)
    );
    let off = page_cache::OsCache::new(
        Arc::clone(&reader),
        &OsConfig {
            advice: page_cache::OsAdvice::Off,
        },
    );
    assert_eq!(off.advice_for(&sequential), None);
    // Whatever the hint, reads are the map's bytes.
    let mut epoch = cache.schedule_epoch(&batches_of(&jumping, 7)).unwrap();
    assert_eq!(epoch.num_batches(), 6);
    epoch.start_batch(0).unwrap();
    let row = reader.alloc_rows().find(|r| r.sample_id == 39).unwrap();
    assert_eq!(
        epoch.read(row.ptr).unwrap(),
        reader.data_at(row.ptr).unwrap()
    );
}
