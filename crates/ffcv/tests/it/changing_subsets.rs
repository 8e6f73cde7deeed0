//! Index sets that change between epochs (`Loader::set_indices`): a curriculum that grows
//! the subset each epoch yields exactly its current set every epoch, in the order a
//! loader built over that set has, under every order, both caches and world sizes 1, 2
//! and 3; a state saved after a change resumes exactly (the photographs, random crops
//! and flips, byte for byte), with the same world size or another; a resume over another
//! set names both sets' hashes; bad sets are refused and leave the loader as it was;
//! states of the format before the hash still load.

use crate::loader_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ffcv::decode::RandomResizedCropRGBImageDecoder;
use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, RgbImage, from_fn};
use ffcv::traversal::OrderKind;
use ffcv::{Loader, LoaderBuilder, LoaderState, Order, PipelineSpec, indices_hash, transforms};
use loader_support::{epoch_ids, write_blobs};

const N: u64 = 300;
const BATCH: usize = 16;
const SEED: u64 = 7;

const KINDS: [OrderKind; 3] = [
    OrderKind::Sequential,
    OrderKind::Random,
    OrderKind::QuasiRandom,
];

/// The generated blobs (300 samples over several 2 MiB pages), written once.
fn blobs() -> &'static Path {
    static PATH: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &PATH
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let path = write_blobs(dir.path(), "subsets", N);
            (dir, path)
        })
        .1
}

/// A curriculum over `n` samples: a scattered 10 %, then 40 %, then every sample, each
/// set holding the one before (prefixes of a fixed permutation, in its order).
fn curriculum(n: u64) -> Vec<Vec<u64>> {
    // 113 is prime to 300 and to 36, so `i -> 113 i + 17 mod n` is a permutation.
    let perm: Vec<u64> = (0..n).map(|i| (i * 113 + 17) % n).collect();
    [n / 10, n * 4 / 10, n]
        .iter()
        .map(|&k| perm[..k as usize].to_vec())
        .collect()
}

fn counts(ids: &[u64]) -> BTreeMap<u64, usize> {
    let mut m = BTreeMap::new();
    for &i in ids {
        *m.entry(i).or_default() += 1;
    }
    m
}

/// Rank `rank` of `world` (1: one process, not distributed) over the blobs.
fn blob_builder(kind: OrderKind, world: usize, rank: usize, os_cache: bool) -> LoaderBuilder {
    let b = Loader::builder(blobs())
        .batch_size(BATCH)
        .order(Order::from(kind))
        .os_cache(os_cache)
        .num_workers(2)
        .drop_last(false)
        .seed(SEED);
    if world > 1 {
        b.distributed(true).world_size(world).rank(rank)
    } else {
        b
    }
}

#[test]
fn a_growing_curriculum_yields_exactly_the_current_set_every_epoch() {
    let sets = curriculum(N);
    for kind in KINDS {
        for world in [1usize, 2, 3] {
            for os_cache in [true, false] {
                let what = format!("{kind:?} world {world} os_cache={os_cache}");
                let mut loaders: Vec<Loader> = (0..world)
                    .map(|rank| {
                        blob_builder(kind, world, rank, os_cache)
                            .indices(sets[0].clone())
                            .build()
                            .unwrap()
                    })
                    .collect();
                for (epoch, set) in sets.iter().enumerate() {
                    let e = epoch as u64;
                    let mut all = Vec::new();
                    for (rank, loader) in loaders.iter_mut().enumerate() {
                        if epoch > 0 {
                            loader.set_indices(set.clone()).unwrap();
                        }
                        assert_eq!(loader.indices(), &set[..], "{what}");
                        assert_eq!(loader.next_epoch(), e, "{what}");
                        let per_rank = set.len().div_ceil(world);
                        assert_eq!(loader.len(), per_rank.div_ceil(BATCH), "{what} epoch {e}");
                        // The epoch's order is the one of a loader built over the set: the
                        // ranks split the new set as they split the first.
                        let fresh = blob_builder(kind, world, rank, os_cache)
                            .indices(set.clone())
                            .build()
                            .unwrap();
                        let order = loader.order(e);
                        assert_eq!(order, fresh.order(e), "{what} rank {rank} epoch {e}");
                        assert_eq!(order.len(), per_rank, "{what} rank {rank} epoch {e}");
                        let ids = epoch_ids(loader);
                        assert_eq!(ids, order, "{what} rank {rank} epoch {e}: in order");
                        all.extend(ids);
                    }
                    // Together the ranks yield the set, each id once, plus the padding of
                    // DistributedSampler (a multiple of the world size), no more.
                    let c = counts(&all);
                    let wanted: BTreeSet<u64> = set.iter().copied().collect();
                    assert_eq!(
                        c.keys().copied().collect::<BTreeSet<u64>>(),
                        wanted,
                        "{what} epoch {e}: the current set"
                    );
                    let padding = set.len().div_ceil(world) * world - set.len();
                    assert_eq!(all.len(), set.len() + padding, "{what} epoch {e}");
                    if world == 1 {
                        assert!(c.values().all(|&n| n == 1), "{what} epoch {e}: once");
                    }
                }
            }
        }
    }
}

