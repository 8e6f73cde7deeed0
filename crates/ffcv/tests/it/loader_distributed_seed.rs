//! Distributed loaders built without a seed, one per process as `torchrun` starts them,
//! still agree on the epoch's global order: together the ranks cover the dataset exactly
//! once, for every order. (A seed drawn per process would make QuasiRandom and Random
//! ranks overlap and miss samples.)
//!
//! The parent test writes the file and starts this same test binary once per rank; the
//! child entry point is the ignored test `rank_process`, which prints its ids.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, from_fn};
use ffcv::{Loader, Order};

/// Divisible by every world size below, so PyTorch's padding adds nothing.
const N: u64 = 240;
const BATCH: usize = 8;
const EPOCHS: usize = 2;

fn order_named(name: &str) -> Order {
    match name {
        "sequential" => Order::Sequential,
        "random" => Order::Random,
        "quasi-random" => Order::QuasiRandom,
        other => panic!("unknown order {other}"),
    }
}

/// The child: builds a distributed loader with no seed from the environment and prints one
/// `EPOCH e: id id ...` line per epoch.
#[test]
#[ignore = "entry point of the processes started by every_order_covers_the_file_once_across_processes"]
fn rank_process() {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} not set"));
    let path = var("FFCV_TEST_FILE");
    let rank: usize = var("FFCV_TEST_RANK").parse().unwrap();
    let world: usize = var("FFCV_TEST_WORLD").parse().unwrap();
    let mut loader = Loader::builder(&path)
        .batch_size(BATCH)
        .order(order_named(&var("FFCV_TEST_ORDER")))
        .os_cache(false)
        .num_workers(1)
        .drop_last(false)
        .distributed(true)
        .world_size(world)
        .rank(rank)
        .build()
        .unwrap();
    for epoch in 0..EPOCHS {
        let mut ids = Vec::new();
        for batch in loader.iter() {
            let batch = batch.unwrap();
            let index = batch.get::<i64>("index").unwrap();
            for (row, &sample) in batch.sample_ids().iter().enumerate() {
                assert_eq!(index[row], sample as i64);
                assert_eq!(batch.output("blob").unwrap().value(row)[0], sample as u8);
            }
            ids.extend_from_slice(batch.sample_ids());
        }
        let text: Vec<String> = ids.iter().map(u64::to_string).collect();
        println!("EPOCH {epoch}: {}", text.join(" "));
    }
}

/// Runs one rank in a fresh process and returns its ids per epoch.
fn run_rank(path: &str, order: &str, rank: usize, world: usize) -> Vec<Vec<u64>> {
    // libtest names the child test by its path in the binary, without the crate's name.
    let child = module_path!()
        .split_once("::")
        .map_or("", |(_, m)| m)
        .to_owned()
        + "::rank_process";
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", &child, "--nocapture"])
        .args(["--test-threads", "1"])
        .env("FFCV_TEST_FILE", path)
        .env("FFCV_TEST_ORDER", order)
        .env("FFCV_TEST_RANK", rank.to_string())
        .env("FFCV_TEST_WORLD", world.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{order} rank {rank}/{world} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let epochs: Vec<Vec<u64>> = stdout
        .lines()
        // The harness may print "test rank_process ... " before the first line.
        .filter_map(|l| l.find("EPOCH ").map(|at| &l[at + "EPOCH ".len()..]))
        .map(|l| {
            let (_, ids) = l.split_once(": ").unwrap_or((l, ""));
            ids.split_whitespace().map(|t| t.parse().unwrap()).collect()
        })
        .collect();
    assert_eq!(epochs.len(), EPOCHS, "{order} rank {rank}: {stdout}");
    epochs
}

/// An `index` and a 200 KiB `blob` per sample: 24 pages of FFCV's smallest size (2 MiB),
/// so that every QuasiRandom rank walks pages of its own (and cuts a few).
fn write_many_pages(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("ranks.beton");
    let fields = vec![
        FieldSpec::new("index", FieldType::Int),
        FieldSpec::new("blob", FieldType::Bytes),
    ];
    DatasetWriter::new(&path, fields)
        .unwrap()
        .with_page_size(1 << 21)
        .unwrap()
        .write(&from_fn(N, |i| {
            Ok(vec![
                FieldValue::Int(i as i64),
                FieldValue::Bytes(vec![i as u8; 200 << 10]),
            ])
        }))
        .unwrap();
    path
}

#[test]
fn every_order_covers_the_file_once_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_many_pages(dir.path());
    let path = path.to_str().unwrap();
    for order in ["sequential", "random", "quasi-random"] {
        for world in [2, 3] {
            let ranks: Vec<Vec<Vec<u64>>> = (0..world)
                .map(|r| run_rank(path, order, r, world))
                .collect();
            for epoch in 0..EPOCHS {
                // Which rank holds each sample. N is a multiple of the world size, so no
                // order pads: each rank holds N / world samples, none twice.
                let mut owner: BTreeMap<u64, usize> = BTreeMap::new();
                for (rank, ids) in ranks.iter().enumerate() {
                    let epoch_ids = &ids[epoch];
                    assert_eq!(epoch_ids.len() as u64, N / world as u64, "{order}");
                    let distinct: BTreeSet<u64> = epoch_ids.iter().copied().collect();
                    assert_eq!(distinct.len(), epoch_ids.len(), "{order}: repeats");
                    for &id in epoch_ids {
                        let first = *owner.entry(id).or_insert(rank);
                        assert_eq!(
                            first, rank,
                            "{order} W={world} epoch {epoch}: sample {id} on ranks {first} and {rank}"
                        );
                    }
                }
                assert_eq!(
                    owner.len() as u64,
                    N,
                    "{order} W={world} epoch {epoch}: every sample on some rank"
                );
            }
        }
    }
}
