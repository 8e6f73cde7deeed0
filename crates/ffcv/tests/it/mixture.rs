//! Weighted mixtures (`Loader::builder_mixture`): three sources (two files and a shard
//! set of two) whose `index` field holds the global sample id, so every row is checked
//! against the generator. Per-source counts match the weights exactly per epoch; with
//! `stop` no sample repeats, with `cycle` each pass is a permutation of its source; the
//! order follows from `(seed, epoch)`; every order kind; world sizes 1, 2 and 3 take
//! disjoint positions whose union is the epoch; a state taken mid-epoch resumes to
//! exactly the remaining batches; mismatched fields and bad weights are errors naming
//! the source, field or weight.

use crate::loader_support::{blob, epoch_ids};

use std::collections::BTreeSet;
use std::path::Path;

use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, from_fn};
use ffcv::{Loader, LoaderState, Mixture, MixtureSource, Order, WhenExhausted};

/// Samples per source: `a`, `b`, and the shard set `c` (30 + 40).
const LENS: [u64; 3] = [50, 80, 70];
const FIRST: [u64; 3] = [0, 50, 130];

/// Writes global ids `start..end` to `dir/name.beton` with small pages.
fn write_range(dir: &Path, name: &str, start: u64, end: u64) -> String {
    let path = dir.join(format!("{name}.beton"));
    let fields = vec![
        FieldSpec::new("index", FieldType::Int),
        FieldSpec::new("blob", FieldType::Bytes),
    ];
    DatasetWriter::new(&path, fields)
        .unwrap()
        .with_page_size(2 << 20)
        .unwrap()
        .with_num_workers(1)
        .write(&from_fn(end - start, |i| {
            let id = start + i;
            Ok(vec![
                FieldValue::Int(id as i64),
                FieldValue::Bytes(blob(id)),
            ])
        }))
        .unwrap();
    path.to_string_lossy().into_owned()
}

fn sources(dir: &Path) -> Vec<MixtureSource> {
    vec![
        write_range(dir, "a", 0, 50).into(),
        write_range(dir, "b", 50, 130).into(),
        MixtureSource(vec![
            write_range(dir, "c-0", 130, 160),
            write_range(dir, "c-1", 160, 200),
        ]),
    ]
}

const KINDS: [Order; 3] = [Order::Sequential, Order::Random, Order::QuasiRandom];

fn source_of(id: u64) -> usize {
    (0..3).rev().find(|&s| id >= FIRST[s]).unwrap()
}

fn loader(m: &Mixture, os_cache: bool) -> Loader {
    m.loader_builder()
        .batch_size(16)
        .drop_last(false)
        .num_workers(2)
        .os_cache(os_cache)
        .build()
        .unwrap()
}

fn counts(ids: &[u64]) -> [u64; 3] {
    let mut c = [0; 3];
    for &id in ids {
        c[source_of(id)] += 1;
    }
    c
}

#[test]
fn counts_per_source_match_the_weights_every_epoch_under_every_order() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    for order in KINDS {
        let m = Loader::builder_mixture(src.clone(), &[0.5, 0.3, 0.2])
            .order(order.clone())
            .seed(7)
            .open()
            .unwrap();
        assert_eq!(m.order().counts(), &[100, 60, 40]);
        assert_eq!(m.source_ranges(), vec![(0, 50), (50, 80), (130, 70)]);
        let mut l = loader(&m, true);
        assert_eq!(l.len(), 13, "{order:?}: 200 positions in batches of 16");
        for epoch in 0..2 {
            let ids = epoch_ids(&mut l);
            assert_eq!(ids.len(), 200);
            assert_eq!(counts(&ids), [100, 60, 40], "{order:?} epoch {epoch}");
            assert_eq!(
                ids,
                m.order().global_order(epoch),
                "{order:?} epoch {epoch}"
            );
            for &id in &ids {
                let (s, local) = m.locate(id).unwrap();
                assert_eq!((s, local), (source_of(id), id - FIRST[s]));
            }
        }
    }
}

