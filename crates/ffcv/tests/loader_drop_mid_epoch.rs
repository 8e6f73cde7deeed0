//! Dropping the epoch iterator mid-epoch stops the producer and the page readers and joins
//! them: no thread of the epoch is left running. (One test in this binary, so that the
//! thread count of the process is not disturbed by other tests.)

mod loader_support;

use ffcv::{Loader, Order};
use loader_support::write_blobs;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn dropping_an_epoch_early_leaves_no_thread_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "drop", 240);
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
            let baseline = threads();
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
                    threads(),
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
            assert_eq!(threads(), baseline);
            loaders.push(loader);
        }
    }
}
