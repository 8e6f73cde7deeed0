//! Resuming an epoch with another number of ranks delivers every sample exactly once:
//! what the old ranks consumed plus the new ranks' own shares is the epoch, for every
//! order, chains of stints included; the first stint is the ordinary distributed order;
//! QuasiRandom's new shares read each page in one run, and each stint pads fewer
//! samples than its world size.

use std::collections::BTreeSet;

use proptest::prelude::*;
use traversal::{
    Distributed, ElasticEpoch, OrderKind, OrderSpec, Pool, SamplePages, Stint, TraversalOrder,
};

fn pages_of_sizes(sizes: &[usize]) -> SamplePages {
    let mut page_of = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        page_of.extend(std::iter::repeat_n(Some(i as u64), size));
    }
    SamplePages::new(page_of)
}

fn kind_of(k: u8) -> OrderKind {
    match k % 3 {
        0 => OrderKind::Sequential,
        1 => OrderKind::Random,
        _ => OrderKind::QuasiRandom,
    }
}

/// The spec of a first stint of `world_size` ranks (`None`: one process).
fn spec(kind: OrderKind, seed: u64, world_size: Option<usize>) -> OrderSpec {
    OrderSpec {
        kind,
        seed,
        distributed: world_size.map(|w| Distributed::new(w, 0).unwrap()),
        buffer_pages: 3,
    }
}

/// Runs the stints and returns the samples consumed in them (as rank orders' prefixes)
/// and the shares of the new ranks.
fn simulate(
    epoch: &ElasticEpoch<'_>,
    stints: &[Stint],
    new_world: usize,
) -> (Vec<u64>, Vec<traversal::RankShare>) {
    let mut consumed = Vec::new();
    let first = stints[0];
    for rank in 0..first.world_size {
        let share = epoch.first_share(rank).unwrap();
        // The first stint is the ordinary distributed order.
        let spec = OrderSpec {
            distributed: epoch
                .spec
                .distributed
                .map(|d| Distributed::new(d.world_size(), rank).unwrap()),
            ..*epoch.spec
        };
        let ordinary = spec
            .build(epoch.indices.to_vec(), epoch.pages)
            .unwrap()
            .order(epoch.epoch);
        assert_eq!(share.order, ordinary);
        // Only the rank's own entries count: padding repeats samples.
        consumed.extend_from_slice(&share.order[..first.consumed.min(share.own)]);
    }
    for k in 1..stints.len() {
        let pool = epoch.pool_after(&stints[..k]).unwrap();
        let s = stints[k];
        for rank in 0..s.world_size {
            let share = pool.share(s.world_size, rank, epoch.pages).unwrap();
            consumed.extend_from_slice(&share.order[..s.consumed.min(share.own)]);
        }
    }
    let pool = epoch.pool_after(stints).unwrap();
    let shares = (0..new_world)
        .map(|rank| pool.share(new_world, rank, epoch.pages).unwrap())
        .collect();
    (consumed, shares)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_sample_is_delivered_exactly_once_across_stints(
        sizes in proptest::collection::vec(1usize..12, 1..20),
        kind in 0u8..3,
        seed in 0u64..1000,
        epoch_number in 0u64..5,
        distributed in any::<bool>(),
        worlds in proptest::collection::vec(1usize..6, 1..4),
        fractions in proptest::collection::vec(0.0f64..1.0, 3),
        new_world in 1usize..7,
    ) {
        let pages = pages_of_sizes(&sizes);
        let n = pages.num_samples();
        let indices: Vec<u64> = (0..n).collect();
        let kind = kind_of(kind);
        let first_world = if distributed { Some(worlds[0]) } else { None };
        let spec = spec(kind, seed, first_world);
        let epoch = ElasticEpoch { spec: &spec, indices: &indices, pages: Some(&pages), epoch: epoch_number };
        // Each stint consumes a fraction of its ranks' shares (before the end).
        let mut stints = Vec::new();
        let world_sizes: Vec<usize> = std::iter::once(first_world.unwrap_or(1))
            .chain(worlds[1..].iter().copied())
            .collect();
        for (k, &w) in world_sizes.iter().enumerate() {
            let pool = epoch.pool_after(&stints).unwrap();
            let per_rank = if k == 0 {
                spec.build(indices.clone(), Some(&pages)).unwrap().samples_per_epoch()
            } else {
                pool.samples_per_rank(w, Some(&pages)).unwrap()
            };
            let consumed = (per_rank as f64 * fractions[k]) as usize;
            stints.push(Stint { world_size: w, consumed });
        }
        let (consumed, shares) = simulate(&epoch, &stints, new_world);
        let mut delivered = consumed;
        for share in &shares {
            delivered.extend_from_slice(&share.order[..share.own]);
            prop_assert_eq!(share.order.len(), shares[0].order.len(), "lockstep lengths");
        }
        delivered.sort_unstable();
        prop_assert_eq!(delivered, indices);
    }

    #[test]
    fn quasi_random_new_shares_read_each_page_in_one_run(
        sizes in proptest::collection::vec(1usize..12, 1..20),
        seed in 0u64..1000,
        old_world in 1usize..5,
        fraction in 0.0f64..1.0,
        new_world in 1usize..6,
    ) {
        let pages = pages_of_sizes(&sizes);
        let indices: Vec<u64> = (0..pages.num_samples()).collect();
        let spec = spec(OrderKind::QuasiRandom, seed, Some(old_world));
        let epoch = ElasticEpoch { spec: &spec, indices: &indices, pages: Some(&pages), epoch: 1 };
        let per_rank = spec.build(indices.clone(), Some(&pages)).unwrap().samples_per_epoch();
        let stints = [Stint { world_size: old_world, consumed: (per_rank as f64 * fraction) as usize }];
        let pool = epoch.pool_after(&stints).unwrap();
        for rank in 0..new_world {
            let share = pool.share(new_world, rank, Some(&pages)).unwrap();
            let mut runs: Vec<u64> = share.order[..share.own].iter().map(|&s| pages.page_of(s).unwrap()).collect();
            runs.dedup();
            let distinct: BTreeSet<u64> = runs.iter().copied().collect();
            prop_assert_eq!(runs.len(), distinct.len(), "rank {} reopens a page", rank);
        }
    }
}