#[test]
fn cycle_walks_each_source_pass_by_pass_without_replacement() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    for order in KINDS {
        let m = Loader::builder_mixture(src.clone(), &[3.0, 1.0, 1.0])
            .order(order.clone())
            .seed(11)
            .samples_per_epoch(250)
            .open()
            .unwrap();
        // 150 of source a's 50 samples: three passes, each a permutation.
        assert_eq!(m.order().counts(), &[150, 50, 50]);
        let ids = m.order().global_order(0);
        for s in 0..3 {
            let mine: Vec<u64> = ids.iter().copied().filter(|&i| source_of(i) == s).collect();
            let all: BTreeSet<u64> = (FIRST[s]..FIRST[s] + LENS[s]).collect();
            for (pass, chunk) in mine.chunks(LENS[s] as usize).enumerate() {
                let seen: BTreeSet<u64> = chunk.iter().copied().collect();
                assert_eq!(
                    seen.len(),
                    chunk.len(),
                    "{order:?} source {s} pass {pass} repeats"
                );
                assert!(seen.is_subset(&all));
                if chunk.len() == LENS[s] as usize {
                    assert_eq!(seen, all, "{order:?} source {s} pass {pass}");
                }
            }
        }
        if !matches!(order, Order::Sequential) {
            // A fresh order per pass: source a's second pass is not its first again.
            let a: Vec<u64> = ids.iter().copied().filter(|&i| i < 50).collect();
            assert_ne!(a[..50], a[50..100], "{order:?}");
        }
    }
}

#[test]
fn stop_ends_the_epoch_when_a_source_runs_out_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    for order in KINDS {
        let m = Loader::builder_mixture(src.clone(), &[1.0, 1.0, 1.0])
            .order(order.clone())
            .seed(3)
            .when_exhausted(WhenExhausted::Stop)
            .open()
            .unwrap();
        let mut l = loader(&m, false);
        let ids = epoch_ids(&mut l);
        let unique: BTreeSet<u64> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "{order:?}: a sample repeats");
        let c = counts(&ids);
        // Equal weights: the round robin draws a, b, c in turn, and the epoch ends at
        // the position that would draw a's 51st sample.
        assert_eq!(c, [50, 50, 50], "{order:?}");
        assert_eq!(m.order().counts(), &c);
    }
}

#[test]
fn the_order_follows_from_seed_and_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    let open = |seed: u64| {
        Loader::builder_mixture(src.clone(), &[0.2, 0.5, 0.3])
            .order(Order::Random)
            .seed(seed)
            .open()
            .unwrap()
    };
    let (a, b, c) = (open(5), open(5), open(6));
    assert_eq!(a.order().global_order(0), b.order().global_order(0));
    assert_eq!(a.order().global_order(3), b.order().global_order(3));
    assert_ne!(a.order().global_order(0), a.order().global_order(1));
    assert_ne!(a.order().global_order(0), c.order().global_order(0));
    // The source of each position is the same every epoch (and for every seed).
    let pattern = |m: &Mixture, e| -> Vec<usize> {
        m.order()
            .global_order(e)
            .iter()
            .map(|&i| source_of(i))
            .collect()
    };
    assert_eq!(pattern(&a, 0), pattern(&a, 1));
    assert_eq!(pattern(&a, 0), pattern(&c, 0));
    // Two loaders of one seed deliver the same epoch.
    let (mut la, mut lb) = (loader(&a, true), loader(&b, true));
    assert_eq!(epoch_ids(&mut la), epoch_ids(&mut lb));
}

#[test]
fn ranks_take_disjoint_positions_whose_union_is_the_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    for order in KINDS {
        for world in 1..=3usize {
            // 199 positions: not a multiple of 2 or 3, so ranks pad.
            let spec = |rank| {
                Loader::builder_mixture(src.clone(), &[0.5, 0.3, 0.2])
                    .order(order.clone())
                    .seed(9)
                    .samples_per_epoch(199)
                    .distributed(rank, world)
            };
            let global = spec(0).open().unwrap().order().global_order(1);
            let padded = 199usize.div_ceil(world) * world;
            let mut by_position = vec![None; padded];
            for rank in 0..world {
                let m = spec(rank).open().unwrap();
                let mut l = loader(&m, rank % 2 == 0);
                l.set_next_epoch(1);
                let ids = epoch_ids(&mut l);
                assert_eq!(
                    ids.len(),
                    padded / world,
                    "{order:?} world {world} rank {rank}"
                );
                for (i, id) in ids.into_iter().enumerate() {
                    let p = rank + i * world;
                    assert!(by_position[p].is_none(), "position {p} twice");
                    by_position[p] = Some(id);
                }
            }
            let delivered: Vec<u64> = by_position.into_iter().map(Option::unwrap).collect();
            assert_eq!(delivered[..199], global[..], "{order:?} world {world}");
            // Padding repeats the epoch's first positions.
            assert_eq!(
                delivered[199..],
                global[..padded - 199],
                "{order:?} world {world}"
            );
        }
    }
}

