//! Resumable epochs through the loader: a state taken mid-epoch (through JSON) resumes
//! the remaining batches byte for byte with the same world size, random augmentations
//! included, whatever the order, cache, workers, batches ahead, drop_last and stop point;
//! with another world size every sample of the epoch comes exactly once (padding apart);
//! later epochs are ordinary; a state that does not fit is refused with a clear error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ffcv::decode::RandomResizedCropRGBImageDecoder;
use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, RgbImage, from_fn};
use ffcv::traversal::{
    Distributed, ElasticEpoch, OrderKind, OrderSpec, Pool, SamplePages, Stint, default_buffer_pages,
};
use ffcv::{Loader, LoaderBuilder, LoaderState, Order, PipelineSpec, transforms};
use proptest::prelude::*;

const SAMPLES: u64 = 150;
const BATCH: usize = 8;
const SEED: u64 = 11;
const EPOCH: u64 = 1;

/// Blobs of 40..100 KiB spread the samples over several 2 MiB pages (so QuasiRandom has
/// pages to deal); small raw images feed a random crop, flip and cutout.
fn write_dataset(path: &Path, samples: u64, salt: u64) {
    let fields = vec![
        FieldSpec::new("index", FieldType::Int),
        FieldSpec::new("blob", FieldType::Bytes),
        FieldSpec::new("image", FieldType::RgbImage),
    ];
    DatasetWriter::new(path, fields)
        .unwrap()
        .with_num_workers(1)
        .write(&from_fn(samples, move |i| {
            let len = 40 * 1024 + ((i * 7919) % 60) as usize * 1024;
            let blob: Vec<u8> = (0..len)
                .map(|k| (k as u64 ^ (i * 31 + salt)) as u8)
                .collect();
            let side = 12 + (i % 9) as u16;
            let pixels: Vec<u8> = (0..usize::from(side) * usize::from(side) * 3)
                .map(|k| (k as u64 * 7 + i * 13 + salt) as u8)
                .collect();
            Ok(vec![
                FieldValue::Int(i as i64),
                FieldValue::Bytes(blob),
                FieldValue::RgbImage(RgbImage::Raw {
                    width: side,
                    height: side,
                    pixels,
                }),
            ])
        }))
        .unwrap();
}

fn dataset() -> &'static Path {
    static PATH: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &PATH
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("resume.beton");
            write_dataset(&path, SAMPLES, 0);
            (dir, path)
        })
        .1
}

fn order_of(kind: OrderKind) -> Order {
    kind.into()
}

/// The loader knobs a case varies; those that must not change the output are apart.
#[derive(Clone, Copy, Debug)]
struct Knobs {
    os_cache: bool,
    workers: i64,
    ahead: usize,
    compile: bool,
}

fn builder(
    kind: OrderKind,
    world: Option<(usize, usize)>,
    drop_last: bool,
    knobs: Knobs,
) -> LoaderBuilder {
    let image = PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((8, 8)))
        .then(transforms::random_horizontal_flip(0.5).unwrap())
        .then(transforms::cutout(3, [255, 0, 128]));
    let mut b = Loader::builder(dataset())
        .batch_size(BATCH)
        .order(order_of(kind))
        .drop_last(drop_last)
        .os_cache(knobs.os_cache)
        .num_workers(knobs.workers)
        .batches_ahead(knobs.ahead)
        .compile(knobs.compile)
        .pipeline("image", image);
    if let Some((w, r)) = world {
        b = b.distributed(true).world_size(w).rank(r);
    }
    b
}

/// One batch as bytes: its sample ids, then every output's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct BatchBytes {
    index: usize,
    ids: Vec<u64>,
    bytes: Vec<u8>,
}

fn bytes_of(batch: &ffcv::Batch) -> BatchBytes {
    let mut bytes = Vec::new();
    for info in batch.outputs() {
        let out = batch.output(&info.name).unwrap();
        bytes.extend_from_slice(out.bytes());
        if let Some(lengths) = out.lengths() {
            lengths
                .iter()
                .for_each(|l| bytes.extend_from_slice(&l.to_le_bytes()));
        }
    }
    BatchBytes {
        index: batch.index(),
        ids: batch.sample_ids().to_vec(),
        bytes,
    }
}