#[test]
fn the_pool_of_a_strided_order_is_the_rest_of_its_global_order() {
    // Sequential over 10 samples on 3 ranks: rank r holds r, r+3, ...; after 2 samples
    // per rank, positions 0..6 are consumed.
    let indices: Vec<u64> = (100..110).collect();
    let spec = spec(OrderKind::Sequential, 0, Some(3));
    let epoch = ElasticEpoch {
        spec: &spec,
        indices: &indices,
        pages: None,
        epoch: 0,
    };
    let pool = epoch
        .pool_after(&[Stint {
            world_size: 3,
            consumed: 2,
        }])
        .unwrap();
    assert_eq!(pool.samples(), &[106, 107, 108, 109]);
    // Split among 3 new ranks: 106, 109 | 107, (106) | 108, (107).
    let shares: Vec<_> = (0..3).map(|r| pool.share(3, r, None).unwrap()).collect();
    assert_eq!(shares[0].order, vec![106, 109]);
    assert_eq!(
        (shares[1].order.clone(), shares[1].own),
        (vec![107, 106], 1)
    );
    assert_eq!(
        (shares[2].order.clone(), shares[2].own),
        (vec![108, 107], 1)
    );
    // Consuming into the padding consumes everything.
    let pool = epoch
        .pool_after(&[Stint {
            world_size: 3,
            consumed: 4,
        }])
        .unwrap();
    assert!(pool.samples().is_empty());
    assert!(pool.share(2, 1, None).unwrap().order.is_empty());
}

#[test]
fn repeated_indices_are_positions_each_delivered_once() {
    // Random distributed over an index list with repeats: the pool counts positions.
    let indices = vec![5, 5, 5, 1, 2, 2, 9];
    let spec = spec(OrderKind::Random, 7, Some(2));
    let epoch = ElasticEpoch {
        spec: &spec,
        indices: &indices,
        pages: None,
        epoch: 3,
    };
    let stints = [Stint {
        world_size: 2,
        consumed: 1,
    }];
    let (consumed, shares) = simulate(&epoch, &stints, 3);
    let mut delivered = consumed;
    for s in &shares {
        delivered.extend_from_slice(&s.order[..s.own]);
    }
    delivered.sort_unstable();
    let mut expected = indices.clone();
    expected.sort_unstable();
    assert_eq!(delivered, expected);
}

#[test]
fn a_first_stint_of_the_wrong_world_size_is_refused() {
    let indices: Vec<u64> = (0..10).collect();
    let spec = spec(OrderKind::Random, 0, Some(4));
    let epoch = ElasticEpoch {
        spec: &spec,
        indices: &indices,
        pages: None,
        epoch: 0,
    };
    let err = epoch
        .pool_after(&[Stint {
            world_size: 3,
            consumed: 1,
        }])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "stint 0 of the resumed epoch ran 3 ranks, but the order it resumes ran 4"
    );
    assert_eq!(
        Pool::new(vec![1, 2], false)
            .share(2, 2, None)
            .unwrap_err()
            .to_string(),
        "rank 2 is out of range for world size 2 (ranks are 0..2)"
    );
}