/// Ids and index values of each batch.
fn batches(it: impl Iterator<Item = ffcv::Result<ffcv::Batch>>) -> Vec<(Vec<u64>, Vec<i64>)> {
    it.map(|b| {
        let b = b.unwrap();
        (
            b.sample_ids().to_vec(),
            b.get::<i64>("index").unwrap().to_vec(),
        )
    })
    .collect()
}

#[test]
fn a_state_taken_mid_epoch_resumes_to_exactly_the_remaining_batches() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    for order in KINDS {
        for (rank, world) in [(0, 1), (1, 3)] {
            let spec = || {
                Loader::builder_mixture(src.clone(), &[0.6, 0.1, 0.3])
                    .order(order.clone())
                    .seed(21)
                    .samples_per_epoch(300)
                    .distributed(rank, world)
            };
            let build = || spec().loader().unwrap().batch_size(8).num_workers(2);
            let mut whole = build().build().unwrap();
            whole.set_next_epoch(2);
            let all = batches(whole.iter());
            let mut first = build().build().unwrap();
            first.set_next_epoch(2);
            let mut it = first.iter();
            let taken = batches(it.by_ref().take(5));
            let state = LoaderState::from_json(&it.state().to_json()).unwrap();
            drop(it);
            let mut resumed = build().resume(state).build().unwrap();
            let rest = batches(resumed.iter());
            assert_eq!(taken[..], all[..5], "{order:?} world {world}");
            assert_eq!(rest[..], all[5..], "{order:?} world {world}");
            for (ids, index) in &rest {
                let ids: Vec<i64> = ids.iter().map(|&i| i as i64).collect();
                assert_eq!(&ids, index);
            }
            assert_eq!(resumed.next_epoch(), 3);
        }
    }
}

/// The ids of `epoch` that every rank of `world` yields after `skip` batches of 8, from
/// mixtures made by `spec(rank, world)`, resumed from `state` when given: one list per rank.
fn ranks_rest(
    spec: &dyn Fn(usize, usize) -> ffcv::MixtureSpec,
    world: usize,
    state: Option<&LoaderState>,
    take: Option<usize>,
) -> (Vec<Vec<u64>>, Option<LoaderState>) {
    let mut lists = Vec::new();
    let mut saved = None;
    for rank in 0..world {
        let mut builder = spec(rank, world)
            .loader()
            .unwrap()
            .batch_size(8)
            .drop_last(false)
            .num_workers(2);
        if let Some(state) = state {
            builder = builder.resume(LoaderState::from_json(&state.to_json()).unwrap());
        }
        let mut l = builder.build().unwrap();
        let mut it = l.iter();
        let got = batches(it.by_ref().take(take.unwrap_or(usize::MAX)));
        if rank == world - 1 {
            saved = Some(it.state());
        }
        drop(it);
        let mut ids = Vec::new();
        for (batch_ids, index) in got {
            let as_index: Vec<i64> = batch_ids.iter().map(|&i| i as i64).collect();
            assert_eq!(as_index, index, "values follow the ids");
            ids.extend(batch_ids);
        }
        lists.push(ids);
    }
    (lists, saved)
}

/// What ranks `0..world` take of `pool` split strided (`DistributedSampler`'s rule: pad
/// from the start, then every `world`-th position).
fn strided(pool: &[u64], world: usize) -> Vec<Vec<u64>> {
    let per_rank = pool.len().div_ceil(world);
    (0..world)
        .map(|r| {
            (0..per_rank)
                .map(|k| pool[(r + k * world) % pool.len()])
                .collect()
        })
        .collect()
}

