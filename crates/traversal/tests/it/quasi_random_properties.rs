//! QuasiRandom is deterministic for (seed, epoch), stateless, page-local (the pages it
//! keeps open never exceed its buffer), refuses datasets without data pages as FFCV
//! does, and in distributed mode gives ranks disjoint samples, shares within one sample
//! of each other and fewer than `world_size` padding repeats.

use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;
use serde_json::Value;
use traversal::{
    Distributed, Error, QuasiRandom, SamplePages, TraversalOrder, default_buffer_pages,
    shuffle_quality,
};

/// Pages of `sizes[i]` samples each, page ids from 1, samples in order.
fn pages_of_sizes(sizes: &[usize]) -> SamplePages {
    let mut page_of = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        page_of.extend(std::iter::repeat_n(Some(i as u64 + 1), size));
    }
    SamplePages::new(page_of)
}

fn all(pages: &SamplePages) -> Vec<u64> {
    (0..pages.num_samples()).collect()
}

/// The multipage fixture's page map, as FFCV 1.0.2 wrote it.
fn multipage_pages() -> SamplePages {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/ffcv-1.0.2/multipage.expected.json"
    );
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let num_samples = expected["header"]["num_samples"].as_u64().unwrap();
    let mut page_of = vec![None; num_samples as usize];
    for (page, samples) in expected["pages"]["page_to_samples"].as_object().unwrap() {
        let page: u64 = page.parse().unwrap();
        for sample in samples.as_array().unwrap() {
            page_of[sample.as_u64().unwrap() as usize] = Some(page);
        }
    }
    SamplePages::new(page_of)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn open_pages_never_exceed_the_buffer(
        sizes in proptest::collection::vec(1usize..30, 1..60),
        buffer_pages in 1usize..12,
        batch_size in 1usize..40,
        seed in any::<u64>(),
        epoch in 0u64..100,
    ) {
        let pages = pages_of_sizes(&sizes);
        let order = QuasiRandom::new(&all(&pages), &pages, seed, buffer_pages)
            .unwrap()
            .order(epoch);
        let quality = shuffle_quality(&order, batch_size, &pages, None).unwrap();
        prop_assert!(quality.peak_open_pages <= buffer_pages);

        // Per batch: the pages touched are at most the buffer plus the pages that run
        // out inside the batch (each exhausted page lets one new page in).
        let mut last_position: HashMap<u64, usize> = HashMap::new();
        for (position, &sample) in order.iter().enumerate() {
            last_position.insert(pages.page_of(sample).unwrap(), position);
        }
        for (b, batch) in order.chunks(batch_size).enumerate() {
            let range = b * batch_size..b * batch_size + batch.len();
            let touched: BTreeSet<u64> = batch.iter().map(|&s| pages.page_of(s).unwrap()).collect();
            let exhausted = last_position.values().filter(|&&p| range.contains(&p)).count();
            prop_assert!(touched.len() <= buffer_pages + exhausted);
        }
    }

    #[test]
    fn an_epoch_depends_only_on_seed_epoch_indices_and_pages(
        sizes in proptest::collection::vec(1usize..20, 1..30),
        seed in any::<u64>(),
        epoch in 0u64..100,
    ) {
        let pages = pages_of_sizes(&sizes);
        let indices = all(&pages);
        let first = QuasiRandom::new(&indices, &pages, seed, 3).unwrap();
        let expected = first.order(epoch);
        // Other epochs computed before do not change it (FFCV's order would).
        let _ = first.order(epoch + 1);
        let _ = first.order(0);
        prop_assert_eq!(first.order(epoch), expected.clone());
        let fresh = QuasiRandom::new(&indices, &pages, seed, 3).unwrap();
        prop_assert_eq!(fresh.order(epoch), expected);
    }

    #[test]
    fn distributed_ranks_hold_disjoint_samples_and_balanced_shares(
        sizes in proptest::collection::vec(1usize..20, 1..40),
        world_size in 1usize..10,
        buffer_pages in 1usize..6,
        seed in any::<u64>(),
    ) {
        let pages = pages_of_sizes(&sizes);
        let indices = all(&pages);
        for epoch in 0..3 {
            let orders = rank_orders(&indices, &pages, seed, buffer_pages, world_size, epoch);
            check_epoch(&indices, &pages, &orders);
            for order in &orders {
                // A cut page's part is one page of the rank's walk: still within the buffer.
                let quality = shuffle_quality(order, 4, &pages, None).unwrap();
                prop_assert!(quality.peak_open_pages <= buffer_pages);
            }
        }
    }
}

