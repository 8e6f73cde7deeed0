//! Several `.beton` files read as one dataset (`Loader::builder_shards`): the same samples
//! written once as one file and once as 3 shards give identical batches under Sequential
//! and Random (same seed), every sample exactly once under every order and in distributed
//! mode (each rank's share disjoint, their union everything), over the OS cache and the
//! process cache; a distributed rank reads only the pages holding its samples; shards
//! over HTTP read like local ones; mismatched fields, page sizes and empty patterns are
//! errors naming the files.

use crate::loader_support;
#[cfg(feature = "remote")]
use ffcv_testkit::servers;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, from_fn};
use ffcv::{Dataset, Loader, Order};
use loader_support::{blob, epoch_ids};

const N: u64 = 300;
/// Where the 3 shards split the samples (uneven on purpose).
const SPLITS: [u64; 4] = [0, 97, 230, N];
const PAGE: u64 = 2 << 20;

/// Writes samples `start..end` (ids, blobs of the global ids) to `dir/name.beton`.
fn write_range(dir: &Path, name: &str, start: u64, end: u64, page: u64) -> PathBuf {
    let path = dir.join(format!("{name}.beton"));
    let fields = vec![
        FieldSpec::new("index", FieldType::Int),
        FieldSpec::new("blob", FieldType::Bytes),
    ];
    DatasetWriter::new(&path, fields)
        .unwrap()
        .with_page_size(page)
        .unwrap()
        .with_num_workers(2)
        .write(&from_fn(end - start, |i| {
            let id = start + i;
            Ok(vec![
                FieldValue::Int(id as i64),
                FieldValue::Bytes(blob(id)),
            ])
        }))
        .unwrap();
    path
}

/// The single file and its 3 shards (`part-0`, `part-1`, `part-2`).
fn write_both(dir: &Path) -> (String, Vec<String>) {
    let single = write_range(dir, "single", 0, N, PAGE);
    let shards = (0..3)
        .map(|i| {
            let p = write_range(dir, &format!("part-{i}"), SPLITS[i], SPLITS[i + 1], PAGE);
            p.to_string_lossy().into_owned()
        })
        .collect();
    (single.to_string_lossy().into_owned(), shards)
}

type Snapshot = (Vec<u64>, Vec<i64>, Vec<u8>);

fn snapshots(loader: &mut Loader) -> Vec<Snapshot> {
    loader
        .iter()
        .map(|b| {
            let b = b.unwrap();
            (
                b.sample_ids().to_vec(),
                b.get::<i64>("index").unwrap().to_vec(),
                b.output("blob").unwrap().bytes().to_vec(),
            )
        })
        .collect()
}

fn build(b: ffcv::LoaderBuilder, order: Order, os_cache: bool) -> Loader {
    b.batch_size(16)
        .drop_last(false)
        .num_workers(2)
        .order(order)
        .seed(11)
        .os_cache(os_cache)
        .build()
        .unwrap()
}

#[test]
fn shards_give_the_single_files_batches_under_sequential_and_random() {
    let dir = tempfile::tempdir().unwrap();
    let (single, shards) = write_both(dir.path());
    for order in [Order::Sequential, Order::Random] {
        for os_cache in [true, false] {
            let mut one = build(Loader::builder(&single), order.clone(), os_cache);
            let mut set = build(Loader::builder_shards(&shards), order.clone(), os_cache);
            assert_eq!(set.len(), one.len());
            for e in 0..2 {
                let want = snapshots(&mut one);
                assert!(
                    snapshots(&mut set) == want,
                    "{order:?} os_cache={os_cache} epoch {e}: shards differ from the single file"
                );
            }
            // Local shards are mapped side by side: os_cache = true stays the OS cache,
            // which reads nothing itself.
            assert_eq!(set.stats().storage_bytes_read == 0, os_cache);
        }
    }
}