#[test]
fn a_state_resumes_elastically_under_another_world_size() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    for order in KINDS {
        let spec = |rank: usize, world: usize| {
            Loader::builder_mixture(src.clone(), &[0.5, 0.3, 0.2])
                .order(order.clone())
                .seed(13)
                .samples_per_epoch(199)
                .distributed(rank, world)
        };
        let global = spec(0, 1).open().unwrap().order().global_order(0);
        for (w0, w1, w2) in [(1, 2, 3), (3, 2, 1), (2, 3, 2), (2, 1, 3)] {
            let label = format!("{order:?} worlds {w0} -> {w1} -> {w2}");
            // Stint 0: every rank of w0 takes 3 batches of its ordinary split.
            let (first, state) = ranks_rest(&spec, w0, None, Some(3));
            let expected0: Vec<Vec<u64>> = strided(&global, w0)
                .into_iter()
                .map(|ids| ids[..24].to_vec())
                .collect();
            assert_eq!(first, expected0, "{label}: stint 0");
            let state = state.unwrap();
            assert_eq!(state.stint_world_sizes(), vec![w0], "{label}");
            // Stint 1: w1 ranks split the positions no rank consumed, take 2 batches.
            let pool1 = global[24 * w0..].to_vec();
            let (second, state) = ranks_rest(&spec, w1, Some(&state), Some(2));
            let expected1: Vec<Vec<u64>> = strided(&pool1, w1)
                .into_iter()
                .map(|ids| ids[..16.min(ids.len())].to_vec())
                .collect();
            assert_eq!(second, expected1, "{label}: stint 1");
            let state = state.unwrap();
            assert_eq!(state.stint_world_sizes(), vec![w0, w1], "{label}");
            // Stint 2: w2 ranks finish the epoch.
            let pool2 = pool1[16 * w1..].to_vec();
            let (third, state) = ranks_rest(&spec, w2, Some(&state), None);
            assert_eq!(third, strided(&pool2, w2), "{label}: stint 2");
            assert_eq!(state.unwrap().epoch(), 1, "{label}: the epoch ended");
            // Every position of the epoch came once, besides fewer than `w` padding
            // entries per stint.
            let mut delivered: Vec<u64> = [first, second, third].concat().concat();
            let mut want = global.clone();
            delivered.sort_unstable();
            want.sort_unstable();
            let mut extra = delivered.clone();
            for id in &want {
                let at = extra
                    .iter()
                    .position(|x| x == id)
                    .expect("a position missed");
                extra.swap_remove(at);
            }
            assert!(
                extra.len() < w0 + w1 + w2,
                "{label}: {} repeats",
                extra.len()
            );
        }
    }
}

#[test]
fn a_state_resumes_every_rank_of_its_world() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    let spec = |rank: usize, world: usize| {
        Loader::builder_mixture(src.clone(), &[0.2, 0.5, 0.3])
            .order(Order::Random)
            .seed(2)
            .samples_per_epoch(150)
            .distributed(rank, world)
    };
    let (whole, _) = ranks_rest(&spec, 3, None, None);
    // The last rank's state resumes each of the three ranks at its own position.
    let (_, state) = ranks_rest(&spec, 3, None, Some(4));
    let (rest, _) = ranks_rest(&spec, 3, state.as_ref(), None);
    for rank in 0..3 {
        assert_eq!(rest[rank], whole[rank][32..], "rank {rank}");
    }
}

#[test]
fn a_state_of_other_sources_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    let m = Loader::builder_mixture(src.clone(), &[1.0, 1.0, 1.0])
        .seed(1)
        .open()
        .unwrap();
    let mut l = loader(&m, true);
    let mut it = l.iter();
    it.next().unwrap().unwrap();
    let state = it.state();
    drop(it);
    let other = Loader::builder_mixture(src[..2].to_vec(), &[1.0, 1.0])
        .seed(1)
        .loader();
    let err = other
        .unwrap()
        .batch_size(16)
        .resume(state)
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("another file"), "{err}");
}

#[test]
fn a_state_of_other_weights_epoch_length_or_policy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    let spec = |weights: &[f64]| {
        Loader::builder_mixture(src.clone(), weights)
            .seed(4)
            .samples_per_epoch(120)
    };
    let builder = |spec: ffcv::MixtureSpec| spec.loader().unwrap().batch_size(8);
    let mut saved = builder(spec(&[0.5, 0.3, 0.2])).build().unwrap();
    let mut it = saved.iter();
    it.next().unwrap().unwrap();
    let state = it.state();
    drop(it);
    // The same mixture resumes...
    let same = builder(spec(&[0.5, 0.3, 0.2]))
        .resume(state.clone())
        .build();
    assert!(same.is_ok(), "{:?}", same.err());
    // ...one that would draw other positions is refused, naming both.
    let others = [
        spec(&[0.2, 0.3, 0.5]),
        spec(&[0.5, 0.3, 0.2]).samples_per_epoch(90),
        spec(&[0.5, 0.3, 0.2]).when_exhausted(WhenExhausted::Stop),
    ];
    for other in others {
        let err = builder(other).resume(state.clone()).build().err().unwrap();
        let text = err.to_string();
        assert!(
            text.contains("saved with the custom order mixture("),
            "{text}"
        );
        assert!(text.contains("samples_per_epoch=120"), "{text}");
    }
}