#[test]
fn a_shrinking_set_after_a_growing_one_reads_only_the_new_set() {
    // The process cache keeps its slots across the change; the smaller set's epoch still
    // yields exactly its ids, and growing again afterwards does too.
    let sets = curriculum(N);
    for kind in KINDS {
        let mut loader = blob_builder(kind, 1, 0, false).build().unwrap();
        for set in [&sets[2], &sets[0], &sets[1], &sets[2]] {
            loader.set_indices(set.clone()).unwrap();
            let ids = epoch_ids(&mut loader);
            assert_eq!(ids.len(), set.len(), "{kind:?}");
            let wanted: BTreeSet<u64> = set.iter().copied().collect();
            assert_eq!(ids.iter().copied().collect::<BTreeSet<u64>>(), wanted);
        }
        assert_eq!(loader.stats().epochs, 4);
    }
}

#[test]
fn empty_sets_run_empty_epochs_and_repeated_ids_come_as_often_as_listed() {
    for kind in KINDS {
        for world in [1usize, 2] {
            let mut loader = blob_builder(kind, world, 0, true).build().unwrap();
            loader.set_indices(Vec::new()).unwrap();
            assert_eq!(loader.len(), 0, "{kind:?}");
            assert!(loader.is_empty());
            assert_eq!(epoch_ids(&mut loader), Vec::<u64>::new(), "{kind:?}");
            // The loader is not stuck on the empty set.
            loader.set_indices(vec![5, 9, 5, 5]).unwrap();
            let mut all = epoch_ids(&mut loader);
            if world == 2 {
                let mut other = blob_builder(kind, world, 1, true).build().unwrap();
                other.set_indices(vec![5, 9, 5, 5]).unwrap();
                other.set_next_epoch(1);
                all.extend(epoch_ids(&mut other));
            }
            let c = counts(&all);
            assert_eq!(
                c,
                BTreeMap::from([(5, 3), (9, 1)]),
                "{kind:?} world {world}"
            );
        }
    }
}

#[test]
fn bad_sets_are_refused_and_leave_the_loader_as_it_was() {
    let path = blobs().display().to_string();
    let prefix = format!("{path}: invalid loader configuration: set_indices: ");
    for kind in KINDS {
        let mut loader = blob_builder(kind, 2, 1, true)
            .indices(vec![3, 4, 5])
            .build()
            .unwrap();
        let before = loader.order(0);
        let err = loader
            .set_indices(vec![1, 2, N, 7])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!("{prefix}indices[2] = 300 is out of range: the file has 300 samples")
        );
        assert_eq!(loader.indices(), &[3, 4, 5]);
        assert_eq!(loader.order(0), before);

        // An epoch started without a borrow refuses the change until it is dropped.
        let running = loader.iter_unbound();
        let err = loader.set_indices(vec![1]).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{prefix}an epoch is running; finish or drop its iterator before changing the set"
            )
        );
        drop(running);
        loader.set_indices(vec![1]).unwrap();
        assert_eq!(loader.indices(), &[1]);
    }

    // A custom order decides its samples itself.
    let custom: Arc<dyn ffcv::traversal::TraversalOrder> =
        Arc::new(ffcv::traversal::Sequential::all(10));
    let mut loader = Loader::builder(blobs())
        .batch_size(BATCH)
        .order(Order::Custom(custom))
        .build()
        .unwrap();
    let err = loader.set_indices(vec![1, 2]).unwrap_err().to_string();
    assert_eq!(
        err,
        format!("{prefix}a custom order decides the samples itself; it takes no indices")
    );
    assert_eq!(loader.order(0), (0..10).collect::<Vec<u64>>());
}