/// Every rank's order of `epoch`.
fn rank_orders(
    indices: &[u64],
    pages: &SamplePages,
    seed: u64,
    buffer_pages: usize,
    world_size: usize,
    epoch: u64,
) -> Vec<Vec<u64>> {
    (0..world_size)
        .map(|rank| {
            QuasiRandom::new(indices, pages, seed, buffer_pages)
                .unwrap()
                .with_distributed(Distributed::new(world_size, rank).unwrap())
                .order(epoch)
        })
        .collect()
}

/// What one distributed epoch must be, exactly: every rank yields `ceil(N / W)` samples;
/// a rank's own samples are distinct and come first, and a padded rank repeats its own
/// last sample once (with N < W, every rank yields one sample and the ranks past the N
/// samples repeat one each); the ranks' own samples are the indices, each once; the padding is
/// `W * ceil(N / W) - N < W` entries; and the cut pages cost fewer than W extra page
/// reads (pages per rank, summed, minus the pages of the file). Returns the padding.
fn check_epoch(indices: &[u64], pages: &SamplePages, orders: &[Vec<u64>]) -> usize {
    let world_size = orders.len();
    let length = indices.len().div_ceil(world_size);
    let mut expected = indices.to_vec();
    expected.sort_unstable();
    if indices.len() < world_size {
        // One sample a rank: the first bins hold one each, the others repeat one of them.
        assert!(orders.iter().all(|o| o.len() == 1), "{orders:?}");
        let seen: BTreeSet<u64> = orders.iter().flatten().copied().collect();
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), expected);
        return world_size - indices.len();
    }
    let mut own_samples = Vec::new();
    let mut padding = 0;
    let mut page_reads = 0;
    for order in orders {
        assert_eq!(order.len(), length, "{orders:?}");
        let distinct: BTreeSet<u64> = order.iter().copied().collect();
        let own: &[u64] = if distinct.len() == order.len() {
            order
        } else {
            // Padded: one repeat, of the sample before it.
            assert_eq!(distinct.len() + 1, order.len(), "{order:?}");
            assert!(length >= 2, "{order:?}");
            assert_eq!(order[length - 1], order[length - 2], "{order:?}");
            &order[..length - 1]
        };
        padding += order.len() - own.len();
        own_samples.extend_from_slice(own);
        let own_pages: BTreeSet<u64> = own.iter().map(|&s| pages.page_of(s).unwrap()).collect();
        page_reads += own_pages.len();
    }
    own_samples.sort_unstable();
    assert_eq!(own_samples, expected, "each sample once: {orders:?}");
    assert_eq!(padding, length * world_size - indices.len());
    assert!(padding < world_size);
    let file_pages: BTreeSet<u64> = indices.iter().map(|&s| pages.page_of(s).unwrap()).collect();
    assert!(
        page_reads < file_pages.len() + world_size,
        "{page_reads} page reads for {} pages on {world_size} ranks",
        file_pages.len()
    );
    padding
}

#[test]
fn distributed_epochs_see_every_sample_once_with_fewer_than_world_size_repeats() {
    // For each world size: fewer pages than ranks (one page; fewer samples than ranks,
    // too), as many pages as ranks (a short last one), and many pages (the 3,080-sample,
    // 12-page shape, and 40 pages of uneven sizes).
    for world_size in [2, 3, 5, 8] {
        let layouts: Vec<Vec<usize>> = vec![
            vec![64],
            vec![2, 1],
            vec![9; world_size - 1],
            [vec![13; world_size - 1], vec![5]].concat(),
            [vec![257; 11], vec![253]].concat(),
            (0..40).map(|i| i * 7 % 23 + 1).collect(),
        ];
        for sizes in layouts {
            let pages = pages_of_sizes(&sizes);
            let indices = all(&pages);
            for (seed, epoch) in [(0, 0), (5, 1), (11, 7)] {
                let orders = rank_orders(&indices, &pages, seed, 4, world_size, epoch);
                check_epoch(&indices, &pages, &orders);
            }
        }
    }
}