/// Every batch of epoch `epoch`.
fn whole_epoch(loader: &mut Loader, epoch: u64) -> Vec<BatchBytes> {
    loader.set_next_epoch(epoch);
    loader.iter().map(|b| bytes_of(&b.unwrap())).collect()
}

/// The first `stop` batches of epoch `epoch`, and the state after them (through JSON).
fn stop_after(loader: &mut Loader, epoch: u64, stop: usize) -> (Vec<BatchBytes>, LoaderState) {
    loader.set_next_epoch(epoch);
    let mut it = loader.iter();
    let mut taken = Vec::new();
    for _ in 0..stop {
        taken.push(bytes_of(&it.next().unwrap().unwrap()));
    }
    let state = it.state();
    let json = state.to_json();
    let back = LoaderState::from_json(&json).unwrap();
    assert_eq!(back, state, "JSON round trip");
    (taken, back)
}

/// The resumed loader's first epoch (the rest of the state's epoch).
fn resumed(b: LoaderBuilder, state: LoaderState) -> (Loader, Vec<BatchBytes>) {
    let mut loader = b.resume(state).build().unwrap();
    let batches = loader.iter().map(|b| bytes_of(&b.unwrap())).collect();
    (loader, batches)
}

/// The traversal's view of the epoch as the old world ran it.
fn elastic_epoch_spec(kind: OrderKind, old_world: Option<usize>) -> OrderSpec {
    OrderSpec {
        kind,
        seed: SEED,
        distributed: old_world.map(|w| Distributed::new(w, 0).unwrap()),
        buffer_pages: default_buffer_pages(BATCH),
    }
}

fn page_map() -> SamplePages {
    let reader = ffcv::format::Reader::open(dataset()).unwrap();
    let map = reader.page_map();
    SamplePages::from_fn(reader.num_samples(), |s| {
        map.pages_of_sample(s).first().copied()
    })
}

