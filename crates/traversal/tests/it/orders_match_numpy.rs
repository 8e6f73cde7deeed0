//! Random orders are bit-identical to NumPy's `default_rng(seed + epoch).permutation`
//! and to the RANDOM orders FFCV 1.0.2 recorded for the fixture files.

use serde_json::Value;
use sha2::{Digest, Sha256};
use traversal::{NumpyPcg64, Random, TraversalOrder};

fn fixture(relative: &str) -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/").to_owned() + relative;
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn u64s(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| v.as_u64().expect("a u64"))
        .collect()
}

fn sha256_int64_le(values: &[u64]) -> String {
    let mut hasher = Sha256::new();
    for v in values {
        hasher.update(v.to_le_bytes());
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn every_numpy_permutation_case_matches_in_full() {
    let reference = fixture("numpy-permutation.json");
    let cases = reference["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 20);
    for case in cases {
        let seed = case["seed"].as_u64().unwrap();
        let n = case["n"].as_u64().unwrap();
        let order = Random::all(n, seed).order(0);
        assert_eq!(order.len() as u64, case["len"].as_u64().unwrap());
        let first50 = u64s(&case["first50"]);
        assert_eq!(&order[..first50.len()], &first50[..], "seed {seed}, n {n}");
        assert_eq!(
            sha256_int64_le(&order),
            case["sha256_int64_le"].as_str().unwrap(),
            "seed {seed}, n {n}"
        );
    }
}

#[test]
fn epoch_e_with_seed_s_is_the_permutation_of_seed_s_plus_e() {
    let reference = fixture("numpy-permutation.json");
    let case = reference["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["seed"] == 1234 && c["n"] == 1000)
        .unwrap();
    // Seed 1000, epoch 234 draws from default_rng(1234).
    let order = Random::all(1000, 1000).order(234);
    assert_eq!(&order[..50], &u64s(&case["first50"])[..]);
    assert_eq!(
        sha256_int64_le(&order),
        case["sha256_int64_le"].as_str().unwrap()
    );
}

#[test]
fn a_subset_is_permuted_with_the_same_swaps_as_its_positions() {
    // NumPy permutes the given array with the same swaps as `permutation(len)`.
    let indices: Vec<u64> = (0..1000).map(|i| 7 * i + 3).collect();
    let positions = Random::all(1000, 5).order(2);
    let subset = Random::new(indices.clone(), 5).order(2);
    let mapped: Vec<u64> = positions.iter().map(|&p| indices[p as usize]).collect();
    assert_eq!(subset, mapped);
}

#[test]
fn every_ffcv_random_order_of_the_fixtures_matches() {
    let names = [
        "bytes_ndarray",
        "images_jpg",
        "images_raw",
        "json",
        "multipage",
        "page_retry",
        "scalars",
    ];
    let mut checked = 0;
    for name in names {
        let recorded = fixture(&format!("ffcv-1.0.2/{name}.order.json"));
        let num_samples = recorded["num_samples"].as_u64().unwrap();
        for run in recorded["random"].as_array().unwrap() {
            let seed = run["seed"].as_u64().unwrap();
            let epoch = run["epoch"].as_u64().unwrap();
            let order = Random::all(num_samples, seed).order(epoch);
            assert_eq!(
                order,
                u64s(&run["order"]),
                "{name}: seed {seed}, epoch {epoch}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 42);
}

#[test]
fn seeds_of_two_and_three_32_bit_words_match_numpy() {
    // seed + epoch beyond u32 and beyond u64: NumPy splits the Python integer into
    // 32-bit words, lowest first; Random adds seed and epoch without overflow.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/numpy-large-seeds.json"
    );
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for case in reference["cases"].as_array().unwrap() {
        let seed = case["seed"].as_u64().unwrap();
        let epoch = case["epoch"].as_u64().unwrap();
        let n = case["n"].as_u64().unwrap();
        let order = Random::all(n, seed).order(epoch);
        assert_eq!(
            &order[..50],
            &u64s(&case["first50"])[..],
            "seed {seed}, epoch {epoch}"
        );
        assert_eq!(
            sha256_int64_le(&order),
            case["sha256_int64_le"].as_str().unwrap(),
            "seed {seed}, epoch {epoch}"
        );
    }
    let subset = &reference["subset"];
    let indices: Vec<u64> = (0..500).map(|i| 3 * i + 1).collect();
    assert_eq!(
        Random::new(indices, 42).order(1),
        u64s(&subset["order"]),
        "uint64 subset"
    );
}

#[test]
fn bounds_above_u32_use_masked_whole_64_bit_draws() {
    // NumPy's random_interval for a bound that does not fit in 32 bits: whole 64-bit
    // outputs under the smallest covering mask, rejected above the bound.
    let mut rng = NumpyPcg64::default_rng(0);
    let mut replay = NumpyPcg64::default_rng(0);
    let bound = (1u64 << 40) - 12346;
    let mask = (1u64 << 40) - 1;
    let value = loop {
        let candidate = replay.next_u64() & mask;
        if candidate <= bound {
            break candidate;
        }
    };
    assert_eq!(rng.random_interval(bound), value);
    assert_eq!(rng.next_u64(), replay.next_u64());
}