#[test]
fn sources_whose_fields_differ_are_refused_naming_source_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_range(dir.path(), "a", 0, 10);
    let b = write_range(dir.path(), "b", 10, 20);
    let odd = dir.path().join("odd.beton");
    DatasetWriter::new(
        &odd,
        vec![
            FieldSpec::new("index", FieldType::Float),
            FieldSpec::new("blob", FieldType::Bytes),
        ],
    )
    .unwrap()
    .with_page_size(2 << 20)
    .unwrap()
    .write(&from_fn(4, |i| {
        Ok(vec![
            FieldValue::Float(i as f64),
            FieldValue::Bytes(vec![1]),
        ])
    }))
    .unwrap();
    let odd = odd.to_string_lossy().into_owned();
    let err = Loader::builder_mixture([a.clone(), b, odd.clone()], &[1.0, 1.0, 1.0])
        .open()
        .unwrap_err()
        .to_string();
    assert!(err.contains("source 2"), "{err}");
    assert!(err.contains(&odd), "{err}");
    assert!(err.contains("field \"index\""), "{err}");
    assert!(err.contains("Float") && err.contains("Int"), "{err}");
}

#[test]
fn bad_weights_and_knobs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    let refusal = |weights: &[f64]| {
        Loader::builder_mixture(src.clone(), weights)
            .open()
            .unwrap_err()
            .to_string()
    };
    let e = refusal(&[1.0, -0.5, 1.0]);
    assert!(e.contains("weight 1 is -0.5"), "{e}");
    let e = refusal(&[1.0, f64::NAN, 1.0]);
    assert!(e.contains("weight 1 is NaN"), "{e}");
    let e = refusal(&[f64::INFINITY, 1.0, 1.0]);
    assert!(e.contains("weight 0 is inf"), "{e}");
    let e = refusal(&[0.0, 0.0, 0.0]);
    assert!(e.contains("sum to 0"), "{e}");
    let e = refusal(&[1.0, 1.0]);
    assert!(e.contains("2 weights for 3 sources"), "{e}");
    let e = Loader::builder_mixture(src.clone(), &[1.0; 3])
        .distributed(3, 3)
        .open()
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 3 is not below world_size 3"), "{e}");
    let e = Loader::builder_mixture(src.clone(), &[1.0; 3])
        .samples_per_epoch(0)
        .open()
        .unwrap_err()
        .to_string();
    assert!(e.contains("samples_per_epoch"), "{e}");
    let e = Loader::builder_mixture(Vec::<MixtureSource>::new(), &[])
        .open()
        .unwrap_err()
        .to_string();
    assert!(e.contains("no sources"), "{e}");
    // A weight of 0 is allowed: the source is never drawn.
    let m = Loader::builder_mixture(src.clone(), &[0.0, 1.0, 1.0])
        .open()
        .unwrap();
    assert_eq!(m.order().counts(), &[0, 100, 100]);
}

#[test]
fn a_source_without_samples_and_a_positive_weight_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_range(dir.path(), "a", 0, 10);
    let empty = write_range(dir.path(), "empty", 0, 0);
    let e = Loader::builder_mixture([a.clone(), empty.clone()], &[1.0, 1.0])
        .open()
        .unwrap_err()
        .to_string();
    assert!(e.contains("source 1") && e.contains("no samples"), "{e}");
    let m = Loader::builder_mixture([a, empty], &[1.0, 0.0])
        .order(Order::QuasiRandom)
        .open()
        .unwrap();
    assert_eq!(m.order().counts(), &[10, 0]);
    assert_eq!(m.order().global_order(0).len(), 10);
}

#[test]
fn sources_of_another_page_size_are_refused_naming_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_range(dir.path(), "a", 0, 10);
    let big = dir.path().join("big.beton");
    DatasetWriter::new(
        &big,
        vec![
            FieldSpec::new("index", FieldType::Int),
            FieldSpec::new("blob", FieldType::Bytes),
        ],
    )
    .unwrap()
    .with_page_size(4 << 20)
    .unwrap()
    .write(&from_fn(3, |i| {
        Ok(vec![FieldValue::Int(i as i64), FieldValue::Bytes(vec![1])])
    }))
    .unwrap();
    let e = Loader::builder_mixture([a, big.to_string_lossy().into_owned()], &[1.0, 1.0])
        .open()
        .unwrap_err()
        .to_string();
    assert!(e.contains("source 1") && e.contains("big.beton"), "{e}");
    assert!(e.contains("page size"), "{e}");
}

#[test]
fn the_process_cache_delivers_what_the_os_cache_does() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    let m = Loader::builder_mixture(src, &[0.4, 0.4, 0.2])
        .order(Order::QuasiRandom)
        .quasi_buffer_pages(4)
        .seed(2)
        .open()
        .unwrap();
    let (mut os, mut process) = (loader(&m, true), loader(&m, false));
    let ids = epoch_ids(&mut os);
    assert_eq!(ids, epoch_ids(&mut process));
    assert_eq!(counts(&ids), [80, 80, 40]);
}
