//! `--mix NAME:WEIGHT` on `ffcv order` and `ffcv bench`: the order has the weighted
//! counts per source, follows from the seed, splits into disjoint rank shares and stops
//! with `--mix-when-exhausted stop`; bench runs the mixture's epoch; a malformed value,
//! a zero sum of weights, FILE with --mix and `ffcv doctor --mix` exit 2; sources with
//! other fields exit 1 naming the source.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use support::{ffcv, fixture, u64s};

/// Two copies of the `scalars` fixture (100 samples each): global ids 0..100 are `a`,
/// 100..200 are `b`.
fn two_copies(dir: &Path) -> (String, String) {
    let copy = |name: &str| {
        let p: PathBuf = dir.join(format!("{name}.beton"));
        std::fs::copy(fixture("scalars"), &p).unwrap();
        p.to_string_lossy().into_owned()
    };
    (copy("a"), copy("b"))
}

fn order(args: &[&str]) -> Vec<u64> {
    u64s(&ffcv(std::iter::once("order").chain(args.iter().copied())).json())
}

#[test]
fn order_with_mix_draws_the_weighted_counts_deterministically() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_copies(dir.path());
    let (ma, mb) = (format!("{a}:3"), format!("{b}:1"));
    let args = [
        "--mix", &ma, "--mix", &mb, "--order", "random", "--seed", "4",
    ];
    let ids = order(&args);
    assert_eq!(ids.len(), 200);
    assert_eq!(ids.iter().filter(|&&i| i < 100).count(), 150);
    assert_eq!(order(&args), ids, "the same seed gives the same order");
    let other: Vec<&str> = args[..6].iter().copied().chain(["--seed", "5"]).collect();
    assert_ne!(order(&other), ids);
    // Two ranks: every second position each, disjoint, together the epoch.
    let rank = |r: &str| {
        let mut a: Vec<&str> = args.to_vec();
        a.extend(["--world-size", "2", "--rank", r]);
        order(&a)
    };
    let (r0, r1) = (rank("0"), rank("1"));
    let woven: Vec<u64> = r0.iter().zip(&r1).flat_map(|(&x, &y)| [x, y]).collect();
    assert_eq!(woven, ids);
}

#[test]
fn stop_ends_the_epoch_when_a_source_runs_out() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_copies(dir.path());
    let (ma, mb) = (format!("{a}:3"), format!("{b}:1"));
    let ids = order(&[
        "--mix",
        &ma,
        "--mix",
        &mb,
        "--mix-when-exhausted",
        "stop",
        "--order",
        "random",
    ]);
    let unique: BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "no sample repeats");
    assert_eq!(ids.iter().filter(|&&i| i < 100).count(), 100, "a runs out");
    assert!(ids.len() < 200);
}

#[test]
fn bench_runs_the_mixtures_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_copies(dir.path());
    let (ma, mb) = (format!("{a}:0.7"), format!("{b}:0.3"));
    let run = ffcv([
        "bench",
        "--mix",
        &ma,
        "--mix",
        &mb,
        "--mix-samples-per-epoch",
        "100",
        "--order",
        "random",
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
    // 100 positions, batch 16, drop_last: 96 per epoch.
    assert_eq!(run.json()["samples_per_epoch"], 96);
}

fn assert_usage_error(args: &[&str], needle: &str) {
    let run = ffcv(args);
    assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
    assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn malformed_mixes_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_copies(dir.path());
    assert_usage_error(&["order", "--mix", &a], "NAME:WEIGHT");
    let neg = format!("{a}:-1");
    assert_usage_error(&["order", "--mix", &neg], "non-negative");
    let nan = format!("{a}:x");
    assert_usage_error(&["bench", "--mix", &nan], "not a number");
    let (za, zb) = (format!("{a}:0"), format!("{b}:0"));
    assert_usage_error(&["order", "--mix", &za, "--mix", &zb], "sum to 0");
    assert_usage_error(&["bench", "--mix", &za, "--mix", &zb], "sum to 0");
    let one = format!("{a}:1");
    assert_usage_error(&["bench", &b, "--mix", &one], "--mix");
    assert_usage_error(&["doctor", "--mix", &one], "--mix");
    assert_usage_error(
        &["order", "--mix", &one, "--mix-when-exhausted", "never"],
        "never",
    );
}

#[test]
fn sources_with_other_fields_exit_1_naming_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = two_copies(dir.path());
    let other = fixture("json");
    let (ma, mo) = (format!("{a}:1"), format!("{}:1", other.display()));
    let run = ffcv(["order", "--mix", &ma, "--mix", &mo]);
    run.assert_runtime_error("source 1");
    assert!(
        run.stderr.contains(&other.display().to_string()),
        "{}",
        run.stderr
    );
}

#[test]
fn a_mixture_saved_mid_epoch_resumes_with_the_states_seed() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_copies(dir.path());
    let (ma, mb) = (format!("{a}:0.6"), format!("{b}:0.4"));
    let state = dir.path().join("s.json");
    let state = state.to_str().unwrap();
    let mix = ["--mix", &ma, "--mix", &mb, "--order", "random"];
    // No --seed: the mixture draws one, which the state keeps.
    let saved = ffcv(
        ["bench", "--batch-size", "4", "--num-workers", "1"]
            .into_iter()
            .chain(mix)
            .chain(["--stop-after", "3", "--save-state", state, "--json"]),
    )
    .json();
    let consumed = u64s(&saved["sample_ids"]);
    assert_eq!(consumed.len(), 12);
    let seed = std::fs::read_to_string(state).unwrap();
    let seed: serde_json::Value = serde_json::from_str(&seed).unwrap();
    let seed = seed["seed"].as_u64().unwrap().to_string();
    let whole = order(&[&mix[..], &["--seed", &seed]].concat());
    assert_eq!(consumed, whole[..12]);
    let resumed = ffcv(
        ["bench", "--batch-size", "4", "--num-workers", "1"]
            .into_iter()
            .chain(mix)
            .chain([
                "--resume", state, "--warmup", "0", "--epochs", "1", "--json",
            ]),
    )
    .json();
    // 200 positions in batches of 4, 3 consumed: 47 batches remain.
    assert_eq!(resumed["samples_per_epoch"], 188);
    assert_eq!(resumed["seed"].as_u64().unwrap().to_string(), seed);
}
