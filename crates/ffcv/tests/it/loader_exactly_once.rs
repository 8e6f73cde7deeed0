//! Every sample is seen exactly once per epoch (drop_last aside), with the right content,
//! under every combination of order, cache, num_workers, batches_ahead and rank.

use crate::loader_support;

use std::collections::BTreeMap;

use ffcv::{Loader, Order};
use loader_support::{epoch_ids, write_blobs};

const N: u64 = 300;
const BATCH: usize = 16;

fn orders() -> [Order; 3] {
    [Order::Sequential, Order::Random, Order::QuasiRandom]
}

fn counts(ids: &[u64]) -> BTreeMap<u64, usize> {
    let mut m = BTreeMap::new();
    for &i in ids {
        *m.entry(i).or_default() += 1;
    }
    m
}

#[test]
fn every_sample_once_per_epoch_across_knobs() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "blobs", N);
    for order in orders() {
        for os_cache in [true, false] {
            for workers in [1, 2] {
                for batches_ahead in [1, 3] {
                    let what = format!(
                        "{order:?} os_cache={os_cache} workers={workers} ahead={batches_ahead}"
                    );
                    let mut loader = Loader::builder(&path)
                        .batch_size(BATCH)
                        .order(order.clone())
                        .os_cache(os_cache)
                        .num_workers(workers)
                        .batches_ahead(batches_ahead)
                        .drop_last(false)
                        .seed(5)
                        .build()
                        .unwrap();
                    for epoch in 0..2 {
                        let ids = epoch_ids(&mut loader);
                        let c = counts(&ids);
                        assert_eq!(ids.len() as u64, N, "{what} epoch {epoch}");
                        assert_eq!(c.len() as u64, N, "{what} epoch {epoch}: distinct");
                    }
                }
            }
        }
    }
}

#[test]
fn drop_last_drops_only_the_final_partial_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "blobs", N);
    for order in orders() {
        for os_cache in [true, false] {
            let mut loader = Loader::builder(&path)
                .batch_size(BATCH)
                .order(order.clone())
                .os_cache(os_cache)
                .num_workers(2)
                .seed(9)
                .build()
                .unwrap();
            let full = N as usize / BATCH;
            assert_eq!(loader.len(), full);
            let expected_order = loader.order(0);
            let ids = epoch_ids(&mut loader);
            assert_eq!(ids.len(), full * BATCH);
            assert_eq!(counts(&ids).len(), ids.len(), "{order:?}: no repeats");
            assert_eq!(
                ids[..],
                expected_order[..full * BATCH],
                "{order:?}: in order"
            );
        }
    }
}

#[test]
fn distributed_ranks_together_cover_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "blobs", N);
    let world = 4;
    for order in orders() {
        for os_cache in [true, false] {
            let mut all = Vec::new();
            let mut lengths: Vec<usize> = Vec::new();
            for rank in 0..world {
                let mut loader = Loader::builder(&path)
                    .batch_size(BATCH)
                    .order(order.clone())
                    .os_cache(os_cache)
                    .num_workers(2)
                    .batches_ahead(2)
                    .distributed(true)
                    .rank(rank)
                    .world_size(world)
                    .drop_last(false)
                    .seed(3)
                    .build()
                    .unwrap();
                // Every rank yields the same number of samples, ceil(N / world), for
                // every order (QuasiRandom's shares are within one sample of each other).
                let per_rank = loader.order(0).len();
                assert_eq!(per_rank, (N as usize).div_ceil(world), "{order:?}");
                if let Some(first) = lengths.first() {
                    assert_eq!(per_rank, *first, "{order:?}: equal shares");
                }
                lengths.push(per_rank);
                assert_eq!(loader.len(), per_rank.div_ceil(BATCH));
                let ids = epoch_ids(&mut loader);
                assert_eq!(ids.len(), per_rank, "{order:?} rank {rank}");
                all.extend(ids);
            }
            let c = counts(&all);
            assert_eq!(
                c.len() as u64,
                N,
                "{order:?} os_cache={os_cache}: ranks cover all"
            );
            // Padding to a multiple of the world size repeats a few samples, no more.
            let padding = (N as usize).div_ceil(world) * world - N as usize;
            assert_eq!(all.len(), N as usize + padding, "{order:?}");
        }
    }
}
