//! `ffcv bench`: the JSON report's keys and figures, the loader knobs on the command line,
//! and the exit codes for bad input.

use crate::support;

use support::{ffcv, fixture};

const KEYS: [&str; 14] = [
    "samples_per_sec",
    "bytes_per_sec",
    "epoch_seconds",
    "latency_p50_ms",
    "latency_p99_ms",
    "peak_rss_bytes",
    "storage_bytes_read",
    "wait_pages_seconds",
    "decode_seconds",
    "wait_slot_seconds",
    "slot_stage_seconds",
    "consumer_wait_seconds",
    "h2d_seconds",
    "h2d_bytes",
];

#[test]
fn json_report_has_every_figure() {
    let file = fixture("scalars");
    let run = ffcv([
        "bench",
        file.to_str().unwrap(),
        "--batch-size",
        "16",
        "--num-workers",
        "2",
        "--epochs",
        "2",
        "--warmup",
        "1",
        "--json",
    ]);
    let report = run.json();
    for key in KEYS {
        let v = report[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} missing: {report}"));
        assert!(v >= 0.0 && v.is_finite(), "{key} = {v}");
    }
    // 100 samples, batch 16, drop_last: 96 per epoch.
    assert_eq!(report["samples_per_epoch"], 96);
    assert_eq!(report["num_workers"], 2);
    assert!(report["samples_per_sec"].as_f64().unwrap() > 0.0);
    assert!(report["peak_rss_bytes"].as_u64().unwrap() > 0);
    // The consumer waits in every `next`; without a slot stage or a GPU stage their
    // figures are zero.
    assert!(report["consumer_wait_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(report["slot_stage_seconds"].as_f64(), Some(0.0));
    assert_eq!(report["h2d_seconds"].as_f64(), Some(0.0));
    assert_eq!(report["h2d_bytes"].as_u64(), Some(0));
    // Payload: 16 bytes (an i64 and an f64) per sample.
    let ratio =
        report["bytes_per_sec"].as_f64().unwrap() / report["samples_per_sec"].as_f64().unwrap();
    assert!((ratio - 16.0).abs() < 1e-6, "{ratio}");
}

#[test]
fn every_loader_knob_is_accepted() {
    let file = fixture("multipage");
    let run = ffcv([
        "bench",
        file.to_str().unwrap(),
        "--batch-size",
        "4",
        "--num-workers",
        "1",
        "--order",
        "quasi-random",
        "--no-os-cache",
        "--seed",
        "3",
        "--batches-ahead",
        "2",
        "--no-drop-last",
        "--recompile",
        "--no-compile",
        "--max-memory",
        "64MiB",
        "--reader-threads",
        "2",
        "--world-size",
        "2",
        "--rank",
        "1",
        "--decoder",
        "blob=raw-bytes",
        "--epochs",
        "1",
        "--warmup",
        "0",
        "--touch",
        "--json",
    ]);
    let report = run.json();
    assert_eq!(report["seed"], 3);
    assert_eq!(report["os_cache"], false);
    assert_eq!(report["order"], "quasi-random");
    let per_epoch = report["samples_per_epoch"].as_u64().unwrap();
    assert!((20..=40).contains(&per_epoch), "{per_epoch}");
    // The process cache read whole 2 MiB pages of this rank's samples (the file's last
    // page is short), never more than the file.
    let read = report["cache_bytes_read"].as_u64().unwrap();
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(read >= 2 << 20 && read <= size, "{read}");
    assert!(report["bytes_per_sec"].as_f64().unwrap() > 0.0);
}

/// `cache_bytes_read` of a process-cache bench over `multipage` in `order` (the median
/// of the timed epochs) with `extra` flags.
fn later_epoch_cache_read(order: &str, extra: &[&str]) -> u64 {
    let file = fixture("multipage");
    let mut args = vec![
        "bench",
        file.to_str().unwrap(),
        "--batch-size",
        "4",
        "--order",
        order,
        "--seed",
        "1",
        "--no-os-cache",
        "--prefetch-ahead",
        "1",
        "--epochs",
        "2",
        "--warmup",
        "1",
        "--json",
    ];
    args.extend_from_slice(extra);
    ffcv(args).json()["cache_bytes_read"].as_u64().unwrap()
}

#[test]
fn page_retention_flags_change_what_later_epochs_read() {
    let size = std::fs::metadata(fixture("multipage")).unwrap().len();
    // Seven data pages of 2 MiB, each read up to its last allocation (not all full).
    let every_page = later_epoch_cache_read("sequential", &[]);
    assert!(
        every_page > 5 * (2 << 20) && every_page <= size,
        "{every_page}"
    );
    // A random epoch keeps every page alive throughout: the slots end it holding all
    // of them and the next epoch reads nothing, unless asked to re-read as FFCV does.
    assert_eq!(later_epoch_cache_read("random", &[]), 0);
    assert_eq!(
        later_epoch_cache_read("random", &["--no-retain-pages"]),
        every_page
    );
    // A sequential epoch holds two pages at a time, so its next epoch needs the slots
    // before it reaches the pages they hold, unless every page has a slot of its own.
    assert_eq!(
        later_epoch_cache_read("sequential", &["--hold-all-pages"]),
        0
    );
}

#[test]
fn text_report_names_the_figures() {
    let file = fixture("json");
    let run = ffcv([
        "bench",
        file.to_str().unwrap(),
        "--batch-size",
        "5",
        "--epochs",
        "1",
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    for needle in ["samples/s", "batch latency", "producer time", "peak RSS"] {
        assert!(run.stdout.contains(needle), "{needle}: {}", run.stdout);
    }
}

#[test]
fn a_too_small_memory_budget_is_a_runtime_error() {
    let file = fixture("multipage");
    let run = ffcv([
        "bench",
        file.to_str().unwrap(),
        "--batch-size",
        "8",
        "--no-os-cache",
        "--order",
        "random",
        "--max-memory",
        "1MiB",
    ]);
    run.assert_runtime_error("memory budget");
}

#[test]
fn varying_size_images_without_decoder_are_a_runtime_error_naming_the_way_out() {
    // The default SimpleRGBImageDecoder needs images of one size; images_jpg's vary.
    let file = fixture("images_jpg");
    let run = ffcv(["bench", file.to_str().unwrap(), "--batch-size", "8"]);
    run.assert_runtime_error("--decoder FIELD=none");
    // Constant-size raw images load with the default decoder.
    let raw = fixture("images_raw");
    let ok = ffcv([
        "bench",
        raw.to_str().unwrap(),
        "--batch-size",
        "8",
        "--epochs",
        "1",
    ]);
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    let ok = ffcv([
        "bench",
        file.to_str().unwrap(),
        "--batch-size",
        "8",
        "--decoder",
        "image=none",
        "--epochs",
        "1",
    ]);
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
}

#[test]
fn usage_errors_exit_2() {
    let file = fixture("scalars");
    let f = file.to_str().unwrap();
    for args in [
        vec!["bench", f, "--decoder", "index"],
        vec!["bench", f, "--decoder", "index=jpeg-magic"],
        // `dct-scale` is for the crop decoders, and only as the last parameter.
        vec!["bench", f, "--decoder", "index=simple:dct-scale"],
        vec![
            "bench",
            f,
            "--decoder",
            "index=center-crop:8x8:dct-scale:0.5",
        ],
        vec!["bench", f, "--batch-size", "0"],
        vec!["bench", f, "--max-memory", "12 parsecs"],
        vec!["bench", f, "--rank", "1"],
        vec!["bench", f, "--batch-size", "1000"],
    ] {
        let run = ffcv(&args);
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
    let missing = ffcv(["bench", "/nonexistent/file.beton"]);
    missing.assert_runtime_error("/nonexistent/file.beton");
}

#[test]
fn transforms_run_on_the_named_field_after_its_decoder() {
    let file = fixture("images_raw");
    let f = file.to_str().unwrap();
    let bench = |extra: &[&str]| {
        let mut args = vec!["bench", f, "--batch-size", "8", "--epochs", "1", "--json"];
        args.extend_from_slice(extra);
        ffcv(&args)
    };
    // FFCV's ImageNet chain on the images, the label squeezed: it runs.
    let ok = bench(&[
        "--transform",
        "image=flip,normalize:imagenet:f32,chw",
        "--transform",
        "label=squeeze",
    ]);
    assert_eq!(ok.json()["samples_per_epoch"], 48);
    // The same chain to float16.
    let half = bench(&["--transform", "image=flip,normalize:imagenet:f16,chw"]);
    assert_eq!(half.json()["samples_per_epoch"], 48);
    // The ops reach the pipeline of the field named: an image op on the int field fails
    // when the loader is built, naming the field and the op.
    let wrong_field = bench(&["--transform", "index=normalize:imagenet"]);
    wrong_field.assert_runtime_error("field \"index\": pipeline: operation 1 (NormalizeImage)");
    // After a chosen decoder too: a crop to 16x16 then CHW.
    let cropped = bench(&[
        "--decoder",
        "image=center-crop:16x16",
        "--transform",
        "image=chw,convert:f32",
    ]);
    assert_eq!(cropped.json()["samples_per_epoch"], 48);
    // The opt-in DCT-domain downscaling parses and runs (raw images: the exact path).
    let dct = bench(&["--decoder", "image=center-crop:16x16:dct-scale"]);
    assert_eq!(dct.json()["samples_per_epoch"], 48);
}

#[test]
fn bad_transforms_are_usage_errors() {
    let file = fixture("images_raw");
    let f = file.to_str().unwrap();
    for (args, needle) in [
        (vec!["--transform", "image=blur"], "unknown op \"blur\""),
        (vec!["--transform", "image"], "not FIELD=OP"),
        (vec!["--transform", "image=flip:3"], "not in [0, 1]"),
        (
            vec!["--transform", "image=normalize:imagenet:u8"],
            "not f16, f32 or f64",
        ),
        (vec!["--transform", "nosuch=flip"], "does not have"),
        (
            vec!["--decoder", "image=none", "--transform", "image=flip"],
            "disabled",
        ),
    ] {
        let mut all = vec!["bench", f, "--epochs", "1"];
        all.extend(args.iter().copied());
        let run = ffcv(&all);
        assert_eq!(run.code, Some(2), "{all:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{all:?}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
}
