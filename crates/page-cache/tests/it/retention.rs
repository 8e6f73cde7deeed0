//! Pages kept across epochs (`retain_pages`): a page whose slot still holds it from the
//! previous epoch is not read again, and every byte served stays equal to the file's.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use beton_io::Reader;
use common::{fixture, process_config, ptrs_by_sample};
use page_cache::{ProcessCache, ProcessConfig};
use proptest::prelude::*;

fn batches_of(order: &[u64], bs: usize) -> Vec<Vec<u64>> {
    order.chunks(bs.max(1)).map(<[u64]>::to_vec).collect()
}

/// Runs a whole epoch, asserting every allocation's bytes equal the reader's (the OS
/// cache's), and returns (pages loaded, pages reused, pages scheduled).
fn run_epoch(
    cache: &ProcessCache,
    reader: &Reader,
    ptrs: &BTreeMap<u64, Vec<u64>>,
    batches: &[Vec<u64>],
) -> (u64, u64, usize) {
    let mut epoch = cache.schedule_epoch(batches).unwrap();
    for (b, batch) in batches.iter().enumerate() {
        epoch.start_batch(b).unwrap();
        for s in batch {
            for &ptr in ptrs.get(s).map(Vec::as_slice).unwrap_or(&[]) {
                let got = epoch.read(ptr).unwrap();
                assert!(got == reader.data_at(ptr).unwrap(), "sample {s} ptr {ptr}");
            }
        }
    }
    let st = epoch.stats();
    (
        st.pages_loaded,
        st.pages_reused,
        epoch.schedule().pages.len(),
    )
}

#[test]
fn a_second_epoch_in_the_same_order_reads_no_page_when_its_pages_fit_the_slots() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let ptrs = ptrs_by_sample(&reader);
    // Four batches, prefetched 3 ahead: every page is alive from batch 0, one slot each.
    let cache = ProcessCache::new(Arc::clone(&reader), &process_config(3, 2)).unwrap();
    let order: Vec<u64> = vec![39, 3, 17, 8, 25, 0, 31, 12, 6, 20, 33, 1];
    let batches = batches_of(&order, 3);
    let (loaded, reused, pages) = run_epoch(&cache, &reader, &ptrs, &batches);
    assert_eq!((loaded, reused), (pages as u64, 0));
    assert_eq!(cache.stats().num_slots, pages);
    let (loaded, reused, pages2) = run_epoch(&cache, &reader, &ptrs, &batches);
    assert_eq!(pages2, pages);
    assert_eq!((loaded, reused), (0, pages as u64));
    assert_eq!(cache.slot_allocations(), 1);
    assert_eq!(cache.stats().pages_loaded, pages as u64);
}

#[test]
fn when_every_page_fits_any_later_order_reads_no_page() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let ptrs = ptrs_by_sample(&reader);
    let cache = ProcessCache::new(Arc::clone(&reader), &process_config(3, 2)).unwrap();
    // One batch of every sample: every data page (1..=7) alive at once, 7 slots.
    let all: Vec<u64> = (0..40).collect();
    let (loaded, _, pages) = run_epoch(&cache, &reader, &ptrs, std::slice::from_ref(&all));
    assert_eq!((loaded, pages), (7, 7));
    let mut rev = all.clone();
    rev.reverse();
    let (loaded, reused, pages) = run_epoch(&cache, &reader, &ptrs, &[rev]);
    assert_eq!((loaded, reused, pages), (0, 7, 7));
}

#[test]
fn retain_pages_false_rereads_every_page() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let ptrs = ptrs_by_sample(&reader);
    let config = ProcessConfig {
        retain_pages: false,
        ..process_config(2, 2)
    };
    let cache = ProcessCache::new(Arc::clone(&reader), &config).unwrap();
    let batches = batches_of(&(0..40).collect::<Vec<_>>(), 6);
    for _ in 0..2 {
        let (loaded, reused, pages) = run_epoch(&cache, &reader, &ptrs, &batches);
        assert_eq!((loaded, reused), (pages as u64, 0));
    }
}

#[test]
fn a_failed_read_leaves_no_trusted_slot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("multipage.beton");
    let original = std::fs::read(fixture("multipage.beton")).unwrap();
    std::fs::write(&path, &original).unwrap();
    let reader = Arc::new(Reader::open(&path).unwrap());
    let ptrs = ptrs_by_sample(&reader);
    let cache = ProcessCache::new(Arc::clone(&reader), &process_config(0, 1)).unwrap();
    // Cut the file inside page 4: pages 1..=3 read, page 4 fails.
    let mib2 = 2 * 1024 * 1024;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4 * mib2 + 1000)
        .unwrap();
    let batches = batches_of(&(0..40).collect::<Vec<_>>(), 6);
    {
        let mut epoch = cache.schedule_epoch(&batches).unwrap();
        let failed = (0..batches.len()).find(|&b| epoch.start_batch(b).is_err());
        assert!(failed.is_some(), "the cut page must fail");
    }
    // Restore the file: a slot that failed (or was never read) must be read now.
    std::fs::write(&path, &original).unwrap();
    let (loaded, reused, pages) = run_epoch(&cache, &reader, &ptrs, &batches);
    assert_eq!(loaded + reused, pages as u64);
    assert!(
        loaded >= 4,
        "pages 4..=7 must be read again, loaded {loaded}"
    );
    assert!(reused <= 3, "only pages 1..=3 were whole, reused {reused}");
}