#[test]
fn every_order_delivers_each_sample_of_the_shards_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_, shards) = write_both(dir.path());
    for order in [Order::Sequential, Order::Random, Order::QuasiRandom] {
        for os_cache in [true, false] {
            let mut set = build(Loader::builder_shards(&shards), order.clone(), os_cache);
            for e in 0..2 {
                let ids = epoch_ids(&mut set);
                let mut sorted = ids.clone();
                sorted.sort_unstable();
                assert_eq!(
                    sorted,
                    (0..N).collect::<Vec<_>>(),
                    "{order:?} os_cache={os_cache} epoch {e}"
                );
                if matches!(order, Order::QuasiRandom) {
                    // Pages from every shard early in the epoch, not shard after shard.
                    let first_third: BTreeSet<usize> = ids[..N as usize / 3]
                        .iter()
                        .map(|&i| SPLITS.iter().rposition(|&s| s <= i).unwrap())
                        .collect();
                    assert_eq!(first_third.len(), 3, "epoch {e}: {first_third:?}");
                }
            }
        }
    }
}

#[test]
fn distributed_ranks_split_the_shards_exactly_as_the_single_file() {
    let dir = tempfile::tempdir().unwrap();
    let (single, shards) = write_both(dir.path());
    for order in [Order::Sequential, Order::Random, Order::QuasiRandom] {
        for world in [2, 3] {
            let mut shares: Vec<BTreeSet<u64>> = Vec::new();
            let mut lens = BTreeSet::new();
            for rank in 0..world {
                let dist =
                    |b: ffcv::LoaderBuilder| b.distributed(true).world_size(world).rank(rank);
                let os_cache = rank % 2 == 0;
                let mut set = build(
                    dist(Loader::builder_shards(&shards)),
                    order.clone(),
                    os_cache,
                );
                let ids = epoch_ids(&mut set);
                if matches!(order, Order::QuasiRandom) {
                    // Whole pages per rank, padded to a common length by repeating the
                    // rank's own order: the same pages make the same shares only in
                    // one file, so compare the shares' union instead.
                    lens.insert(ids.len());
                } else {
                    let mut one = build(dist(Loader::builder(&single)), order.clone(), os_cache);
                    assert_eq!(
                        ids,
                        epoch_ids(&mut one),
                        "{order:?} world {world} rank {rank}"
                    );
                    // 300 samples split evenly by 2 and 3: no padding.
                    assert_eq!(ids.len() as u64, N / world as u64);
                }
                shares.push(ids.into_iter().collect());
            }
            let total: usize = shares.iter().map(BTreeSet::len).sum();
            let union: BTreeSet<u64> = shares.iter().flatten().copied().collect();
            // Distinct samples add up to N and cover everything: no overlap, none missing.
            assert_eq!(total as u64, N, "{order:?} world {world}: shares overlap");
            assert_eq!(union, (0..N).collect(), "{order:?} world {world}");
            assert!(
                lens.len() <= 1,
                "{order:?} world {world}: padded lengths {lens:?}"
            );
        }
    }
}

/// Bytes the process cache reads for `samples`: each page holding one of them, from
/// the page's start to the end of its last allocation.
fn bytes_for(reader: &ffcv::format::Reader, samples: &BTreeSet<u64>) -> u64 {
    let page = reader.page_size();
    let mut pages: std::collections::BTreeMap<u64, u64> = Default::default();
    for r in reader.alloc_rows() {
        let end = pages.entry(r.ptr / page).or_default();
        *end = (*end).max(r.ptr + r.size);
    }
    let wanted: BTreeSet<u64> = reader
        .alloc_rows()
        .filter(|r| samples.contains(&r.sample_id))
        .map(|r| r.ptr / page)
        .collect();
    wanted.iter().map(|p| pages[p] - p * page).sum()
}

