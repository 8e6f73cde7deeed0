//! Distributed Sequential and Random are exactly PyTorch's `DistributedSampler`
//! (torch 2.5.1, `drop_last=False`) as FFCV 1.0.2 applies it to its index list.

use serde_json::Value;
use traversal::{Distributed, Random, Sequential, TraversalOrder, randperm};

fn reference() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/torch-distributed-sampler.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn u64s(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

#[test]
fn randperm_matches_torch_for_every_recorded_seed() {
    let reference = reference();
    let n = reference["dataset_len"].as_u64().unwrap() as usize;
    let perms = reference["randperm"].as_array().unwrap();
    assert_eq!(perms.len(), 2);
    for perm in perms {
        let seed = perm["generator_seed"].as_u64().unwrap();
        assert_eq!(randperm(n, seed), u64s(&perm["perm"]), "seed {seed}");
    }
}

#[test]
fn every_sampler_case_matches_for_every_rank_and_epoch() {
    let reference = reference();
    let n = reference["dataset_len"].as_u64().unwrap();
    let world_size = reference["num_replicas"].as_u64().unwrap() as usize;
    let seed = reference["seed"].as_u64().unwrap();
    let cases = reference["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 16);
    for case in cases {
        let rank = case["rank"].as_u64().unwrap() as usize;
        let epoch = case["epoch"].as_u64().unwrap();
        let distributed = Distributed::new(world_size, rank).unwrap();
        let order = if case["shuffle"].as_bool().unwrap() {
            Random::all(n, seed)
                .with_distributed(distributed)
                .order(epoch)
        } else {
            Sequential::all(n)
                .with_distributed(distributed)
                .order(epoch)
        };
        assert_eq!(order, u64s(&case["indices"]), "{case}");
    }
}

#[test]
fn ffcv_maps_sampler_positions_through_its_index_list() {
    // FFCV: `indices[np.array(list(DistributedSampler(indices, ...)))]`.
    let reference = reference();
    let indices: Vec<u64> = (0..103).map(|i| 1000 + 2 * i).collect();
    for case in reference["cases"].as_array().unwrap() {
        let rank = case["rank"].as_u64().unwrap() as usize;
        let epoch = case["epoch"].as_u64().unwrap();
        let distributed = Distributed::new(4, rank).unwrap();
        let order = if case["shuffle"].as_bool().unwrap() {
            Random::new(indices.clone(), 0)
                .with_distributed(distributed)
                .order(epoch)
        } else {
            Sequential::new(indices.clone())
                .with_distributed(distributed)
                .order(epoch)
        };
        let expected: Vec<u64> = u64s(&case["indices"])
            .into_iter()
            .map(|position| indices[position as usize])
            .collect();
        assert_eq!(order, expected);
    }
}

#[test]
fn sampler_positions_equal_the_orders_over_all_samples() {
    let d = Distributed::new(4, 2).unwrap();
    assert_eq!(
        d.sampler_positions(103, Some(1)),
        Random::all(103, 0).with_distributed(d).order(1)
    );
    assert_eq!(
        d.sampler_positions(103, None),
        Sequential::all(103).with_distributed(d).order(5)
    );
}