/// Runs one case; returns nothing, asserts everything.
#[allow(clippy::too_many_arguments)]
fn check_case(
    kind: OrderKind,
    old_world: Option<usize>,
    new_world: Option<usize>,
    drop_last: bool,
    first: Knobs,
    second: Knobs,
    stop_at: f64,
) {
    let ranks = |w: Option<usize>| -> Vec<Option<(usize, usize)>> {
        match w {
            None => vec![None],
            Some(w) => (0..w).map(|r| Some((w, r))).collect(),
        }
    };
    let old: Vec<_> = ranks(old_world);
    let mut old_loaders: Vec<Loader> = old
        .iter()
        .map(|&w| {
            builder(kind, w, drop_last, first)
                .seed(SEED)
                .build()
                .unwrap()
        })
        .collect();
    let per_rank = old_loaders[0].len();
    let stop = ((per_rank as f64) * stop_at).round() as usize;
    // Lockstep: every old rank consumed `stop` batches; the last rank's state is saved.
    let mut consumed: Vec<Vec<BatchBytes>> = Vec::new();
    let mut state = None;
    for loader in &mut old_loaders {
        let (taken, s) = stop_after(loader, EPOCH, stop);
        consumed.push(taken);
        state = Some(s);
    }
    let state = state.unwrap();
    if stop == per_rank {
        assert_eq!(
            state.epoch(),
            EPOCH + 1,
            "after the last batch: the next epoch"
        );
    } else {
        assert_eq!(
            state.batches_consumed(),
            vec![stop as u64; old.len()].as_slice()
        );
    }

    let new: Vec<_> = ranks(new_world);
    if old.len() == new.len() {
        // Same world size (one process may switch distributed mode on or off): every
        // rank's remaining batches are the uninterrupted run's.
        for (r, (&w_old, &w_new)) in old.iter().zip(&new).enumerate() {
            let mut plain = builder(kind, w_old, drop_last, first)
                .seed(SEED)
                .build()
                .unwrap();
            let uninterrupted = whole_epoch(&mut plain, EPOCH);
            assert_eq!(
                consumed[r],
                uninterrupted[..stop],
                "rank {r}: the first batches"
            );
            let (mut loader, rest) =
                resumed(builder(kind, w_new, drop_last, second), state.clone());
            let mut plain_new = builder(kind, w_new, drop_last, first)
                .seed(SEED)
                .build()
                .unwrap();
            if stop == per_rank {
                assert_eq!(
                    rest,
                    whole_epoch(&mut plain_new, EPOCH + 1),
                    "rank {r}: next epoch"
                );
            } else {
                assert_eq!(rest, uninterrupted[stop..], "rank {r}: resumed batches");
                // The epoch after is the ordinary one.
                let next: Vec<BatchBytes> = loader.iter().map(|b| bytes_of(&b.unwrap())).collect();
                assert_eq!(
                    next,
                    whole_epoch(&mut plain_new, EPOCH + 1),
                    "rank {r}: next epoch"
                );
            }
        }
        return;
    }

    // Another world: the samples no old rank consumed are split among the new ranks.
    let indices: Vec<u64> = (0..SAMPLES).collect();
    let pages = page_map();
    let spec = elastic_epoch_spec(kind, old_world);
    let epoch = ElasticEpoch {
        spec: &spec,
        indices: &indices,
        pages: Some(&pages),
        epoch: EPOCH,
    };
    let mut delivered: Vec<u64> = Vec::new();
    for (r, batches) in consumed.iter().enumerate() {
        let own = epoch.first_share(r).unwrap().own;
        let ids: Vec<u64> = batches.iter().flat_map(|b| b.ids.clone()).collect();
        delivered.extend(ids.iter().take(own));
    }
    if stop == per_rank {
        // The old ranks finished the epoch: the state is the next epoch's start.
        return;
    }
    let pool: Pool = epoch
        .pool_after(&[Stint {
            world_size: old.len(),
            consumed: stop * BATCH,
        }])
        .unwrap();
    let mut lengths = Vec::new();
    for (r, &w) in new.iter().enumerate() {
        let (mut loader, rest) = resumed(builder(kind, w, drop_last, second), state.clone());
        let share = pool.share(new.len(), r, Some(&pages)).unwrap();
        let ids: Vec<u64> = rest.iter().flat_map(|b| b.ids.clone()).collect();
        // The loader delivers the traversal's share, cut into batches.
        let expected_len = if drop_last {
            share.order.len() / BATCH * BATCH
        } else {
            share.order.len()
        };
        assert_eq!(ids, share.order[..expected_len], "new rank {r}");
        lengths.push(rest.len());
        delivered.extend(ids.iter().take(share.own));
        // Later epochs are the ordinary ones of the new world.
        let mut plain = builder(kind, w, drop_last, second)
            .seed(SEED)
            .build()
            .unwrap();
        let next: Vec<BatchBytes> = loader.iter().map(|b| bytes_of(&b.unwrap())).collect();
        assert_eq!(
            next,
            whole_epoch(&mut plain, EPOCH + 1),
            "new rank {r}: next epoch"
        );
    }
    assert!(
        lengths.iter().all(|&l| l == lengths[0]),
        "lockstep: {lengths:?}"
    );
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for id in delivered {
        *counts.entry(id).or_default() += 1;
    }
    assert!(counts.values().all(|&c| c == 1), "a sample came twice");
    if drop_last {
        // Only the new ranks' dropped partial batches are missing.
        assert!(counts.len() as u64 + (new.len() * (BATCH - 1)) as u64 >= SAMPLES);
    } else {
        assert_eq!(
            counts.len() as u64,
            SAMPLES,
            "every sample of the epoch came"
        );
    }
}

fn kind_of(k: u8) -> OrderKind {
    match k % 3 {
        0 => OrderKind::Sequential,
        1 => OrderKind::Random,
        _ => OrderKind::QuasiRandom,
    }
}

fn world_of(w: usize) -> Option<usize> {
    // 0 stands for one process without distributed mode.
    (w > 0).then_some(w)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn resumed_epochs_match_the_uninterrupted_run_or_deliver_each_sample_once(
        kind in 0u8..3,
        old_world in 0usize..5,
        new_world in 0usize..5,
        same_world in any::<bool>(),
        drop_last in any::<bool>(),
        caches in (any::<bool>(), any::<bool>()),
        workers in (1i64..4, 1i64..4),
        ahead in (1usize..4, 1usize..4),
        compile in any::<bool>(),
        stop in prop_oneof![Just(0.0), Just(1.0), 0.0f64..1.0],
    ) {
        let old = world_of(old_world);
        let new = if same_world { old } else { world_of(new_world) };
        let first = Knobs { os_cache: caches.0, workers: workers.0, ahead: ahead.0, compile };
        let second = Knobs { os_cache: caches.1, workers: workers.1, ahead: ahead.1, compile: !compile };
        check_case(kind_of(kind), old, new, drop_last, first, second, stop);
    }
}