// -- Exact resume after a change, on the photographs ---------------------------------------

const PHOTOS: u64 = 36;
const PHOTO_BATCH: usize = 2;

/// The four test photographs, each nine times (the random crops differ per sample).
fn photos() -> &'static Path {
    static PATH: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &PATH
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rgb-image/tests/data/photos");
            let mut images = Vec::new();
            for name in ["astronaut.jpg", "chelsea.jpg", "coffee.jpg", "rocket.jpg"] {
                let bytes = std::fs::read(root.join(name)).unwrap();
                let (width, height) = {
                    let frame = ffcv::image::JpegFrame::find(&bytes).unwrap();
                    (frame.width, frame.height)
                };
                images.push((bytes, width, height));
            }
            let path = dir.path().join("photos.beton");
            let fields = vec![
                FieldSpec::new("index", FieldType::Int),
                FieldSpec::new("image", FieldType::RgbImage),
            ];
            DatasetWriter::new(&path, fields)
                .unwrap()
                .write(&from_fn(PHOTOS, |i| {
                    let (bytes, width, height) = images[i as usize % images.len()].clone();
                    Ok(vec![
                        FieldValue::Int(i as i64),
                        FieldValue::RgbImage(RgbImage::Jpeg {
                            width,
                            height,
                            bytes,
                        }),
                    ])
                }))
                .unwrap();
            (dir, path)
        })
        .1
}

fn photo_builder(kind: OrderKind, world: usize, rank: usize) -> LoaderBuilder {
    let image = PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((16, 16)))
        .then(transforms::random_horizontal_flip(0.5).unwrap());
    let b = Loader::builder(photos())
        .batch_size(PHOTO_BATCH)
        .order(Order::from(kind))
        .num_workers(2)
        .drop_last(false)
        .pipeline("image", image);
    if world > 1 {
        b.distributed(true).world_size(world).rank(rank)
    } else {
        b
    }
}

/// One batch: its index, sample ids and every output's bytes.
type BatchBytes = (usize, Vec<u64>, Vec<u8>);

fn bytes_of(batch: &ffcv::Batch) -> BatchBytes {
    let mut bytes = Vec::new();
    for info in batch.outputs() {
        bytes.extend_from_slice(batch.output(&info.name).unwrap().bytes());
    }
    (batch.index(), batch.sample_ids().to_vec(), bytes)
}

fn whole_epoch(loader: &mut Loader) -> Vec<BatchBytes> {
    loader.iter().map(|b| bytes_of(&b.unwrap())).collect()
}

/// World `world`'s loaders after the curriculum's first epoch, switched to its second set.
fn after_first_epoch(kind: OrderKind, world: usize, sets: &[Vec<u64>]) -> Vec<Loader> {
    (0..world)
        .map(|rank| {
            let mut loader = photo_builder(kind, world, rank)
                .seed(SEED)
                .indices(sets[0].clone())
                .build()
                .unwrap();
            // A state of the first set is taken first, so the change must update it.
            assert_eq!(loader.state().indices_hash(), indices_hash(&sets[0]));
            whole_epoch(&mut loader);
            loader.set_indices(sets[1].clone()).unwrap();
            loader
        })
        .collect()
}

/// Stops every rank after `stop` batches of epoch 1; returns what each consumed and the
/// last rank's state (through JSON).
fn stop_in_epoch_1(loaders: &mut [Loader], stop: usize) -> (Vec<Vec<BatchBytes>>, LoaderState) {
    let mut consumed = Vec::new();
    let mut state = None;
    for loader in loaders.iter_mut() {
        let mut it = loader.iter();
        assert_eq!(it.epoch(), 1);
        consumed.push(
            (0..stop)
                .map(|_| bytes_of(&it.next().unwrap().unwrap()))
                .collect(),
        );
        state = Some(LoaderState::from_json(&it.state().to_json()).unwrap());
    }
    (consumed, state.unwrap())
}

