//! Dropping the epoch iterator mid-epoch stops the producer and the page readers and joins
//! them: no thread of the epoch is left running. (The test runs in its own process, so
//! that the thread count of the process is not disturbed by other tests.)

use crate::loader_support;

use std::time::{Duration, Instant};

use ffcv::{Loader, Order};
use loader_support::write_blobs;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// The process's thread count once it has settled at `expected`, or the last count seen
/// when `SETTLE` runs out. A thread that has been joined can stay listed in
/// `/proc/self/task` for a moment (the kernel reaps it after `join` returns), so the OS
/// count is polled; the loader's own count (`live_threads`) is exact and asserted at once.
fn settled_threads(expected: usize) -> usize {
    const SETTLE: Duration = Duration::from_secs(20);
    let deadline = Instant::now() + SETTLE;
    loop {
        let now = threads();
        if now == expected || Instant::now() >= deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn dropping_an_epoch_early_leaves_no_thread_running() {
    ffcv_testkit::own_process(
        module_path!(),
        "dropping_an_epoch_early_leaves_no_thread_running",
        || {
            // Known counts only: before anything starts, the harness's threads; the writer's
            // threads are joined by `write`; each loader adds exactly its `num_workers` pool
            // threads. So every expected count is exact and none is read while threads linger.
            let start = threads();
            let dir = tempfile::tempdir().unwrap();
            let path = write_blobs(dir.path(), "drop", 240);
            assert_eq!(settled_threads(start), start, "writer threads joined");
            let mut expected = start;
            // Loaders are kept alive to the end: a dropped loader's worker pool exits on its own
            // schedule, which would disturb the thread counts below.
            let mut loaders = Vec::new();
            for os_cache in [false, true] {
                for order in [Order::Sequential, Order::Random, Order::QuasiRandom] {
                    let mut loader = Loader::builder(&path)
                        .batch_size(8)
                        .batches_ahead(2)
                        .num_workers(2)
                        .reader_threads(4)
                        .os_cache(os_cache)
                        .order(order.clone())
                        .seed(2)
                        .build()
                        .unwrap();
                    expected += 2;
                    let baseline = settled_threads(expected);
                    assert_eq!(
                        baseline, expected,
                        "{order:?}: the pool's two workers and no more"
                    );
                    for take in [0, 1, 3, 29] {
                        let mut it = loader.iter();
                        let mut held = Vec::new();
                        for _ in 0..take {
                            held.push(it.next().unwrap().unwrap());
                        }
                        drop(it);
                        assert_eq!(
                            loader.live_threads(),
                            0,
                            "{order:?} os_cache={os_cache} after {take} batches"
                        );
                        assert_eq!(
                            settled_threads(baseline),
                            baseline,
                            "{order:?} os_cache={os_cache} take={take}"
                        );
                        // Batches taken before the drop stay valid.
                        for b in &held {
                            assert_eq!(b.len(), 8);
                        }
                    }
                    // The loader still runs full epochs afterwards.
                    let n: usize = loader.iter().map(|b| b.unwrap().len()).sum();
                    assert_eq!(n, 240);
                    assert_eq!(settled_threads(baseline), baseline);
                    loaders.push(loader);
                }
            }
        },
    );
}
