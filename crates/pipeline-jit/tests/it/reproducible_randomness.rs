//! Random operations depend only on (seed, epoch, sample id, operation index): not on the
//! thread count, the chunking, the batch composition or the engine.

use crate::common;

use pipeline_jit::ops::{Cutout, RandomHorizontalFlip, RandomTranslate};
use pipeline_jit::{ElemType, Pipeline, State};

fn augment() -> Pipeline {
    Pipeline::new(State::cpu([6, 6, 3], ElemType::U8))
        .then(RandomHorizontalFlip(0.5))
        .then(RandomTranslate {
            padding: 2,
            fill: vec![0.0],
        })
        .then(Cutout {
            size: 2,
            fill: vec![255.0],
        })
}

#[test]
fn same_seed_same_result_for_1_and_4_threads_and_both_engines() {
    let p = augment();
    let ids: Vec<u64> = (100..137).collect();
    let input = common::bytes(ids.len() * 108, 3);
    let reference = common::run(&p, true, 1, &ids, &input, 42, 7);
    for (compile, workers) in [(true, 4), (false, 1), (false, 4)] {
        assert_eq!(
            common::run(&p, compile, workers, &ids, &input, 42, 7),
            reference,
            "compile={compile} workers={workers}"
        );
    }
}

#[test]
fn a_sample_gets_the_same_augmentation_in_any_batch() {
    let p = augment();
    let ids: Vec<u64> = (0..10).collect();
    let input = common::bytes(10 * 108, 4);
    let whole = common::run(&p, true, 2, &ids, &input, 1, 0);
    // The same samples in reverse order, in two batches.
    let rev_ids: Vec<u64> = ids.iter().rev().copied().collect();
    let rev_input: Vec<u8> = input.chunks(108).rev().flatten().copied().collect();
    let mut parts = common::run(&p, true, 3, &rev_ids[..4], &rev_input[..4 * 108], 1, 0);
    parts.extend(common::run(
        &p,
        false,
        1,
        &rev_ids[4..],
        &rev_input[4 * 108..],
        1,
        0,
    ));
    let back: Vec<u8> = parts.chunks(108).rev().flatten().copied().collect();
    assert_eq!(back, whole);
}

#[test]
fn epochs_and_seeds_change_the_draws() {
    let p = augment();
    let ids: Vec<u64> = (0..16).collect();
    let input = common::bytes(16 * 108, 5);
    let base = common::run(&p, true, 2, &ids, &input, 1, 0);
    assert_ne!(common::run(&p, true, 2, &ids, &input, 1, 1), base, "epoch");
    assert_ne!(common::run(&p, true, 2, &ids, &input, 2, 0), base, "seed");
}

#[test]
fn concurrent_runs_on_one_executor_agree() {
    let p = augment();
    let ids: Vec<u64> = (0..24).collect();
    let input = common::bytes(24 * 108, 6);
    for compile in [true, false] {
        let ex = common::executor(&p, compile, 2);
        let alone = common::run_with(&ex, &ids, &input, 3, 1);
        let results: Vec<Vec<u8>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| common::run_with(&ex, &ids, &input, 3, 1)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(results.iter().all(|r| *r == alone), "compile={compile}");
    }
}