#[test]
fn a_state_saved_after_set_indices_resumes_exactly() {
    let sets = curriculum(PHOTOS);
    for kind in KINDS {
        for world in [1usize, 2, 3] {
            let what = format!("{kind:?} world {world}");
            let mut plain = after_first_epoch(kind, world, &sets);
            let uninterrupted: Vec<Vec<BatchBytes>> = plain.iter_mut().map(whole_epoch).collect();
            let mut stopped = after_first_epoch(kind, world, &sets);
            let (consumed, state) = stop_in_epoch_1(&mut stopped, 1);
            assert_eq!(state.epoch(), 1, "{what}");
            assert_eq!(state.indices_hash(), indices_hash(&sets[1]), "{what}");
            assert_eq!(state.indices_count(), sets[1].len() as u64, "{what}");
            for rank in 0..world {
                assert_eq!(
                    consumed[rank],
                    uninterrupted[rank][..1],
                    "{what} rank {rank}"
                );
                let mut resumed = photo_builder(kind, world, rank)
                    .indices(sets[1].clone())
                    .resume(state.clone())
                    .build()
                    .unwrap();
                let rest = whole_epoch(&mut resumed);
                assert_eq!(
                    rest,
                    uninterrupted[rank][1..],
                    "{what} rank {rank}: the rest"
                );
                // The curriculum goes on: the next set's epoch is the uninterrupted run's.
                resumed.set_indices(sets[2].clone()).unwrap();
                plain[rank].set_indices(sets[2].clone()).unwrap();
                assert_eq!(
                    whole_epoch(&mut resumed),
                    whole_epoch(&mut plain[rank]),
                    "{what} rank {rank}: epoch 2"
                );
            }
        }
    }
}

#[test]
fn a_state_saved_after_set_indices_resumes_with_another_world_size_each_sample_once() {
    let sets = curriculum(PHOTOS);
    for kind in KINDS {
        let mut old = after_first_epoch(kind, 2, &sets);
        let (consumed, state) = stop_in_epoch_1(&mut old, 1);
        let mut delivered: Vec<u64> = consumed
            .iter()
            .flatten()
            .flat_map(|b| b.1.clone())
            .collect();
        let mut lengths = Vec::new();
        for rank in 0..3 {
            let mut loader = photo_builder(kind, 3, rank)
                .indices(sets[1].clone())
                .resume(state.clone())
                .build()
                .unwrap();
            let rest = whole_epoch(&mut loader);
            lengths.push(rest.len());
            delivered.extend(rest.iter().flat_map(|b| b.1.clone()));
        }
        assert!(
            lengths.iter().all(|&l| l == lengths[0]),
            "{kind:?}: lockstep {lengths:?}"
        );
        // The consumed batches held no padding (they stop before the first stint's end), so
        // only the new stint pads, by fewer samples than its world size.
        let c = counts(&delivered);
        let wanted: BTreeSet<u64> = sets[1].iter().copied().collect();
        assert_eq!(
            c.keys().copied().collect::<BTreeSet<u64>>(),
            wanted,
            "{kind:?}"
        );
        assert!(delivered.len() - sets[1].len() < 3, "{kind:?}: {c:?}");
    }
}

#[test]
fn resuming_over_another_set_names_both_hashes() {
    let sets = curriculum(PHOTOS);
    let mut loaders = after_first_epoch(OrderKind::Random, 1, &sets);
    // Between epochs too, the state names the current set.
    assert_eq!(loaders[0].state().indices_hash(), indices_hash(&sets[1]));
    let (_, state) = stop_in_epoch_1(&mut loaders, 1);
    let path = photos().display().to_string();
    for (other, label) in [
        (sets[0].clone(), "the first set"),
        ((0..PHOTOS).collect(), "every sample"),
    ] {
        let err = photo_builder(OrderKind::Random, 1, 0)
            .indices(other.clone())
            .resume(state.clone())
            .build()
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "{path}: cannot resume from this loader state: the state was saved over another \
                 index set ({} ids, hash {:016x}); this loader's current set has {} ids, hash \
                 {:016x} (build it with the set in use when the state was saved: the builder's \
                 indices, or the last set_indices before the state)",
                sets[1].len(),
                indices_hash(&sets[1]),
                other.len(),
                indices_hash(&other)
            ),
            "{label}"
        );
    }
    // The hash is the SHA-256's first 16 hex digits, as the state records both.
    let json: serde_json::Value = serde_json::from_str(&state.to_json()).unwrap();
    let sha = json["indices"]["sha256"].as_str().unwrap();
    assert_eq!(
        json["indices"]["hash64"],
        format!("{:016x}", indices_hash(&sets[1]))
    );
    assert_eq!(&sha[..16], format!("{:016x}", indices_hash(&sets[1])));
    // A set in another order is another set.
    let mut reversed = sets[1].clone();
    reversed.reverse();
    assert_ne!(indices_hash(&reversed), indices_hash(&sets[1]));
}