const KNOBS: Knobs = Knobs {
    os_cache: true,
    workers: 2,
    ahead: 2,
    compile: false,
};

#[test]
fn stops_at_the_first_middle_last_and_after_the_last_batch_resume_exactly() {
    for kind in [
        OrderKind::Sequential,
        OrderKind::Random,
        OrderKind::QuasiRandom,
    ] {
        for stop in [0.0, 0.5, 17.0 / 18.0, 1.0] {
            check_case(kind, None, None, false, KNOBS, KNOBS, stop);
        }
    }
}

#[test]
fn elastic_resumes_four_to_three_and_two_to_five() {
    for kind in [
        OrderKind::Sequential,
        OrderKind::Random,
        OrderKind::QuasiRandom,
    ] {
        check_case(kind, Some(4), Some(3), false, KNOBS, KNOBS, 0.4);
        check_case(kind, Some(2), Some(5), true, KNOBS, KNOBS, 0.7);
    }
}

#[test]
fn a_chain_of_resumes_with_three_world_sizes_delivers_each_sample_once() {
    // 2 ranks run 3 batches, 3 ranks run 2 batches more, then 1 process finishes.
    let kind = OrderKind::QuasiRandom;
    let mut delivered = Vec::new();
    let mut state = None;
    for r in 0..2 {
        let mut l = builder(kind, Some((2, r)), false, KNOBS)
            .seed(SEED)
            .build()
            .unwrap();
        let (taken, s) = stop_after(&mut l, EPOCH, 3);
        delivered.push(taken);
        state = Some(s);
    }
    let mut next_state = None;
    for r in 0..3 {
        let b = builder(kind, Some((3, r)), false, KNOBS).resume(state.clone().unwrap());
        let mut l = b.build().unwrap();
        let mut it = l.iter();
        let mut taken = Vec::new();
        for _ in 0..2 {
            taken.push(bytes_of(&it.next().unwrap().unwrap()));
        }
        next_state = Some(LoaderState::from_json(&it.state().to_json()).unwrap());
        delivered.push(taken);
    }
    let next_state = next_state.unwrap();
    assert_eq!(next_state.stint_world_sizes(), vec![2, 3]);
    let (_, rest) = resumed(builder(kind, None, false, KNOBS), next_state);
    // No stint ran into its padding (each stops before its end, and the last has one
    // rank), so every sample comes exactly once.
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for b in delivered.iter().flatten().chain(rest.iter()) {
        for &id in &b.ids {
            *counts.entry(id).or_default() += 1;
        }
    }
    assert_eq!(counts.len() as u64, SAMPLES);
    assert!(counts.values().all(|&c| c == 1), "{counts:?}");
}

/// `state` as format 1 wrote it: the version 1, without format 3's `indices.hash64`.
fn as_format_1(state: &LoaderState) -> LoaderState {
    let mut value: serde_json::Value = serde_json::from_str(&state.to_json()).unwrap();
    value["format_version"] = 1.into();
    let indices = value["indices"].as_object_mut().unwrap();
    assert!(indices.remove("hash64").is_some());
    let old = LoaderState::from_json(&value.to_string()).unwrap();
    assert_eq!(old.format_version(), 1);
    old
}

#[test]
fn format_1_states_resume_exactly_unless_they_consumed_an_old_quasi_random_dealing() {
    let path = dataset().display().to_string();
    // Mid-epoch, distributed QuasiRandom: refused, with the same or another world size.
    let mut a = builder(OrderKind::QuasiRandom, Some((2, 0)), true, KNOBS)
        .seed(SEED)
        .build()
        .unwrap();
    let (_, state) = stop_after(&mut a, EPOCH, 2);
    let expected = format!(
        "{path}: cannot resume from this loader state: the state was saved by an older ffcv \
         (state format 1), whose distributed QuasiRandom dealt whole pages to the ranks; \
         this build deals shares within one sample of each other, so the rest of epoch 1 \
         cannot be computed again. Finish the epoch with the build that saved the state, or \
         resume from a state taken between epochs"
    );
    for world in [Some((2, 1)), Some((3, 0)), None] {
        let b = builder(OrderKind::QuasiRandom, world, true, KNOBS);
        assert_eq!(refusal(b, as_format_1(&state)), expected, "{world:?}");
    }
    // The same state between epochs resumes: the epoch has not consumed a dealing.
    let between = as_format_1(&a.state());
    let loader = builder(OrderKind::QuasiRandom, Some((2, 0)), true, KNOBS)
        .resume(between)
        .build()
        .unwrap();
    assert_eq!(loader.next_epoch(), EPOCH + 1);

    // Mid-epoch Random (distributed) and one-process QuasiRandom: exact, as format 2.
    for (kind, world) in [
        (OrderKind::Random, Some((2, 1))),
        (OrderKind::QuasiRandom, None),
    ] {
        let mut a = builder(kind, world, true, KNOBS)
            .seed(SEED)
            .build()
            .unwrap();
        let full = whole_epoch(&mut a, EPOCH);
        let (_, state) = stop_after(&mut a, EPOCH, 3);
        let (b, rest) = resumed(builder(kind, world, true, KNOBS), as_format_1(&state));
        assert_eq!(rest, full[3..], "{kind:?}");
        // The resumed loader's states are written in this build's format.
        assert_eq!(b.state().format_version(), ffcv::STATE_FORMAT_VERSION);
    }
}

