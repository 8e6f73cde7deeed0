//! Failures reach the consumer as errors naming what failed: a page that cannot be read
//! (file truncated after opening), batches out of order, reads outside the batch.
//! Dropping an epoch mid-way stops and joins its page readers.

use crate::common;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use beton_io::Reader;
use page_cache::{CachePolicy, Error, PageCache, ProcessCache, ProcessConfig};

use common::{batches_of, fixture, ptrs_by_sample};

const MIB2: u64 = 2 * 1024 * 1024;

/// A private copy of multipage.beton (it gets truncated).
fn copy_of_multipage() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("multipage.beton");
    std::fs::copy(fixture("multipage.beton"), &path).unwrap();
    (dir, path)
}

/// Runs `f` on another thread and fails the test if it does not finish in time (a hang).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).expect("hung")
}

#[test]
fn truncated_file_gives_an_error_naming_the_page_not_a_hang() {
    truncated_file_case(false);
}

#[test]
fn truncated_file_with_mapped_pages_gives_an_error_not_a_sigbus() {
    truncated_file_case(true);
}

fn truncated_file_case(map_pages: bool) {
    let (_dir, path) = copy_of_multipage();
    let reader = Arc::new(Reader::open(&path).unwrap());
    let config = ProcessConfig {
        reader_threads: 3,
        map_pages,
        ..ProcessConfig::default()
    };
    let cache = ProcessCache::new(Arc::clone(&reader), &config).unwrap();
    // The allocation table is read through the map, so before the cut.
    let ptrs = ptrs_by_sample(&reader);
    // Cut the file in the middle of page 4: pages 1..=3 stay whole.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4 * MIB2 + 1000)
        .unwrap();
    let outcome = within(30, move || {
        let batches = batches_of(&(0..40).collect::<Vec<_>>(), 6);
        let mut epoch = cache.schedule_epoch(&batches).unwrap();
        let mut results = Vec::new();
        for b in 0..batches.len() {
            results.push(epoch.start_batch(b).map_err(|e| e.to_string()));
            if let (Ok(()), Some(&s)) = (&results[b], batches[b].first()) {
                // Samples of a batch that started are readable.
                let ptr = ptrs[&s][0];
                assert!(epoch.read(ptr).is_ok());
            }
        }
        let stats = epoch.stats();
        drop(epoch);
        (results, stats, cache.live_reader_threads())
    });
    let (results, stats, live) = outcome;
    // Batches 0 and 1 read pages 1 and 2; batch 2 needs page 3, which lies wholly
    // before the cut; batch 3 needs page 4 (short) and fails; later batches report the
    // aborted epoch.
    assert!(results[0].is_ok() && results[1].is_ok() && results[2].is_ok());
    let err = results[3].as_ref().unwrap_err();
    assert!(err.contains("page 4"), "{err}");
    assert!(err.contains("offset 8388608"), "{err}");
    assert!(err.contains("multipage.beton"), "{err}");
    for r in &results[4..] {
        let e = r.as_ref().unwrap_err();
        assert!(e.contains("epoch stopped at an earlier error"), "{e}");
        assert!(e.contains("page 4"), "{e}");
    }
    // Pages 4..=7 fail (page 5 on may have been queued by then); page 4 at least.
    assert!(stats.page_read_errors >= 1);
    assert_eq!(live, 0);
}