#[test]
fn a_resumed_position_gives_way_to_a_new_set() {
    let sets = curriculum(PHOTOS);
    let mut loaders = after_first_epoch(OrderKind::QuasiRandom, 1, &sets);
    let (_, state) = stop_in_epoch_1(&mut loaders, 2);
    let mut resumed = photo_builder(OrderKind::QuasiRandom, 1, 0)
        .indices(sets[1].clone())
        .resume(state)
        .build()
        .unwrap();
    // The same set changes nothing: the position stays.
    resumed.set_indices(sets[1].clone()).unwrap();
    assert_eq!(resumed.state().batches_consumed(), &[2]);
    // Another set: epoch 1 runs from its start over the new set.
    resumed.set_indices(sets[2].clone()).unwrap();
    assert!(resumed.state().batches_consumed().is_empty());
    assert_eq!(resumed.state().epoch(), 1);
    let ids: Vec<u64> = whole_epoch(&mut resumed)
        .into_iter()
        .flat_map(|b| b.1)
        .collect();
    assert_eq!(ids, resumed.order(1));
    assert_eq!(ids.len(), PHOTOS as usize);
}

#[test]
fn states_of_the_format_before_the_hash_still_load_and_resume_exactly() {
    let sets = curriculum(PHOTOS);
    let mut plain = after_first_epoch(OrderKind::Random, 1, &sets);
    let uninterrupted = whole_epoch(&mut plain[0]);
    let mut loaders = after_first_epoch(OrderKind::Random, 1, &sets);
    let (_, state) = stop_in_epoch_1(&mut loaders, 3);
    assert_eq!(state.format_version(), 3);

    // Format 2: no `indices.hash64`.
    let mut value: serde_json::Value = serde_json::from_str(&state.to_json()).unwrap();
    value["format_version"] = 2.into();
    value["indices"].as_object_mut().unwrap().remove("hash64");
    let old = LoaderState::from_json(&value.to_string()).unwrap();
    assert_eq!(old.format_version(), 2);
    assert_eq!(
        old.indices_hash(),
        indices_hash(&sets[1]),
        "derived from the SHA-256"
    );
    assert!(
        !old.to_json().contains("hash64"),
        "written back as format 2 wrote it"
    );
    let mut resumed = photo_builder(OrderKind::Random, 1, 0)
        .indices(sets[1].clone())
        .resume(old)
        .build()
        .unwrap();
    assert_eq!(whole_epoch(&mut resumed), uninterrupted[3..]);
    assert_eq!(resumed.state().format_version(), ffcv::STATE_FORMAT_VERSION);

    // Format 3 needs the key, and it must agree with the SHA-256.
    let mut missing: serde_json::Value = serde_json::from_str(&state.to_json()).unwrap();
    missing["indices"].as_object_mut().unwrap().remove("hash64");
    assert_eq!(
        LoaderState::from_json(&missing.to_string())
            .unwrap_err()
            .to_string(),
        "loader state: not a loader state of format 3: missing field `indices.hash64`"
    );
    let mut not_hex: serde_json::Value = serde_json::from_str(&state.to_json()).unwrap();
    not_hex["indices"]["sha256"] = "xyz".into();
    assert_eq!(
        LoaderState::from_json(&not_hex.to_string())
            .unwrap_err()
            .to_string(),
        "loader state: indices.sha256 \"xyz\" is not 64 hex digits"
    );
    let mut wrong: serde_json::Value = serde_json::from_str(&state.to_json()).unwrap();
    wrong["indices"]["hash64"] = "0000000000000000".into();
    let sha = wrong["indices"]["sha256"].as_str().unwrap().to_owned();
    assert_eq!(
        LoaderState::from_json(&wrong.to_string())
            .unwrap_err()
            .to_string(),
        format!(
            "loader state: indices.hash64 0000000000000000 does not match indices.sha256 {sha} \
             (whose first 16 digits it is): the state is corrupt"
        )
    );
}
