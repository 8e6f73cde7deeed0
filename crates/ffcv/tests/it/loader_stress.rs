//! Stress: many epochs that hold random batches, drop the iterator at random points and
//! drop held batches out of order, over both caches. Every batch seen must hold its
//! samples' data, and no epoch thread may outlive its iterator.

use crate::loader_support;

use ffcv::{Batch, Loader, Order};
use loader_support::{blob, write_blobs};

/// A small deterministic generator (the test must not depend on the clock).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn check(batch: &Batch) {
    let index = batch.get::<i64>("index").unwrap();
    let blobs = batch.output("blob").unwrap();
    for (row, &sample) in batch.sample_ids().iter().enumerate() {
        assert_eq!(index[row], sample as i64);
        assert_eq!(blobs.value(row), &blob(sample)[..], "sample {sample}");
    }
}

#[test]
fn random_holds_and_early_drops_never_corrupt_a_batch_or_leak_a_thread() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "stress", 160);
    let mut rng = Lcg(12345);
    for round in 0..4 {
        let os_cache = round % 2 == 0;
        let order = [Order::Random, Order::QuasiRandom][round / 2].clone();
        let mut loader = Loader::builder(&path)
            .batch_size(6)
            .batches_ahead(1 + round % 3)
            .num_workers(2)
            .reader_threads(2)
            .os_cache(os_cache)
            .order(order)
            .seed(round as u64)
            .build()
            .unwrap();
        let mut held: Vec<Batch> = Vec::new();
        for _ in 0..12 {
            let stop_after = rng.below(loader.len() as u64 + 1);
            let mut it = loader.iter();
            for _ in 0..stop_after {
                let batch = it.next().unwrap().unwrap();
                check(&batch);
                if rng.below(4) == 0 {
                    held.push(batch);
                }
                // Drop a held batch from anywhere in the list now and then.
                if !held.is_empty() && rng.below(3) == 0 {
                    let i = rng.below(held.len() as u64) as usize;
                    held.swap_remove(i);
                }
            }
            drop(it);
            assert_eq!(loader.live_threads(), 0, "round {round}");
            for b in &held {
                check(b);
            }
        }
    }
}