#[test]
fn read_error_is_typed_with_page_and_offset() {
    let (_dir, path) = copy_of_multipage();
    let reader = Arc::new(Reader::open(&path).unwrap());
    let expected_len = common::page_read_bytes(&reader, 2, false);
    let cache =
        PageCache::new(reader, &CachePolicy::Process(common::process_config(0, 1))).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(MIB2)
        .unwrap();
    let err = within(30, move || {
        let mut epoch = cache.schedule_epoch(&[vec![10]]).unwrap();
        epoch.start_batch(0).unwrap_err()
    });
    match err {
        Error::PageRead {
            page, offset, len, ..
        } => {
            assert_eq!((page, offset, len), (2, 2 * MIB2, expected_len));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn dropping_an_epoch_mid_way_joins_its_page_readers() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let cache = ProcessCache::new(reader, &common::process_config(3, 4)).unwrap();
    let batches = batches_of(&(0..40).collect::<Vec<_>>(), 3);
    for stop_after in [0usize, 1, 5] {
        let mut epoch = cache.schedule_epoch(&batches).unwrap();
        assert_eq!(cache.live_reader_threads(), 4);
        for b in 0..stop_after {
            epoch.start_batch(b).unwrap();
        }
        drop(epoch);
        assert_eq!(cache.live_reader_threads(), 0);
    }
    // Dropping the cache itself while an epoch is alive: the epoch keeps what it
    // needs, and dropping it joins.
    let epoch = cache.schedule_epoch(&batches).unwrap();
    let counter = cache.clone();
    drop(cache);
    assert_eq!(counter.live_reader_threads(), 4);
    drop(epoch);
    assert_eq!(counter.live_reader_threads(), 0);
}

#[test]
fn batches_must_start_in_order() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    for config in [
        CachePolicy::default(),
        CachePolicy::Process(common::process_config(3, 2)),
    ] {
        let cache = PageCache::new(Arc::clone(&reader), &config).unwrap();
        let mut epoch = cache.schedule_epoch(&[vec![0], vec![1]]).unwrap();
        let err = epoch.start_batch(1).unwrap_err();
        assert!(
            matches!(
                err,
                Error::BatchOutOfOrder {
                    expected: 0,
                    got: 1,
                    num_batches: 2
                }
            ),
            "{err:?}"
        );
        epoch.start_batch(0).unwrap();
        epoch.start_batch(1).unwrap();
        assert!(matches!(
            epoch.start_batch(2),
            Err(Error::BatchOutOfOrder { got: 2, .. })
        ));
    }
}

#[test]
fn reads_outside_the_current_batch_or_at_unknown_pointers_are_errors() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let ptrs = ptrs_by_sample(&reader);
    let cache = PageCache::new(
        Arc::clone(&reader),
        &CachePolicy::Process(common::process_config(0, 1)),
    )
    .unwrap();
    let mut epoch = cache.schedule_epoch(&[vec![0], vec![39]]).unwrap();
    let p0 = ptrs[&0][0];
    let p39 = ptrs[&39][0];
    // Before the first batch nothing is loaded.
    assert!(matches!(
        epoch.read(p0),
        Err(Error::PageNotLoaded {
            page: 1,
            batch: None,
            ..
        })
    ));
    epoch.start_batch(0).unwrap();
    assert_eq!(epoch.read(p0).unwrap(), reader.data_at(p0).unwrap());
    // Sample 39 lives on page 7, which batch 0 does not hold (no prefetch).
    assert!(matches!(
        epoch.read(p39),
        Err(Error::PageNotLoaded {
            page: 7,
            batch: Some(0),
            ..
        })
    ));
    assert!(matches!(
        epoch.read(p0 + 1),
        Err(Error::UnknownPointer { .. })
    ));
    epoch.start_batch(1).unwrap();
    // Page 1 was released after batch 0.
    assert!(matches!(
        epoch.read(p0),
        Err(Error::PageNotLoaded { page: 1, .. })
    ));
    assert_eq!(epoch.read(p39).unwrap(), reader.data_at(p39).unwrap());
}

#[test]
fn unknown_samples_are_refused_when_scheduling() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    for config in [
        CachePolicy::default(),
        CachePolicy::Process(common::process_config(3, 2)),
    ] {
        let cache = PageCache::new(Arc::clone(&reader), &config).unwrap();
        let err = cache.schedule_epoch(&[vec![0], vec![3, 40]]).err().unwrap();
        assert!(
            matches!(
                err,
                Error::SampleOutOfRange {
                    batch: 1,
                    sample: 40,
                    num_samples: 40,
                    ..
                }
            ),
            "{err:?}"
        );
    }
}

