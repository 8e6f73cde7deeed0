//! `ffcv order`: the epoch's order as a JSON array, exactly NumPy's and PyTorch's
//! orders as FFCV 1.0.2 uses them; bad input exits 1 (runtime) or 2 (usage).

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{FIXTURES, ffcv, fixture, fixture_dir, u64s};

fn order_json(name: &str) -> Value {
    let path = fixture_dir().join(format!("{name}.order.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn torch_reference() -> Value {
    let path = fixture_dir().join("../torch-distributed-sampler.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `ffcv order ARGS`, parsed.
fn order(args: &[&str]) -> Vec<u64> {
    let mut full = vec!["order"];
    full.extend_from_slice(args);
    u64s(&ffcv(full).json())
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// A .beton file with `num_samples` samples and one Int field (`index`), no data
/// pages: header, one field descriptor, the metadata rows, an empty allocation table.
fn scalar_file(dir: &Path, num_samples: u64) -> PathBuf {
    let metadata_start = 24 + 1041;
    let end = metadata_start + 8 * num_samples;
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&2u16.to_le_bytes()); // version
    bytes.extend_from_slice(&1u16.to_le_bytes()); // fields
    bytes.extend_from_slice(&(1u32 << 21).to_le_bytes()); // page size
    bytes.extend_from_slice(&num_samples.to_le_bytes());
    bytes.extend_from_slice(&end.to_le_bytes()); // allocation table pointer
    bytes.push(1); // IntField
    let mut name = [0u8; 16];
    name[..5].copy_from_slice(b"index");
    bytes.extend_from_slice(&name);
    bytes.extend_from_slice(&[0u8; 1024]);
    for sample in 0..num_samples {
        bytes.extend_from_slice(&(sample as i64).to_le_bytes());
    }
    assert_eq!(bytes.len() as u64, end);
    let path = dir.join(format!("scalars_{num_samples}.beton"));
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn random_orders_equal_every_order_ffcv_recorded() {
    let mut checked = 0;
    for name in FIXTURES {
        let recorded = order_json(name);
        for run in recorded["random"].as_array().unwrap() {
            let seed = run["seed"].to_string();
            let epoch = run["epoch"].to_string();
            let file = fixture(name);
            let got = order(&[
                path_str(&file),
                "--order",
                "random",
                "--seed",
                &seed,
                "--epoch",
                &epoch,
            ]);
            assert_eq!(got, u64s(&run["order"]), "{name} seed {seed} epoch {epoch}");
            checked += 1;
        }
    }
    assert_eq!(checked, 42);
}

#[test]
fn sequential_is_every_sample_in_file_order() {
    let file = fixture("images_raw");
    assert_eq!(order(&[path_str(&file)]), (0..50).collect::<Vec<u64>>());
    assert_eq!(
        order(&[path_str(&file), "--order", "sequential"]),
        (0..50).collect::<Vec<u64>>()
    );
}

#[test]
fn distributed_orders_equal_torch_distributed_sampler() {
    let reference = torch_reference();
    let dir = tempfile::tempdir().unwrap();
    let file = scalar_file(dir.path(), reference["dataset_len"].as_u64().unwrap());
    for case in reference["cases"].as_array().unwrap() {
        let kind = if case["shuffle"].as_bool().unwrap() {
            "random"
        } else {
            "sequential"
        };
        let epoch = case["epoch"].to_string();
        let rank = case["rank"].to_string();
        let got = order(&[
            path_str(&file),
            "--order",
            kind,
            "--seed",
            "0",
            "--epoch",
            &epoch,
            "--world-size",
            "4",
            "--rank",
            &rank,
        ]);
        assert_eq!(got, u64s(&case["indices"]), "{case}");
    }
}

#[test]
fn an_indices_file_in_either_format_gives_numpys_permutation_of_the_subset() {
    let dir = tempfile::tempdir().unwrap();
    let subset: Vec<u64> = (0..100).filter(|i| i % 7 != 3).rev().collect();
    let json = dir.path().join("ids.json");
    std::fs::write(&json, serde_json::to_string(&subset).unwrap()).unwrap();
    let lines = dir.path().join("ids.txt");
    let text: String = subset.iter().map(|i| format!("{i}\n")).collect();
    std::fs::write(&lines, text).unwrap();

    let file = fixture("scalars");
    let args = |ids: &Path| {
        order(&[
            path_str(&file),
            "--order",
            "random",
            "--seed",
            "17",
            "--epoch",
            "2",
            "--indices",
            path_str(ids),
        ])
    };
    let from_json = args(&json);
    assert_eq!(from_json, args(&lines));
    // NumPy permutes the subset with the same swaps as `permutation(len)`:
    // the library's Random is checked bit for bit against NumPy.
    let expected = traversal::TraversalOrder::order(&traversal::Random::new(subset, 17), 2);
    assert_eq!(from_json, expected);
}

#[test]
fn quasi_random_is_a_deterministic_permutation_and_covers_ranks() {
    let file = fixture("multipage");
    let args = [
        path_str(&file),
        "--order",
        "quasi-random",
        "--batch-size",
        "7",
        "--no-os-cache",
        "--seed",
        "3",
    ];
    let first = order(&args);
    assert_eq!(first, order(&args));
    let mut sorted = first.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..40).collect::<Vec<u64>>());

    let mut covered = Vec::new();
    let mut lengths = Vec::new();
    for rank in ["0", "1", "2"] {
        let mut rank_args = args.to_vec();
        rank_args.extend(["--world-size", "3", "--rank", rank]);
        let share = order(&rank_args);
        lengths.push(share.len());
        covered.extend(share);
    }
    // ceil(40 / 3) = 14 each: 42 positions, 2 repeats.
    assert_eq!(lengths, vec![14, 14, 14]);
    assert_eq!(covered.len(), 42);
    covered.sort_unstable();
    covered.dedup();
    assert_eq!(covered, (0..40).collect::<Vec<u64>>());

    // --schedule: what each rank's epoch costs the process cache. The 7 data pages are
    // read once each, plus at most one read per page cut between two ranks (2 at most).
    let mut reads = 0;
    for rank in ["0", "1", "2"] {
        let mut rank_args = vec!["order"];
        rank_args.extend_from_slice(&args);
        rank_args.extend(["--world-size", "3", "--rank", rank, "--schedule"]);
        let report = ffcv(rank_args).json();
        assert_eq!(report["samples"], 14, "{report}");
        assert!(
            report["distinct_samples"].as_u64().unwrap() >= 13,
            "{report}"
        );
        assert_eq!(report["batch_size"], 7, "{report}");
        assert!(report["slots"].as_u64().unwrap() >= 1, "{report}");
        reads += report["pages_read"].as_u64().unwrap();
    }
    assert!((7..=9).contains(&reads), "{reads} page reads");
}

#[test]
fn bad_input_is_a_one_line_error_or_a_usage_error() {
    let scalars = fixture("scalars");
    let scalars = scalars.to_str().unwrap();
    ffcv(["order", scalars, "--order", "quasi-random"])
        .assert_runtime_error("won't benefit from QuasiRandom order");
    ffcv(["order", scalars, "--world-size", "4", "--rank", "4"])
        .assert_runtime_error("rank 4 is out of range for world size 4");
    ffcv(["order", "/nonexistent/file.beton"]).assert_runtime_error("/nonexistent/file.beton");

    let dir = tempfile::tempdir().unwrap();
    let out_of_range = dir.path().join("far.txt");
    std::fs::write(&out_of_range, "1\n2\n100\n").unwrap();
    ffcv([
        "order",
        scalars,
        "--indices",
        out_of_range.to_str().unwrap(),
    ])
    .assert_runtime_error("sample id 100 (entry 2) is out of range");
    let malformed = dir.path().join("bad.json");
    std::fs::write(&malformed, "[1, \"two\"]").unwrap();
    ffcv(["order", scalars, "--indices", malformed.to_str().unwrap()])
        .assert_runtime_error("entry 1 is \"two\"");
    ffcv(["order", scalars, "--indices", "/nonexistent/ids.txt"])
        .assert_runtime_error("cannot read the indices file");

    for usage in [
        vec!["order", scalars, "--rank", "1"],
        vec!["order", scalars, "--world-size", "2"],
        vec!["order", scalars, "--world-size", "0", "--rank", "0"],
        vec!["order", scalars, "--order", "shuffled"],
        vec!["order", scalars, "--batch-size", "0"],
    ] {
        let run = ffcv(&usage);
        assert_eq!(run.code, Some(2), "{usage:?}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"));
    }
}

#[test]
fn buffer_pages_overrides_twice_the_batch_size() {
    // multipage.beton: 6 samples on each of pages 1..=6, 4 on page 7.
    let expected = support::expected("multipage");
    let mut page_of = std::collections::HashMap::new();
    for (page, samples) in expected["pages"]["page_to_samples"].as_object().unwrap() {
        for sample in u64s(samples) {
            page_of.insert(sample, page.clone());
        }
    }
    let file = fixture("multipage");
    let one_page = order(&[
        path_str(&file),
        "--order",
        "quasi-random",
        "--batch-size",
        "7",
        "--buffer-pages",
        "1",
    ]);
    let mut runs: Vec<&String> = one_page.iter().map(|s| &page_of[s]).collect();
    runs.dedup();
    // With one page in the buffer, each page is read in one contiguous run.
    assert_eq!(runs.len(), 7, "{one_page:?}");
}

#[test]
fn with_the_process_cache_the_default_buffer_is_the_loaders_budget_sized_one() {
    use beton_io::{DatasetWriter, from_fn};
    use ffcv_cli::synthetic::{Kind, Spec};
    // 200 x 64 KiB in 2 MiB pages (about 31 a page, 7 pages); batch 8: FFCV's buffer is 16
    // pages, more than a 12 MiB budget's schedules hold.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.beton");
    let spec = Spec {
        shape: vec![64 * 1024],
        dtype: beton_io::NumpyDtype::u8(),
        seed: 3,
        ..Spec::new(Kind::Ndarray)
    };
    DatasetWriter::new(&path, spec.fields().unwrap())
        .unwrap()
        .with_page_size(2 << 20)
        .unwrap()
        .with_num_workers(1)
        .write(&from_fn(200, |i| Ok(spec.sample(i))))
        .unwrap();
    let file = path_str(&path);
    let common = [
        file,
        "--order",
        "quasi-random",
        "--batch-size",
        "8",
        "--seed",
        "4",
    ];
    let bench = ffcv([
        "bench",
        file,
        "--order",
        "quasi-random",
        "--batch-size",
        "8",
        "--seed",
        "4",
        "--no-os-cache",
        "--max-memory",
        "12MiB",
        "--epochs",
        "1",
        "--warmup",
        "0",
        "--json",
    ])
    .json();
    let chosen = bench["quasi_buffer_pages"].as_u64().unwrap();
    assert!(chosen < 16, "{bench}");
    let sized = order(&[&common[..], &["--no-os-cache", "--max-memory", "12MiB"]].concat());
    let explicit = order(&[&common[..], &["--quasi-buffer-pages", &chosen.to_string()]].concat());
    let ffcvs = order(&common);
    assert_eq!(sized, explicit);
    assert_ne!(sized, ffcvs);
    // The OS cache keeps FFCV's buffer whatever the budget.
    let os = order(&[&common[..], &["--max-memory", "12MiB"]].concat());
    assert_eq!(os, ffcvs);
}