#[test]
fn state_counts_the_batches_the_consumer_received_not_those_prepared_ahead() {
    let mut loader = builder(OrderKind::Random, None, true, Knobs { ahead: 3, ..KNOBS })
        .seed(SEED)
        .build()
        .unwrap();
    assert_eq!(loader.state().epoch(), 0);
    assert!(loader.state().batches_consumed().is_empty());
    let mut it = loader.iter();
    assert_eq!(it.state().batches_consumed(), &[0]);
    let held: Vec<_> = (0..2).map(|_| it.next().unwrap().unwrap()).collect();
    // The producer may be ahead; the state counts what was received.
    assert_eq!(it.state().batches_consumed(), &[2]);
    assert_eq!(it.state().epoch(), 0);
    drop(held);
    drop(it);
    assert_eq!(
        loader.state().epoch(),
        1,
        "between epochs: the next one's start"
    );
}

#[test]
fn a_state_resumes_with_other_workers_cache_batches_ahead_and_compile_switch() {
    let mut a = builder(OrderKind::QuasiRandom, None, true, KNOBS)
        .seed(SEED)
        .build()
        .unwrap();
    let full = whole_epoch(&mut a, EPOCH);
    let (_, state) = stop_after(&mut a, EPOCH, 5);
    let other = Knobs {
        os_cache: false,
        workers: 3,
        ahead: 1,
        compile: true,
    };
    let (_, rest) = resumed(builder(OrderKind::QuasiRandom, None, true, other), state);
    assert_eq!(rest, full[5..]);
    assert_eq!(
        rest[0].index, 5,
        "resumed batches keep their index in the epoch"
    );
}

#[test]
fn other_pipelines_only_warn() {
    let mut a = builder(OrderKind::Random, None, true, KNOBS)
        .seed(SEED)
        .build()
        .unwrap();
    let (_, state) = stop_after(&mut a, EPOCH, 4);
    let b = builder(OrderKind::Random, None, true, KNOBS).disable("blob");
    let mut loader = b.resume(state).build().unwrap();
    let ids: Vec<u64> = loader
        .iter()
        .flat_map(|b| b.unwrap().sample_ids().to_vec())
        .collect();
    let plain = builder(OrderKind::Random, None, true, KNOBS)
        .seed(SEED)
        .build()
        .unwrap();
    let expected: Vec<u64> =
        plain.order(EPOCH)[4 * BATCH..SAMPLES as usize / BATCH * BATCH].to_vec();
    assert_eq!(ids, expected);
}

fn saved_state() -> LoaderState {
    let mut a = builder(OrderKind::Random, Some((2, 1)), true, KNOBS)
        .seed(SEED)
        .build()
        .unwrap();
    stop_after(&mut a, EPOCH, 3).1
}

fn refusal(b: LoaderBuilder, state: LoaderState) -> String {
    b.resume(state).build().unwrap_err().to_string()
}

fn edited(state: &LoaderState, from: &str, to: &str) -> String {
    let json = state.to_json();
    assert!(json.contains(from), "{from} not in {json}");
    json.replacen(from, to, 1)
}

