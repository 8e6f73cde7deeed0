//! `ffcv doctor`: the facts it records, the configuration its rules recommend for a file that
//! fits memory and for one declared larger than the memory budget, and its usage errors.

use crate::support;

use std::path::{Path, PathBuf};

use beton_io::{DatasetWriter, from_fn};
use ffcv_cli::synthetic::{Kind, Spec};
use serde_json::Value;
use support::ffcv;

/// Writes `samples` CIFAR-like samples (3 KiB raw image + label) with the default 8 MiB
/// pages.
fn cifar_file(dir: &Path, samples: u64) -> PathBuf {
    let path = dir.join("cifar.beton");
    let spec = Spec {
        seed: 3,
        ..Spec::new(Kind::CifarRaw)
    };
    DatasetWriter::new(&path, spec.fields().unwrap())
        .unwrap()
        .with_num_workers(1)
        .write(&from_fn(samples, |i| Ok(spec.sample(i))))
        .unwrap();
    path
}

fn doctor_json(args: &[&str]) -> Value {
    let run = ffcv(args);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run.json()
}

fn rule_ids(report: &Value) -> Vec<String> {
    report["rules"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| rule["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_file_smaller_than_memory_gets_the_os_cache_with_random() {
    let dir = tempfile::tempdir().unwrap();
    let path = cifar_file(dir.path(), 200);
    let file = path.to_str().unwrap();
    let report = doctor_json(&[
        "doctor",
        file,
        "--batch-size",
        "32",
        "--no-measure",
        "--json",
    ]);

    let facts = &report["facts"];
    assert_eq!(facts["file_bytes"], std::fs::metadata(&path).unwrap().len());
    assert_eq!(facts["samples"], 200);
    assert_eq!(facts["page_size"], beton_io::DEFAULT_PAGE_SIZE);
    assert_eq!(facts["batch_size"], 32);
    assert_eq!(facts["distributed"], false);
    assert_eq!(facts["jpeg"], false);
    let machine = &facts["machine"];
    let cpus = machine["affinity_cpus"].as_u64().unwrap();
    assert!(cpus >= 1);
    assert!(machine["memory_total_bytes"].as_u64().unwrap() > 0);

    assert_eq!(report["rules"]["os_cache"], true);
    assert_eq!(report["rules"]["order"], "random");
    assert_eq!(report["rules"]["larger_than_memory"], false);
    assert_eq!(
        rule_ids(&report),
        ["fits-in-memory", "workers-physical-cores"]
    );
    assert_eq!(report["recommended"], report["start"]);
    assert_eq!(report["trials"], Value::Null);
    let workers = report["recommended"]["num_workers"].as_u64().unwrap();
    assert!(workers >= 1 && workers <= cpus);
    assert_eq!(
        report["command"],
        format!(
            "ffcv bench {file} --batch-size 32 --order random --num-workers {workers} --batches-ahead 3"
        )
    );
}

#[test]
fn a_file_larger_than_the_memory_budget_gets_the_process_cache_with_quasi_random() {
    let dir = tempfile::tempdir().unwrap();
    let path = cifar_file(dir.path(), 200);
    let file = path.to_str().unwrap();
    // 200 samples of 3 KiB: a 256 KiB budget cannot hold the file.
    let report = doctor_json(&[
        "doctor",
        file,
        "--batch-size",
        "32",
        "--max-memory",
        "256KiB",
        "--no-measure",
        "--json",
    ]);
    assert_eq!(report["facts"]["max_memory_bytes"], 256 << 10);
    assert_eq!(report["rules"]["os_cache"], false);
    assert_eq!(report["rules"]["order"], "quasi-random");
    assert_eq!(report["rules"]["larger_than_memory"], true);
    assert_eq!(rule_ids(&report)[0], "larger-than-memory");
    let because = report["rules"]["rules"][0]["because"].as_str().unwrap();
    assert!(
        because.contains("--max-memory budget (256.0 KiB)"),
        "{because}"
    );
    let workers = report["recommended"]["num_workers"].as_u64().unwrap();
    assert_eq!(
        report["command"],
        format!(
            "ffcv bench {file} --batch-size 32 --order quasi-random --num-workers {workers} --batches-ahead 3 --no-os-cache --max-memory 262144"
        )
    );
}

#[test]
fn distributed_ranks_over_a_budget_get_distributed_quasi_random() {
    let dir = tempfile::tempdir().unwrap();
    let path = cifar_file(dir.path(), 200);
    let report = doctor_json(&[
        "doctor",
        path.to_str().unwrap(),
        "--max-memory",
        "256KiB",
        "--world-size",
        "4",
        "--rank",
        "1",
        "--no-measure",
        "--json",
    ]);
    assert_eq!(report["facts"]["distributed"], true);
    assert_eq!(report["rules"]["order"], "quasi-random");
    assert_eq!(rule_ids(&report)[0], "larger-than-memory-distributed");
    assert!(
        report["command"]
            .as_str()
            .unwrap()
            .ends_with("--world-size 4 --rank 1")
    );
}

#[test]
fn a_repeatable_uniform_run_is_pinned_to_seeded_random() {
    let dir = tempfile::tempdir().unwrap();
    let path = cifar_file(dir.path(), 50);
    let report = doctor_json(&[
        "doctor",
        path.to_str().unwrap(),
        "--repeatable",
        "--seed",
        "17",
        "--no-measure",
        "--json",
    ]);
    assert_eq!(report["rules"]["order"], "random");
    assert_eq!(report["rules"]["seed"], 17);
    assert!(rule_ids(&report).contains(&"repeatable".to_owned()));
    assert!(report["command"].as_str().unwrap().ends_with("--seed 17"));
}

#[test]
fn the_text_report_shows_facts_rules_and_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = cifar_file(dir.path(), 50);
    let run = ffcv(["doctor", path.to_str().unwrap(), "--no-measure"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    for needle in [
        "facts",
        "memory",
        "storage",
        "affinity mask",
        "image (NDArrayField): default, label (IntField): default",
        "starting configuration (decision rules)",
        "fits-in-memory",
        "measurements: none (--no-measure)",
        "recommended settings",
        "ffcv bench ",
    ] {
        assert!(
            run.stdout.contains(needle),
            "`{needle}` not in:\n{}",
            run.stdout
        );
    }
}

#[test]
fn bad_arguments_are_usage_errors_and_a_missing_file_a_runtime_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = cifar_file(dir.path(), 10);
    let file = path.to_str().unwrap();
    for args in [
        vec!["doctor", file, "--time-budget", "0"],
        vec!["doctor", file, "--time-budget", "nan"],
        vec!["doctor", file, "--world-size", "2", "--rank", "2"],
        vec!["doctor", file, "--batch-size", "0"],
        vec!["doctor", file, "--decoder", "nosuchfield=simple"],
        vec!["doctor", file, "--decoder", "label=no-such-decoder"],
        vec!["doctor", file, "--max-memory", "lots"],
        vec!["doctor", file, "--device", "tpu:0"],
    ] {
        let run = ffcv(&args);
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
    let missing = dir.path().join("absent.beton");
    ffcv(["doctor", missing.to_str().unwrap(), "--no-measure"])
        .assert_runtime_error("absent.beton");
}

/// Writes `samples` samples of a 64 KiB u8 array with 2 MiB pages (32 samples a page).
fn wide_file(dir: &Path, samples: u64) -> PathBuf {
    let path = dir.join("wide.beton");
    let spec = Spec {
        shape: vec![64 * 1024],
        dtype: beton_io::NumpyDtype::u8(),
        seed: 5,
        ..Spec::new(Kind::Ndarray)
    };
    DatasetWriter::new(&path, spec.fields().unwrap())
        .unwrap()
        .with_page_size(2 << 20)
        .unwrap()
        .with_num_workers(1)
        .write(&from_fn(samples, |i| Ok(spec.sample(i))))
        .unwrap();
    path
}

fn trials(report: &Value) -> &Vec<Value> {
    report["trials"].as_array().unwrap()
}

#[test]
fn a_measured_run_starts_from_the_rules_and_names_a_resource_with_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let path = cifar_file(dir.path(), 2000);
    let report = doctor_json(&[
        "doctor",
        path.to_str().unwrap(),
        "--batch-size",
        "64",
        "--time-budget",
        "2",
        "--json",
    ]);
    let trials = trials(&report);
    assert_eq!(trials[0]["knob"], "baseline");
    assert_eq!(trials[0]["knobs"], report["start"]);
    assert_eq!(trials[0]["kept"], true);
    let baseline = &trials[0]["measurement"];
    assert!(baseline["samples_per_sec"].as_f64().unwrap() > 0.0);
    assert_eq!(baseline["h2d_seconds"], Value::Null);
    // The loader's own counters: the consumer's waits in `next`; nothing for a GPU stage.
    assert!(baseline["consumer_wait_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(baseline["slot_stage_seconds"].as_f64(), Some(0.0));
    assert_eq!(baseline["h2d_bytes"].as_u64(), Some(0));
    // Every later trial changes exactly one knob of the best configuration so far, measures
    // the two side by side (A/B), targets the resource named at that point, and is kept only
    // with a gain above its spread.
    let mut best = trials[0]["knobs"].clone();
    for trial in &trials[1..] {
        assert_eq!(trial["reference"], best, "{trial}");
        let knobs = trial["knobs"].as_object().unwrap();
        let changed: Vec<&String> = knobs
            .iter()
            .filter(|(key, value)| best[key.as_str()] != **value)
            .map(|(key, _)| key)
            .collect();
        assert_eq!(changed.len(), 1, "{trial}");
        let knob = trial["knob"].as_str().unwrap();
        assert_eq!(changed[0], knob);
        let targets = trial["targets"].as_str().unwrap();
        let allowed: &[&str] = match knob {
            "num_workers" => &["cpu"],
            "batches_ahead" => &["storage", "gpu-link"],
            _ => &["storage"],
        };
        assert!(allowed.contains(&targets), "{trial}");
        let verdict = &trial["verdict"];
        let rates = trial["rates"].as_array().unwrap();
        let reference_rates = trial["reference_rates"].as_array().unwrap();
        assert!(rates.len() <= 3 && reference_rates.len() <= 3, "{trial}");
        if trial["kept"] == true {
            assert!(rates.len() >= 2 && reference_rates.len() >= 2, "{trial}");
            assert!(
                verdict["gain"].as_f64().unwrap() > verdict["spread"].as_f64().unwrap(),
                "{trial}"
            );
            best = trial["knobs"].clone();
        }
    }
    for untried in report["untried"].as_array().unwrap() {
        let because = untried["because"].as_str().unwrap();
        assert!(
            because == "time budget spent" || because.contains("not the scarce resource"),
            "{untried}"
        );
    }
    assert_eq!(report["recommended"], best);
    // A file that fits memory keeps the OS cache whatever the runs measured.
    assert_eq!(report["recommended"]["os_cache"], true);
    let diagnosis = &report["diagnosis"];
    let resource = diagnosis["scarce_resource"].as_str().unwrap();
    assert!(
        ["storage", "cpu", "consumer"].contains(&resource),
        "{diagnosis}"
    );
    let evidence: Vec<&str> = diagnosis["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(evidence.contains(&"no GPU stage"), "{evidence:?}");
    assert!(
        evidence
            .iter()
            .any(|e| e.starts_with("waiting on page reads"))
    );
    assert!(evidence.iter().any(|e| e.starts_with("pipeline stages on")));
}

#[test]
fn a_file_over_the_memory_budget_keeps_process_cache_quasi_random_and_is_evidence() {
    let dir = tempfile::tempdir().unwrap();
    // 200 x 64 KiB over 9 pages of 2 MiB (18 MiB in all); a 12 MiB budget holds the few
    // pages QuasiRandom keeps open with batches of 2 (a window of 4 pages), not the file.
    let path = wide_file(dir.path(), 200);
    let report = doctor_json(&[
        "doctor",
        path.to_str().unwrap(),
        "--batch-size",
        "2",
        "--max-memory",
        "12MiB",
        "--time-budget",
        "2",
        "--json",
    ]);
    assert_eq!(report["rules"]["os_cache"], false);
    assert_eq!(report["rules"]["order"], "quasi-random");
    // Memory is named by the memory the kept run held (anonymous and shared pages, not
    // mapped file pages), so whether the peak reached 90% of the 12 MiB is the
    // measurement's to say: how much is held depends on the configuration the doctor kept
    // (a process cache that copies pages into its window holds most of the budget, one
    // that maps them holds a few MiB; a fresh clone's CI run kept one with 26%).
    let diagnosis = &report["diagnosis"];
    let held = diagnosis["memory_held_share"].as_f64().unwrap();
    assert!(held > 0.0 && held < 2.0, "{diagnosis}");
    assert_eq!(
        diagnosis["scarce_resource"] == "memory",
        held >= 0.9,
        "{diagnosis}"
    );
    let evidence = report["diagnosis"]["evidence"].to_string();
    assert!(
        evidence.contains("is larger than the memory it may use (12.0 MiB)"),
        "{evidence}"
    );
    // The search never trades the order for a file that does not fit (the cache it may
    // try against the OS cache, one knob at a time).
    for trial in trials(&report) {
        assert_eq!(trial["knobs"]["order"], "quasi-random", "{trial}");
    }
    assert_eq!(trials(&report)[0]["knobs"]["os_cache"], false);
    assert!(
        trials(&report)[0]["measurement"]["samples_per_sec"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert_eq!(report["recommended"]["os_cache"], false);
    assert_eq!(report["recommended"]["order"], "quasi-random");
    assert!(
        report["command"]
            .as_str()
            .unwrap()
            .contains(" --max-memory 12582912")
    );
    // The buffer that fits the 12 MiB budget is recommended with it.
    let pages = report["recommended"]["quasi_buffer_pages"]
        .as_u64()
        .unwrap();
    assert!((1..=4).contains(&pages), "{pages}");
    assert!(
        report["command"]
            .as_str()
            .unwrap()
            .contains(&format!("--no-os-cache --quasi-buffer-pages {pages}"))
    );
}

#[test]
fn a_budget_too_small_for_any_schedule_reports_the_memory_guard() {
    let dir = tempfile::tempdir().unwrap();
    let path = wide_file(dir.path(), 200);
    let report = doctor_json(&[
        "doctor",
        path.to_str().unwrap(),
        "--batch-size",
        "16",
        "--max-memory",
        "1MiB",
        "--time-budget",
        "1",
        "--json",
    ]);
    let baseline = &trials(&report)[0];
    assert_eq!(baseline["kept"], false);
    assert!(
        baseline["error"]
            .as_str()
            .unwrap()
            .contains("memory budget"),
        "{baseline}"
    );
    assert_eq!(report["diagnosis"]["scarce_resource"], "memory");
    assert!(
        report["diagnosis"]["evidence"]
            .to_string()
            .contains("the memory guard refused a configuration")
    );
    assert!(
        report["diagnosis"]["evidence"]
            .to_string()
            .contains("the smallest page schedule tried needs"),
        "{}",
        report["diagnosis"]
    );
    // Nothing ran, so nothing is recommended (the diagnosis says what budget would do).
    assert_eq!(report["recommended"], Value::Null);
    assert_eq!(report["command"], Value::Null);
}

#[test]
fn a_file_of_images_of_varying_size_is_measured_with_the_training_decoder() {
    // FFCV's own fixture: 24 JPEGs of 40 to 116 pixels a side, as ImageNet's vary.
    let path = support::fixture("images_jpg");
    let report = doctor_json(&[
        "doctor",
        path.to_str().unwrap(),
        "--batch-size",
        "8",
        "--time-budget",
        "2",
        "--json",
    ]);
    let facts = &report["facts"];
    assert_eq!(
        facts["decoder_fallbacks"][0]["decoder"],
        "image=random-resized-crop:224x224"
    );
    let pipeline = facts["pipeline"][0].as_str().unwrap();
    assert!(
        pipeline.starts_with(
            "image (RGBImageField): random-resized-crop:224x224 (the images vary in size \
             (sample 0 is 61x89, sample 1 is 62x62)"
        ),
        "{pipeline}"
    );
    let baseline = &trials(&report)[0];
    assert_eq!(baseline["error"], Value::Null, "{baseline}");
    assert!(baseline["measurement"]["samples_per_sec"].as_f64().unwrap() > 0.0);
    assert!(
        report["command"]
            .as_str()
            .unwrap()
            .ends_with("--decoder image=random-resized-crop:224x224"),
        "{}",
        report["command"]
    );
    // The text report says so among the facts.
    let text = ffcv([
        "doctor",
        path.to_str().unwrap(),
        "--batch-size",
        "8",
        "--no-measure",
    ]);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(
        text.stdout
            .contains("measured with FFCV's training decoder random-resized-crop:224x224"),
        "{}",
        text.stdout
    );
}

#[test]
fn when_nothing_can_be_measured_nothing_is_recommended_and_the_exit_status_is_1() {
    // 100 samples never fill a batch of 512 with drop_last: every run fails.
    let path = support::fixture("scalars");
    let run = ffcv([
        "doctor",
        path.to_str().unwrap(),
        "--batch-size",
        "512",
        "--time-budget",
        "1",
        "--json",
    ]);
    run.assert_runtime_error("no configuration could be measured, so nothing is recommended");
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["recommended"], Value::Null);
    assert_eq!(report["command"], Value::Null);
    assert_eq!(report["diagnosis"], Value::Null);
    assert!(
        trials(&report)[0]["error"]
            .as_str()
            .unwrap()
            .contains("no full batch of 512")
    );
    let text = ffcv([
        "doctor",
        path.to_str().unwrap(),
        "--batch-size",
        "512",
        "--time-budget",
        "1",
    ]);
    assert_eq!(text.code, Some(1));
    assert!(
        text.stdout
            .contains("recommended settings: none (no configuration could be measured)")
    );
    assert!(!text.stdout.contains("ffcv bench"), "{}", text.stdout);
}

/// Writes `samples` JPEG images of 160 to 256 pixels a side (quality 90) with a label.
fn jpeg_file(dir: &Path, samples: u64) -> PathBuf {
    use beton_io::{FieldSpec, FieldType, FieldValue, RgbImage};
    use ffcv::image::{SyntheticImageSpec, synthetic_jpeg};
    let path = dir.join("jpeg.beton");
    let fields = vec![
        FieldSpec::new("image", FieldType::RgbImage),
        FieldSpec::new("label", FieldType::Int),
    ];
    DatasetWriter::new(&path, fields)
        .unwrap()
        .write(&from_fn(samples, |i| {
            let (bytes, width, height) =
                synthetic_jpeg(11, i, SyntheticImageSpec::default(), 90).unwrap();
            Ok(vec![
                FieldValue::RgbImage(RgbImage::Jpeg {
                    width: width as u16,
                    height: height as u16,
                    bytes,
                }),
                FieldValue::Int(i as i64 % 10),
            ])
        }))
        .unwrap();
    path
}

#[test]
fn a_jpeg_dataset_with_an_expensive_pipeline_names_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let path = jpeg_file(dir.path(), 160);
    let report = doctor_json(&[
        "doctor",
        path.to_str().unwrap(),
        "--batch-size",
        "16",
        "--decoder",
        "image=random-resized-crop:64x64",
        "--time-budget",
        "3",
        "--json",
    ]);
    assert_eq!(report["facts"]["jpeg"], true);
    assert_eq!(
        report["facts"]["pipeline"][0],
        "image (RGBImageField): random-resized-crop:64x64"
    );
    assert_eq!(report["rules"]["os_cache"], true);
    let baseline = &trials(&report)[0]["measurement"];
    assert!(
        baseline["samples_per_sec"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    let diagnosis = &report["diagnosis"];
    assert_eq!(diagnosis["scarce_resource"], "cpu", "{diagnosis}");
    // Decoding dominates: the stages take most of the wall time, page reads none of it.
    let best = report["trials"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|t| t["kept"] == true)
        .unwrap();
    let m = &best["measurement"];
    assert!(m["cpu_busy_share"].as_f64().unwrap() > m["page_wait_share"].as_f64().unwrap());
    assert!(m["cpu_busy_share"].as_f64().unwrap() > m["slot_wait_share"].as_f64().unwrap());
    assert!(
        report["command"]
            .as_str()
            .unwrap()
            .ends_with("--decoder image=random-resized-crop:64x64")
    );
}

#[test]
fn transforms_are_measured_reported_and_kept_in_the_recommended_command() {
    let path = support::fixture("images_raw");
    let f = path.to_str().unwrap();
    let report = doctor_json(&[
        "doctor",
        f,
        "--batch-size",
        "8",
        "--time-budget",
        "2",
        "--transform",
        "image=flip,normalize:imagenet:f32,chw",
        "--json",
    ]);
    let pipeline = report["facts"]["pipeline"][0].as_str().unwrap();
    assert!(
        pipeline.starts_with("image (RGBImageField): simple -> RandomHorizontalFlip"),
        "{pipeline}"
    );
    assert!(pipeline.contains("NormalizeImage"), "{pipeline}");
    let baseline = &trials(&report)[0];
    assert_eq!(baseline["error"], Value::Null, "{baseline}");
    assert!(
        report["command"]
            .as_str()
            .unwrap()
            .ends_with("--transform image=flip,normalize:imagenet:f32,chw"),
        "{}",
        report["command"]
    );
    // Bad op strings and unknown fields are usage errors before anything is measured.
    for (args, needle) in [
        (vec!["--transform", "image=blur"], "unknown op"),
        (vec!["--transform", "nosuch=flip"], "enabled field"),
    ] {
        let mut all = vec!["doctor", f, "--no-measure"];
        all.extend(args.iter().copied());
        let run = ffcv(&all);
        assert_eq!(run.code, Some(2), "{all:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{all:?}: {}", run.stderr);
    }
}