#[test]
fn direct_io_reads_the_same_bytes_or_reports_why_not() {
    let reader = Arc::new(Reader::open(fixture("page_retry.beton")).unwrap());
    let config = ProcessConfig {
        direct_io: true,
        reader_threads: 2,
        ..ProcessConfig::default()
    };
    let cache = ProcessCache::new(Arc::clone(&reader), &config).unwrap();
    assert_eq!(cache.direct_io(), cache.direct_io_fallback().is_none());
    let batches = batches_of(&(0..12).rev().collect::<Vec<_>>(), 5);
    let epoch = common::compare_epoch(&reader, &config, &batches);
    assert_eq!(epoch.stats().direct_io, cache.direct_io());
    // Each data page is read up to its last allocation, in whole 4 KiB blocks when
    // direct: 2008070, 1722683, 2042382 and 465610 bytes on pages 1..=4.
    let expected: u64 = (1..=4)
        .map(|p| common::page_read_bytes(&reader, p, cache.direct_io()))
        .sum();
    let reference = if cache.direct_io() { 6246400 } else { 6238745 };
    assert_eq!(expected, reference);
    assert_eq!(epoch.stats().storage_bytes_read, expected);
}

#[test]
fn direct_io_leaves_the_os_cache_alone_and_buffered_reads_fill_it() {
    let (_dir, path) = copy_of_multipage();
    // Written pages are dirty until synced; eviction only drops clean ones.
    std::fs::File::open(&path).unwrap().sync_all().unwrap();
    let reader = Arc::new(Reader::open(&path).unwrap());
    let batches = vec![(0..40).collect::<Vec<u64>>()];
    for direct_io in [true, false] {
        let config = ProcessConfig {
            direct_io,
            reader_threads: 2,
            ..ProcessConfig::default()
        };
        let cache = ProcessCache::new(Arc::clone(&reader), &config).unwrap();
        page_cache::evict_from_os_cache(&path).unwrap();
        let before = page_cache::os_cached_bytes(&path).unwrap();
        let mut epoch = cache.schedule_epoch(&batches).unwrap();
        epoch.start_batch(0).unwrap();
        let after = page_cache::os_cached_bytes(&path).unwrap();
        if cache.direct_io() {
            // Pages 1..=7 were read, none through the OS cache.
            assert!(after <= before + 64 * 1024, "{before} -> {after}");
        } else if !direct_io {
            let read = epoch.stats().storage_bytes_read;
            assert!(read > 5 * MIB2, "{read}");
            assert!(
                after + 64 * 1024 >= before + read,
                "{before} -> {after} ({read} read)"
            );
        }
    }
}

#[test]
fn read_extent_serves_parts_of_held_pages_and_refuses_the_rest() {
    let reader = Arc::new(Reader::open(fixture("multipage.beton")).unwrap());
    let ptrs = ptrs_by_sample(&reader);
    let p3 = ptrs[&3][0];
    let size = reader.alloc_size(p3).unwrap();
    for config in [
        CachePolicy::default(),
        CachePolicy::Process(common::process_config(0, 1)),
        CachePolicy::Process(ProcessConfig {
            map_pages: true,
            ..common::process_config(0, 1)
        }),
    ] {
        let cache = PageCache::new(Arc::clone(&reader), &config).unwrap();
        let mut epoch = cache.schedule_epoch(&[vec![3]]).unwrap();
        epoch.start_batch(0).unwrap();
        let whole = reader.data_at(p3).unwrap();
        assert_eq!(epoch.read_extent(p3, size).unwrap(), whole);
        assert_eq!(epoch.read_extent(p3 + 10, 100).unwrap(), &whole[10..110]);
        assert_eq!(epoch.read_extent(p3, 0).unwrap(), b"");
        let past_the_file = epoch.read_extent(reader.file_size() - 10, 11);
        assert!(past_the_file.is_err());
        if !config.is_os() {
            // Page 0 (header and metadata) is not held; page 1 is, but only up to the end
            // of its last allocation.
            assert!(matches!(
                epoch.read_extent(100, 20),
                Err(Error::PageNotLoaded { page: 0, .. })
            ));
            let used = common::page_read_bytes(&reader, 1, false);
            assert!(epoch.read_extent(MIB2 + used - 20, 20).is_ok());
            assert!(matches!(
                epoch.read_extent(MIB2 + used - 20, 21),
                Err(Error::AllocationCrossesPage { page: 1, .. })
            ));
            assert!(matches!(
                epoch.read_extent(2 * MIB2 - 10, 20),
                Err(Error::AllocationCrossesPage { page: 1, .. })
            ));
        }
    }
}