#[test]
fn the_cases_of_the_report_no_longer_repeat_pages() {
    // 64 samples in one page on 2 ranks: 64 positions (it was 128, rank 1 repeating
    // everything).
    let pages = pages_of_sizes(&[64]);
    let orders = rank_orders(&all(&pages), &pages, 0, 14, 2, 0);
    assert_eq!(check_epoch(&all(&pages), &pages, &orders), 0);
    assert_eq!(orders.iter().map(Vec::len).sum::<usize>(), 64);
    // 3,080 samples in 12 pages on 3 ranks: 3,081 positions, one repeat (it was 274).
    let pages = pages_of_sizes(&[vec![257; 11], vec![253]].concat());
    let orders = rank_orders(&all(&pages), &pages, 0, 14, 3, 0);
    assert_eq!(check_epoch(&all(&pages), &pages, &orders), 1);
    // A subset keeps to its own samples, balanced over its own count.
    let subset: Vec<u64> = (0..3080).filter(|s| s % 3 != 0).collect();
    let orders = rank_orders(&subset, &pages, 2, 14, 5, 3);
    assert_eq!(check_epoch(&subset, &pages, &orders), 5 * 411 - 2053);
}

#[test]
fn distributed_orders_are_deterministic_and_change_with_the_epoch() {
    let pages = pages_of_sizes(&[vec![257; 11], vec![253]].concat());
    let indices = all(&pages);
    let a = rank_orders(&indices, &pages, 4, 6, 3, 2);
    assert_eq!(a, rank_orders(&indices, &pages, 4, 6, 3, 2));
    assert_ne!(a, rank_orders(&indices, &pages, 4, 6, 3, 3));
    assert_ne!(a, rank_orders(&indices, &pages, 5, 6, 3, 2));
}

#[test]
fn a_buffer_of_one_page_reads_pages_one_after_the_other() {
    let pages = pages_of_sizes(&[5, 3, 8, 1, 6]);
    let order = QuasiRandom::new(&all(&pages), &pages, 11, 1)
        .unwrap()
        .order(4);
    let page_runs: Vec<u64> =
        order
            .iter()
            .map(|&s| pages.page_of(s).unwrap())
            .fold(Vec::new(), |mut runs, page| {
                if runs.last() != Some(&page) {
                    runs.push(page);
                }
                runs
            });
    assert_eq!(
        page_runs.len(),
        5,
        "each page is one contiguous run: {page_runs:?}"
    );
}

#[test]
fn a_bigger_buffer_mixes_more_pages_per_batch() {
    let pages = multipage_pages();
    let indices = all(&pages);
    let quality = |buffer| {
        let order = QuasiRandom::new(&indices, &pages, 0, buffer)
            .unwrap()
            .order(0);
        shuffle_quality(&order, 7, &pages, None).unwrap()
    };
    let narrow = quality(1);
    let wide = quality(default_buffer_pages(7));
    // One page at a time: a batch of 7 spans at most 2 of the 6-sample pages.
    assert!(narrow.max_distinct_pages_per_batch <= 2);
    assert!(narrow.peak_open_pages <= 1);
    // FFCV's buffer (14 pages) holds all 7 data pages of the file at once.
    assert!(wide.mean_distinct_pages_per_batch > narrow.mean_distinct_pages_per_batch);
    assert!(wide.peak_open_pages <= 7);
}

#[test]
fn epochs_and_seeds_give_different_orders() {
    let pages = multipage_pages();
    let indices = all(&pages);
    let order = QuasiRandom::new(&indices, &pages, 0, 14).unwrap();
    assert_ne!(order.order(0), order.order(1));
    let other_seed = QuasiRandom::new(&indices, &pages, 1, 14).unwrap();
    assert_ne!(order.order(0), other_seed.order(0));
}