#[test]
fn a_state_that_does_not_fit_is_refused_with_a_clear_error() {
    let state = saved_state();
    let dist = |kind| builder(kind, Some((2, 0)), true, KNOBS);
    let path = dataset().display().to_string();

    // Another file (same layout, other contents).
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.beton");
    write_dataset(&other, SAMPLES + 1, 3);
    let err = Loader::builder(&other)
        .batch_size(BATCH)
        .order(Order::Random)
        .distributed(true)
        .world_size(2)
        .disable("image")
        .resume(state.clone())
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!(
            "{}: cannot resume from this loader state: the state is from another file (",
            other.display()
        )),
        "{err}"
    );

    let prefix = format!("{path}: cannot resume from this loader state: ");
    assert_eq!(
        refusal(dist(OrderKind::QuasiRandom), state.clone()),
        format!(
            "{prefix}the state was saved with order random, this loader uses order quasi-random"
        )
    );
    assert_eq!(
        refusal(dist(OrderKind::Random).batch_size(16), state.clone()),
        format!("{prefix}the state was saved with batch size 8, this loader uses 16")
    );
    assert_eq!(
        refusal(dist(OrderKind::Random).seed(12), state.clone()),
        format!(
            "{prefix}the state was saved with seed 11, this loader uses seed 12 (leave the \
             seed unset to take the state's)"
        )
    );
    assert_eq!(
        refusal(dist(OrderKind::Random).drop_last(false), state.clone()),
        format!("{prefix}the state was saved with drop_last true, this loader uses false")
    );
    let hundred: Vec<u64> = (0..100).collect();
    let err = refusal(
        dist(OrderKind::Random).indices(hundred.clone()),
        state.clone(),
    );
    let all: Vec<u64> = (0..SAMPLES).collect();
    assert_eq!(
        err,
        format!(
            "{prefix}the state was saved over another index set (150 ids, hash {:016x}); this \
             loader's current set has 100 ids, hash {:016x} (build it with the set in use when \
             the state was saved: the builder's indices, or the last set_indices before the \
             state)",
            ffcv::indices_hash(&all),
            ffcv::indices_hash(&hundred)
        )
    );

    // Corrupt, truncated, newer, not in lockstep, beyond the epoch.
    let json = state.to_json();
    let truncated = LoaderState::from_json(&json[..json.len() / 2])
        .unwrap_err()
        .to_string();
    assert!(
        truncated
            .starts_with("loader state: not a loader state: the JSON is corrupt or truncated ("),
        "{truncated}"
    );
    let corrupt = LoaderState::from_json("{\"format_version\": 1, \"seed\": \"x\"}")
        .unwrap_err()
        .to_string();
    assert!(
        corrupt.starts_with("loader state: not a loader state of format 1: "),
        "{corrupt}"
    );
    let newer = LoaderState::from_json(&edited(
        &state,
        "\"format_version\": 3",
        "\"format_version\": 4",
    ))
    .unwrap_err()
    .to_string();
    assert_eq!(
        newer,
        "loader state: format version 4 was written by a newer ffcv; this build reads versions up to 3"
    );
    let skewed = edited(
        &state,
        "\"batches_consumed\": [\n        3,\n        3\n      ]",
        "\"batches_consumed\": [3, 4]",
    );
    assert_eq!(
        LoaderState::from_json(&skewed).unwrap_err().to_string(),
        "loader state: stint 0: the ranks consumed different numbers of batches [3, 4]; ranks \
         of a distributed job consume in lockstep"
    );
    let beyond = edited(
        &state,
        "\"batches_consumed\": [\n        3,\n        3\n      ]",
        "\"batches_consumed\": [99, 99]",
    );
    assert_eq!(
        refusal(
            dist(OrderKind::Random),
            LoaderState::from_json(&beyond).unwrap()
        ),
        format!(
            "{prefix}the state says each rank consumed 99 batches of epoch 1, which has only 9"
        )
    );
    // The same refusal in an elastic resume names the stint.
    assert_eq!(
        refusal(
            builder(OrderKind::Random, Some((3, 0)), true, KNOBS),
            LoaderState::from_json(&beyond).unwrap()
        ),
        format!(
            "{prefix}the state says each rank consumed 99 batches in stint 0 of epoch 1, \
             which had only 9"
        )
    );
    // A state that fits is accepted, and its seed is taken when none is given.
    let loader = dist(OrderKind::Random).resume(state).build().unwrap();
    assert_eq!(loader.seed(), SEED);
    assert_eq!(loader.next_epoch(), EPOCH);
}