#[test]
fn an_epoch_dropped_midway_leaves_only_complete_slots_trusted() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let ptrs = ptrs_by_sample(&reader);
    let cache = ProcessCache::new(Arc::clone(&reader), &process_config(3, 2)).unwrap();
    let order: Vec<u64> = (0..40).rev().collect();
    let batches = batches_of(&order, 4);
    {
        let mut epoch = cache.schedule_epoch(&batches).unwrap();
        epoch.start_batch(0).unwrap();
        epoch.start_batch(1).unwrap();
    }
    let loaded_before = cache.stats().pages_loaded;
    let (loaded, reused, pages) = run_epoch(&cache, &reader, &ptrs, &batches);
    assert_eq!(loaded + reused, pages as u64);
    assert!(reused <= loaded_before, "{reused} > {loaded_before}");
    assert!(reused >= 1, "the pages of batch 0 were complete");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Several epochs with random orders, batch sizes and prefetch windows over one
    /// cache: bytes always equal the file's, and every scheduled page is either read
    /// or reused.
    #[test]
    fn random_epochs_over_one_cache_read_identical_bytes(
        epochs in proptest::collection::vec(
            (Just((0..40u64).collect::<Vec<_>>()).prop_shuffle(), 1usize..12),
            2..5,
        ),
        ahead in 0usize..4,
    ) {
        let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
        let ptrs = ptrs_by_sample(&reader);
        let cache = ProcessCache::new(Arc::clone(&reader), &process_config(ahead, 2)).unwrap();
        let mut total_loaded = 0;
        for (order, bs) in &epochs {
            let (loaded, reused, pages) = run_epoch(&cache, &reader, &ptrs, &batches_of(order, *bs));
            prop_assert_eq!(loaded + reused, pages as u64);
            total_loaded += loaded;
        }
        prop_assert_eq!(cache.stats().pages_loaded, total_loaded);
    }
}

#[test]
fn hold_all_pages_reads_a_sequential_epoch_once() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let ptrs = ptrs_by_sample(&reader);
    let sequential = batches_of(&(0..40).collect::<Vec<_>>(), 4);
    // Without it, a sequential epoch's working set is a few slots and every page but
    // the last few is read again each epoch.
    let plain = ProcessCache::new(Arc::clone(&reader), &process_config(1, 2)).unwrap();
    run_epoch(&plain, &reader, &ptrs, &sequential);
    let (loaded, _, pages) = run_epoch(&plain, &reader, &ptrs, &sequential);
    assert_eq!(pages, 7);
    assert!(loaded >= 4, "loaded {loaded}");
    assert!(plain.stats().num_slots < 7);

    let config = ProcessConfig {
        hold_all_pages: true,
        retain_pages: false, // implied by hold_all_pages
        ..process_config(1, 2)
    };
    let held = ProcessCache::new(Arc::clone(&reader), &config).unwrap();
    let (loaded, reused, _) = run_epoch(&held, &reader, &ptrs, &sequential);
    assert_eq!((loaded, reused), (7, 0));
    assert_eq!(held.stats().num_slots, 7);
    // Any later order, sequential or not, is served from the slots.
    let (loaded, reused, _) = run_epoch(&held, &reader, &ptrs, &sequential);
    assert_eq!((loaded, reused), (0, 7));
    let shuffled: Vec<u64> = (0..40).map(|i| (i * 17) % 40).collect();
    let (loaded, reused, _) = run_epoch(&held, &reader, &ptrs, &batches_of(&shuffled, 5));
    assert_eq!((loaded, reused), (0, 7));
    assert_eq!(held.slot_allocations(), 1);
}

#[test]
fn hold_all_pages_over_budget_falls_back_to_the_ordinary_schedule() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let ptrs = ptrs_by_sample(&reader);
    let sequential = batches_of(&(0..40).collect::<Vec<_>>(), 4);
    let ordinary = ProcessCache::new(Arc::clone(&reader), &process_config(1, 2))
        .unwrap()
        .plan(&sequential)
        .unwrap();
    let page_size = reader.page_size();
    let config = ProcessConfig {
        hold_all_pages: true,
        // Room for the working set, not for all seven pages.
        max_memory: Some(ordinary.slot_bytes(page_size)),
        ..process_config(1, 2)
    };
    let cache = ProcessCache::new(Arc::clone(&reader), &config).unwrap();
    let (loaded, _, pages) = run_epoch(&cache, &reader, &ptrs, &sequential);
    assert_eq!((loaded, pages), (7, 7));
    assert_eq!(cache.stats().num_slots, ordinary.num_slots);
    assert!(cache.slot_memory_bytes() <= ordinary.slot_bytes(page_size));
}