#[test]
fn a_dataset_without_data_pages_is_refused_as_ffcv_does() {
    // scalars.beton: 100 samples, only Int and Float fields, no allocation.
    let pages = SamplePages::new(vec![None; 100]);
    let error = QuasiRandom::new(&all(&pages), &pages, 0, 14).unwrap_err();
    assert_eq!(error, Error::NoDataPages);
    assert!(
        error
            .to_string()
            .contains("won't benefit from QuasiRandom order"),
        "{error}"
    );
}

#[test]
fn indices_outside_the_page_map_and_empty_buffers_are_refused() {
    let pages = pages_of_sizes(&[3, 3]);
    assert_eq!(
        QuasiRandom::new(&[0, 6, 1], &pages, 0, 2),
        Err(Error::IndexOutOfRange {
            index: 6,
            position: 1,
            num_samples: 6
        })
    );
    assert_eq!(
        QuasiRandom::new(&[0], &pages, 0, 0),
        Err(Error::ZeroBufferPages)
    );
}

#[test]
fn a_subset_only_yields_its_own_samples() {
    let pages = multipage_pages();
    let subset: Vec<u64> = (0..40).filter(|s| s % 3 != 0).collect();
    let mut order = QuasiRandom::new(&subset, &pages, 5, 14).unwrap().order(2);
    order.sort_unstable();
    assert_eq!(order, subset);
}

#[test]
fn more_ranks_than_pages_still_cover_every_sample_with_equal_lengths() {
    let pages = pages_of_sizes(&[4, 2]);
    let indices = all(&pages);
    let orders = rank_orders(&indices, &pages, 9, 2, 5, 1);
    // ceil(6 / 5) = 2 each: the 4-sample page is cut, one rank repeats its sample.
    assert!(orders.iter().all(|o| o.len() == 2), "{orders:?}");
    assert_eq!(check_epoch(&indices, &pages, &orders), 4);
}

#[test]
fn every_fixture_page_map_gives_permutations_as_long_as_ffcvs_orders() {
    // FFCV's QUASI_RANDOM orders come from numba's generators and cannot be reproduced
    // bit for bit; ours, with FFCV's buffer (2 x batch size = 14 pages) over the real
    // page maps (tied pointers, orphaned retries), must visit the same samples.
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/ffcv-1.0.2"
    );
    let mut checked = 0;
    for name in [
        "bytes_ndarray",
        "images_jpg",
        "images_raw",
        "json",
        "multipage",
        "page_retry",
    ] {
        let read = |suffix: &str| -> Value {
            let path = format!("{dir}/{name}.{suffix}.json");
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
        };
        let (expected, recorded) = (read("expected"), read("order"));
        let num_samples = expected["header"]["num_samples"].as_u64().unwrap();
        let mut page_of = vec![None; num_samples as usize];
        for (page, samples) in expected["pages"]["page_to_samples"].as_object().unwrap() {
            for sample in samples.as_array().unwrap() {
                page_of[sample.as_u64().unwrap() as usize] = Some(page.parse::<u64>().unwrap());
            }
        }
        let pages = SamplePages::new(page_of);
        let quasi = &recorded["quasi_random"];
        assert_eq!(quasi["status"], "ok", "{name}");
        let buffer = quasi["buffer_size"].as_u64().unwrap() as usize;
        assert_eq!(buffer, default_buffer_pages(7));
        let ours = QuasiRandom::new(&all(&pages), &pages, 0, buffer).unwrap();
        for run in quasi["epochs"].as_array().unwrap() {
            let epoch = run["epoch"].as_u64().unwrap();
            let mut sorted_theirs: Vec<u64> = run["order"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            sorted_theirs.sort_unstable();
            let mut sorted_ours = ours.order(epoch);
            sorted_ours.sort_unstable();
            assert_eq!(sorted_ours, sorted_theirs, "{name} epoch {epoch}");
            checked += 1;
        }
    }
    assert_eq!(checked, 18);
}