#[test]
fn a_distributed_rank_reads_only_the_pages_of_its_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (_, shards) = write_both(dir.path());
    let reader = Dataset::open_shards(&shards).unwrap().reader;
    let all: BTreeSet<u64> = (0..N).collect();
    let everything = bytes_for(&reader, &all);
    let mut covered = BTreeSet::new();
    for rank in 0..3 {
        let mut set = Loader::builder_shards(&shards)
            .batch_size(10)
            .drop_last(false)
            .num_workers(1)
            .order(Order::QuasiRandom)
            .seed(5)
            .os_cache(false)
            .distributed(true)
            .world_size(3)
            .rank(rank)
            .build()
            .unwrap();
        let mine: BTreeSet<u64> = epoch_ids(&mut set).into_iter().collect();
        covered.extend(&mine);
        let want = bytes_for(&reader, &mine);
        assert_eq!(set.stats().storage_bytes_read, want, "rank {rank}");
        assert!(want < everything, "rank {rank} needs every page");
    }
    assert_eq!(covered, all);
}

#[test]
fn a_glob_pattern_names_the_shards_in_sorted_order() {
    let dir = tempfile::tempdir().unwrap();
    let (single, _) = write_both(dir.path());
    let pattern = format!("{}/part-*.beton", dir.path().display());
    let mut one = build(Loader::builder(&single), Order::Random, true);
    let mut set = build(Loader::builder_shards([&pattern]), Order::Random, true);
    assert!(snapshots(&mut set) == snapshots(&mut one));
    let d = Dataset::open_shards([&pattern]).unwrap();
    let names: Vec<String> = d
        .shards
        .iter()
        .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["part-0.beton", "part-1.beton", "part-2.beton"]);
    assert_eq!(d.reader.num_samples(), N);

    let none = format!("{}/nothing-*.beton", dir.path().display());
    let err = Loader::builder_shards([&none])
        .batch_size(4)
        .build()
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&none) && msg.contains("matches no file"),
        "{msg}"
    );
}

#[test]
fn shards_whose_fields_differ_are_an_error_naming_both_files_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_range(dir.path(), "a", 0, 10, PAGE);
    let b = dir.path().join("b.beton");
    DatasetWriter::new(
        &b,
        vec![
            FieldSpec::new("index", FieldType::Int),
            FieldSpec::new("blob", FieldType::Json),
        ],
    )
    .unwrap()
    .with_page_size(PAGE)
    .unwrap()
    .write(&from_fn(3, |i| {
        Ok(vec![
            FieldValue::Int(i as i64),
            FieldValue::Json(ffcv::format::JsonValue::Int(i128::from(i))),
        ])
    }))
    .unwrap();
    let err = Dataset::open_shards([&a, &b].map(|p| p.to_string_lossy().into_owned()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&a.display().to_string())
            && err.contains(&b.display().to_string())
            && err.contains("field \"blob\""),
        "{err}"
    );

    let c = write_range(dir.path(), "c", 10, 20, PAGE * 2);
    let err = Dataset::open_shards([&a, &c].map(|p| p.to_string_lossy().into_owned()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("page size") && err.contains(&c.display().to_string()),
        "{err}"
    );

    // A damaged shard is refused as it would be alone, naming it.
    let bad = dir.path().join("bad.beton");
    std::fs::write(&bad, b"not a beton file at all, just text").unwrap();
    let err = Dataset::open_shards([&a, &bad].map(|p| p.to_string_lossy().into_owned()))
        .unwrap_err()
        .to_string();
    assert!(err.contains(&bad.display().to_string()), "{err}");
}

#[cfg(feature = "remote")]
#[test]
fn shards_over_http_and_mixed_with_local_files_read_like_the_single_file() {
    let dir = tempfile::tempdir().unwrap();
    let (single, shards) = write_both(dir.path());
    let servers: Vec<servers::HttpFileServer> = shards
        .iter()
        .enumerate()
        .map(|(i, p)| {
            servers::HttpFileServer::start(&format!("part-{i}.beton"), std::fs::read(p).unwrap())
        })
        .collect();
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let mixed = vec![shards[0].clone(), urls[1].clone(), shards[2].clone()];
    for order in [Order::Sequential, Order::Random] {
        let mut one = build(Loader::builder(&single), order.clone(), true);
        let want = snapshots(&mut one);
        // os_cache = true over remote shards is served by the process cache.
        for names in [&urls, &mixed] {
            let mut set = build(Loader::builder_shards(names), order.clone(), true);
            assert!(snapshots(&mut set) == want, "{order:?} {names:?}");
        }
    }
    let mut q = build(Loader::builder_shards(&urls), Order::QuasiRandom, false);
    let mut ids = epoch_ids(&mut q);
    ids.sort_unstable();
    assert_eq!(ids, (0..N).collect::<Vec<_>>());
}

