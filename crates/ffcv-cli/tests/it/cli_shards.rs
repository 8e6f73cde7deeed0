//! The read commands over several FILE arguments or a pattern (shards read as one
//! dataset): `inspect` counts every shard's samples, `order` and `dump` run over global
//! ids, `bench` runs the whole set; a pattern matching nothing and shards with other
//! fields exit 1 naming them.

use crate::support;

use std::path::{Path, PathBuf};

use support::{ffcv, fixture, u64s};

/// Copies of the `scalars` fixture (100 samples) as `dir/part-{0,1,2}.beton`.
fn three_shards(dir: &Path) -> Vec<PathBuf> {
    (0..3)
        .map(|i| {
            let p = dir.join(format!("part-{i}.beton"));
            std::fs::copy(fixture("scalars"), &p).unwrap();
            p
        })
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn inspect_counts_the_samples_of_every_file_or_match() {
    let dir = tempfile::tempdir().unwrap();
    let parts = three_shards(dir.path());
    let listed = ffcv([
        "inspect",
        s(&parts[0]),
        s(&parts[1]),
        s(&parts[2]),
        "--json",
    ])
    .json();
    assert_eq!(listed["num_samples"], 300);
    let pattern = format!("{}/part-*.beton", dir.path().display());
    let matched = ffcv(["inspect", &pattern, "--json"]).json();
    assert_eq!(matched["num_samples"], 300);
    assert_eq!(matched["fields"], listed["fields"]);
}

#[test]
fn order_and_dump_run_over_global_ids() {
    let dir = tempfile::tempdir().unwrap();
    let parts = three_shards(dir.path());
    let pattern = format!("{}/part-*.beton", dir.path().display());
    let ids = u64s(&ffcv(["order", &pattern]).json());
    assert_eq!(ids, (0..300).collect::<Vec<u64>>());
    // Sample 250 of the set is sample 50 of the third copy.
    let one = ffcv(["dump", s(&parts[0]), "--start", "50", "--count", "1"]);
    let set = ffcv(["dump", &pattern, "--start", "250", "--count", "1"]);
    assert_eq!(set.code, Some(0), "{}", set.stderr);
    let strip = |run: &support::Run| {
        let mut v: serde_json::Value = run.json_lines().remove(0);
        v.as_object_mut().unwrap().remove("sample");
        v
    };
    assert_eq!(strip(&set), strip(&one));
}

#[test]
fn bench_reads_every_shard() {
    let dir = tempfile::tempdir().unwrap();
    let parts = three_shards(dir.path());
    let run = ffcv([
        "bench",
        s(&parts[0]),
        s(&parts[1]),
        s(&parts[2]),
        "--batch-size",
        "16",
        "--num-workers",
        "1",
        "--epochs",
        "1",
        "--warmup",
        "0",
        "--json",
    ]);
    // 300 samples, batch 16, drop_last: 288 per epoch.
    assert_eq!(run.json()["samples_per_epoch"], 288);
}

#[test]
fn a_pattern_without_matches_and_mismatched_shards_exit_1_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let none = format!("{}/nothing-*.beton", dir.path().display());
    ffcv(["inspect", &none]).assert_runtime_error("matches no file");
    let parts = three_shards(dir.path());
    let other = fixture("json");
    let run = ffcv(["order", s(&parts[0]), s(&other)]);
    run.assert_runtime_error(s(&other));
    assert!(run.stderr.contains(s(&parts[0])), "{}", run.stderr);
}