/// A QuasiRandom epoch whose first stint ran `old` ranks, interrupted after each rank
/// consumed `consumed` samples and resumed by `new` ranks: every sample comes once, and
/// each stint's padding is fewer than its world size. Returns the two paddings.
fn quasi_random_stints(
    sizes: &[usize],
    old: usize,
    consumed: usize,
    new: usize,
    seed: u64,
) -> (usize, usize) {
    let pages = pages_of_sizes(sizes);
    let indices: Vec<u64> = (0..pages.num_samples()).collect();
    let n = indices.len();
    let spec = spec(OrderKind::QuasiRandom, seed, Some(old));
    let epoch = ElasticEpoch {
        spec: &spec,
        indices: &indices,
        pages: Some(&pages),
        epoch: 2,
    };
    let first: Vec<_> = (0..old).map(|r| epoch.first_share(r).unwrap()).collect();
    let first_length = n.div_ceil(old);
    let first_padding: usize = first.iter().map(|s| s.order.len() - s.own).sum();
    assert!(first.iter().all(|s| s.order.len() == first_length));
    assert_eq!(first_padding, first_length * old - n);
    assert!(first_padding < old);
    let stints = [Stint {
        world_size: old,
        consumed,
    }];
    let (mut delivered, shares) = simulate(&epoch, &stints, new);
    let pool = epoch.pool_after(&stints).unwrap();
    let left = pool.samples().len();
    let length = left.div_ceil(new);
    assert_eq!(pool.samples_per_rank(new, Some(&pages)).unwrap(), length);
    let mut padding = 0;
    for (rank, share) in shares.iter().enumerate() {
        assert_eq!(share.order.len(), length, "rank {rank}");
        // Shares within one sample: `left / new`, one more for the first ranks.
        assert_eq!(share.own, left / new + usize::from(rank < left % new));
        if share.own > 0 && share.own < length {
            // One short: the rank's own last sample, once more.
            assert_eq!(share.order[share.own], share.order[share.own - 1]);
        }
        padding += length - share.own;
        delivered.extend_from_slice(&share.order[..share.own]);
    }
    assert!(padding < new, "{padding} repeats on {new} ranks");
    delivered.sort_unstable();
    assert_eq!(delivered, indices, "every sample once");
    (first_padding, padding)
}

#[test]
fn quasi_random_elastic_stints_pad_fewer_than_their_world_size() {
    // Fewer pages than ranks, as many, and many: the 3,080-sample 12-page shape and 40
    // uneven pages.
    let layouts: Vec<Vec<usize>> = vec![
        vec![64],
        vec![9, 9],
        vec![13, 13, 13, 5],
        vec![11, 11, 11, 11, 3],
        [vec![257; 11], vec![253]].concat(),
        (0..40).map(|i| i * 7 % 23 + 1).collect(),
    ];
    for sizes in &layouts {
        let n: usize = sizes.iter().sum();
        for (old, new) in [(4, 3), (3, 5)] {
            let per_rank = n.div_ceil(old);
            for consumed in [0, 1, per_rank / 3, per_rank / 2, per_rank - 1, per_rank] {
                for seed in [0, 7] {
                    quasi_random_stints(sizes, old, consumed, new, seed);
                }
            }
        }
    }
    // 3,080 samples on 4 ranks, resumed by 3 half-way: 770 each consumed, 1,540 left,
    // 514 a new rank, 2 repeats.
    let sizes = [vec![257; 11], vec![253]].concat();
    assert_eq!(quasi_random_stints(&sizes, 4, 385, 3, 0), (0, 2));
    // Then resumed again by 5: a chain of stints stays exact.
    let pages = pages_of_sizes(&sizes);
    let indices: Vec<u64> = (0..3080).collect();
    let spec = spec(OrderKind::QuasiRandom, 0, Some(4));
    let epoch = ElasticEpoch {
        spec: &spec,
        indices: &indices,
        pages: Some(&pages),
        epoch: 2,
    };
    let stints = [
        Stint {
            world_size: 4,
            consumed: 385,
        },
        Stint {
            world_size: 3,
            consumed: 100,
        },
    ];
    let (mut delivered, shares) = simulate(&epoch, &stints, 5);
    let padding: usize = shares.iter().map(|s| s.order.len() - s.own).sum();
    assert_eq!(
        shares[0].order.len(),
        (3080 - 4 * 385 - 3 * 100usize).div_ceil(5)
    );
    assert!(padding < 5);
    for share in &shares {
        delivered.extend_from_slice(&share.order[..share.own]);
    }
    delivered.sort_unstable();
    assert_eq!(delivered, indices);
}