#[test]
fn a_state_over_shards_resumes_them_and_is_refused_over_other_shards() {
    let dir = tempfile::tempdir().unwrap();
    let (single, shards) = write_both(dir.path());
    let b = |names: &[String]| {
        Loader::builder_shards(names)
            .batch_size(16)
            .drop_last(false)
            .num_workers(1)
            .order(Order::Random)
            .seed(3)
    };
    let mut loader = b(&shards).build().unwrap();
    let mut it = loader.iter();
    let first: Vec<u64> = it.next().unwrap().unwrap().sample_ids().to_vec();
    let state = it.state();
    drop(it);
    // The same shards resume after the batch taken.
    let mut resumed = b(&shards).resume(state.clone()).build().unwrap();
    let rest = epoch_ids(&mut resumed);
    assert_eq!(rest.len() + first.len(), N as usize);
    // Another shard order, or the single file of the same samples, is another dataset.
    let swapped = vec![shards[0].clone(), shards[2].clone(), shards[1].clone()];
    for other in [
        b(&swapped),
        Loader::builder(&single)
            .batch_size(16)
            .drop_last(false)
            .num_workers(1)
            .order(Order::Random)
            .seed(3),
    ] {
        let err = other.resume(state.clone()).build().unwrap_err().to_string();
        assert!(err.contains("the state is from another file"), "{err}");
    }
}

#[cfg(feature = "remote")]
#[test]
fn http_shards_behind_the_disk_cache_read_their_pages_from_disk_the_second_time() {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("pages");
    let (single, shards) = write_both(dir.path());
    let servers: Vec<servers::HttpFileServer> = shards
        .iter()
        .enumerate()
        .map(|(i, p)| {
            servers::HttpFileServer::start(&format!("part-{i}.beton"), std::fs::read(p).unwrap())
        })
        .collect();
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let cached = |names: &[String]| {
        Loader::builder_shards(names)
            .page_cache_dir(&cache_dir)
            .page_cache_size(1 << 30)
    };
    let want = snapshots(&mut build(Loader::builder(&single), Order::Random, true));
    let data_gets = |from: &[usize]| -> usize {
        servers
            .iter()
            .zip(from)
            .map(|(s, &n)| s.seen()[n..].iter().filter(|r| r.method == "GET").count())
            .sum()
    };
    let seen_now = || servers.iter().map(|s| s.seen().len()).collect::<Vec<_>>();
    // Opening reads each shard's structure from its server; count the epochs' reads.
    let mut first = build(cached(&urls), Order::Random, false);
    let before = seen_now();
    assert!(snapshots(&mut first) == want, "first loader's batches");
    assert!(data_gets(&before) > 0, "the first epoch reads the servers");
    drop(first);
    let mut second = build(cached(&urls), Order::Random, false);
    let before = seen_now();
    assert!(snapshots(&mut second) == want, "second loader's batches");
    assert_eq!(data_gets(&before), 0, "every page came from the disk cache");
    // A local shard pins nothing, so a set with one cannot be cached on disk.
    let mixed = vec![shards[0].clone(), urls[1].clone(), urls[2].clone()];
    let Err(err) = cached(&mixed).batch_size(16).os_cache(false).build() else {
        panic!("a set with a local shard behind the disk cache was not refused");
    };
    let text = err.to_string();
    assert!(text.contains("nothing pins its bytes"), "{text}");
}
