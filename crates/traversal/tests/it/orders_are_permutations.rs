//! Every order visits each index exactly once per epoch; distributed, the ranks together
//! visit every index, plus the documented padding, and all ranks are equally long.

use std::collections::BTreeMap;

use proptest::prelude::*;
use traversal::{
    Distributed, OrderKind, OrderSpec, QuasiRandom, Random, SamplePages, Sequential, TraversalOrder,
};

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

/// Multiset difference `bigger - smaller`, or None when `smaller` is not contained.
fn extra(bigger: &[u64], smaller: &[u64]) -> Option<Vec<u64>> {
    let mut counts: BTreeMap<u64, i64> = BTreeMap::new();
    for &x in bigger {
        *counts.entry(x).or_default() += 1;
    }
    for &x in smaller {
        *counts.entry(x).or_default() -= 1;
    }
    let mut rest = Vec::new();
    for (x, c) in counts {
        if c < 0 {
            return None;
        }
        rest.extend(std::iter::repeat_n(x, c as usize));
    }
    Some(rest)
}

/// A subset of `0..num_samples` in a scrambled order (the loader accepts any order).
fn subset_strategy() -> impl Strategy<Value = (u64, Vec<u64>)> {
    (1u64..400).prop_flat_map(|num_samples| {
        (
            Just(num_samples),
            proptest::sample::subsequence(
                (0..num_samples).collect::<Vec<_>>(),
                0..=num_samples as usize,
            )
            .prop_shuffle(),
        )
    })
}

/// Pages of random sizes (1..=12 samples) covering `0..num_samples`, in sample order,
/// starting at page 1 as in a .beton file.
fn pages_for(num_samples: u64, page_sizes_seed: u64) -> SamplePages {
    let mut page = 1u64;
    let mut left_in_page = 1 + page_sizes_seed % 12;
    let mut state = page_sizes_seed;
    SamplePages::from_fn(num_samples, |_| {
        if left_in_page == 0 {
            page += 1;
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            left_in_page = 1 + (state >> 33) % 12;
        }
        left_in_page -= 1;
        Some(page)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_single_process_order_is_a_permutation_of_the_indices(
        (num_samples, indices) in subset_strategy(),
        seed in any::<u64>(),
        epoch in 0u64..1000,
        buffer_pages in 1usize..20,
        page_sizes_seed in any::<u64>(),
    ) {
        let pages = pages_for(num_samples, page_sizes_seed);
        for kind in [OrderKind::Sequential, OrderKind::Random, OrderKind::QuasiRandom] {
            let spec = OrderSpec { kind, seed, distributed: None, buffer_pages };
            let order = spec.build(indices.clone(), Some(&pages)).unwrap();
            let epoch_order = order.order(epoch);
            prop_assert_eq!(epoch_order.len(), order.samples_per_epoch());
            prop_assert_eq!(sorted(epoch_order), sorted(indices.clone()), "{}", kind);
        }
        prop_assert_eq!(Sequential::new(indices.clone()).order(epoch), indices);
    }

    #[test]
    fn distributed_ranks_cover_the_indices_plus_padding_and_are_equally_long(
        (num_samples, indices) in subset_strategy(),
        seed in any::<u64>(),
        epoch in 0u64..1000,
        world_size in 1usize..9,
        page_sizes_seed in any::<u64>(),
    ) {
        let pages = pages_for(num_samples, page_sizes_seed);
        for kind in [OrderKind::Sequential, OrderKind::Random, OrderKind::QuasiRandom] {
            let mut all = Vec::new();
            let mut lengths = Vec::new();
            for rank in 0..world_size {
                let spec = OrderSpec {
                    kind,
                    seed,
                    distributed: Some(Distributed::new(world_size, rank).unwrap()),
                    buffer_pages: 4,
                };
                let order = spec.build(indices.clone(), Some(&pages)).unwrap();
                let rank_order = order.order(epoch);
                prop_assert_eq!(rank_order.len(), order.samples_per_epoch());
                lengths.push(rank_order.len());
                all.extend(rank_order);
            }
            prop_assert!(lengths.iter().all(|&l| l == lengths[0]), "{}: {:?}", kind, lengths);
            let padding = extra(&all, &indices);
            prop_assert!(padding.is_some(), "{}: an index is missing", kind);
            let padding = padding.unwrap();
            match kind {
                // DistributedSampler: exactly ceil(n / W) * W - n repeats, taken from
                // the start of the (shuffled) list.
                OrderKind::Sequential | OrderKind::Random => {
                    let n = indices.len();
                    prop_assert_eq!(padding.len(), n.div_ceil(world_size) * world_size - n);
                    prop_assert_eq!(lengths[0], n.div_ceil(world_size));
                }
                // QuasiRandom pads every rank to the largest share; padding repeats
                // indices only (checked by `extra` above).
                OrderKind::QuasiRandom => {
                    prop_assert_eq!(all.len(), lengths[0] * world_size);
                    prop_assert!(lengths[0] >= indices.len().div_ceil(world_size));
                }
            }
        }
    }
}

#[test]
fn sequential_padding_repeats_the_first_indices() {
    // 10 indices on 4 ranks: padded with indices[0] and indices[1].
    let indices: Vec<u64> = (100..110).collect();
    let orders: Vec<Vec<u64>> = (0..4)
        .map(|rank| {
            Sequential::new(indices.clone())
                .with_distributed(Distributed::new(4, rank).unwrap())
                .order(0)
        })
        .collect();
    assert_eq!(
        orders,
        vec![
            vec![100, 104, 108],
            vec![101, 105, 109],
            vec![102, 106, 100],
            vec![103, 107, 101]
        ]
    );
}

#[test]
fn random_orders_differ_between_epochs_and_seeds() {
    let a = Random::all(1000, 3);
    assert_ne!(a.order(0), a.order(1));
    assert_ne!(a.order(0), Random::all(1000, 4).order(0));
    assert_eq!(a.order(1), Random::all(1000, 4).order(0));
}

#[test]
fn empty_index_lists_give_empty_orders() {
    let pages = SamplePages::new(vec![Some(1), Some(1)]);
    for kind in [
        OrderKind::Sequential,
        OrderKind::Random,
        OrderKind::QuasiRandom,
    ] {
        for distributed in [None, Some(Distributed::new(3, 2).unwrap())] {
            let spec = OrderSpec {
                kind,
                seed: 1,
                distributed,
                buffer_pages: 2,
            };
            let order = spec.build(Vec::new(), Some(&pages)).unwrap();
            assert_eq!(order.order(0), Vec::<u64>::new());
            assert_eq!(order.samples_per_epoch(), 0);
        }
    }
    assert_eq!(
        QuasiRandom::new(&[], &pages, 0, 1).unwrap().order(3),
        Vec::<u64>::new()
    );
}
