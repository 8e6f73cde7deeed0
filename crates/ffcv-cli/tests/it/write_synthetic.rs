//! `ffcv write synthetic` round trip: every kind written, then read back with `inspect` and
//! `dump --raw`, equals the generator's values; the content depends only on the seed.

use crate::support;

use std::path::Path;

use base64::Engine as _;
use beton_io::{FieldValue, RgbImage};
use ffcv_cli::synthetic::{Kind, Spec};
use serde_json::{Value, json};
use support::ffcv;

fn write(out: &Path, kind: &str, samples: u64, extra: &[&str]) -> support::Run {
    let samples = samples.to_string();
    let mut args = vec![
        "write",
        "synthetic",
        out.to_str().unwrap(),
        "--kind",
        kind,
        "--samples",
        &samples,
    ];
    args.extend_from_slice(extra);
    ffcv(&args)
}

fn b64(bytes: &[u8]) -> Value {
    json!(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// What `dump --raw` must print for a generated value.
fn expected_json(value: &FieldValue) -> Value {
    match value {
        FieldValue::Int(v) => json!(v),
        FieldValue::Float(x) => json!(x),
        FieldValue::Bytes(bytes) => json!({"len": bytes.len(), "b64": b64(bytes)}),
        FieldValue::NdArray(bytes) => json!({"b64": b64(bytes)}),
        FieldValue::RgbImage(RgbImage::Raw {
            width,
            height,
            pixels,
        }) => {
            json!({"mode": "raw", "width": width, "height": height, "b64": b64(pixels)})
        }
        other => panic!("the synthetic kinds do not generate {other:?}"),
    }
}

/// Every key of `want` (an object) is in `got` with the same value, or `got == want`.
fn assert_covers(got: &Value, want: &Value, at: &str) {
    match want.as_object() {
        Some(keys) => {
            for (key, value) in keys {
                assert_eq!(&got[key], value, "{at}: {key}");
            }
        }
        None => assert_eq!(got, want, "{at}"),
    }
}

#[test]
fn every_kind_reads_back_the_generated_values() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(Kind, &[&str]); 6] = [
        (Kind::Scalars, &[]),
        (Kind::Bytes, &["--size", "3000"]),
        (Kind::Ndarray, &["--shape", "2,5", "--dtype", ">i2"]),
        (Kind::Ndarray, &["--dtype", "<f2"]),
        (Kind::CifarRaw, &[]),
        (Kind::ImagesRaw, &["--shape", "20,30"]),
    ];
    for (n, (kind, options)) in cases.into_iter().enumerate() {
        let out = dir.path().join(format!("{n}.beton"));
        let mut extra = vec!["--seed", "11", "--page-size", "2MiB", "--workers", "2"];
        extra.extend_from_slice(options);
        let run = write(&out, kind.name(), 150, &extra);
        assert_eq!(run.code, Some(0), "{}: {}", kind.name(), run.stderr);

        // The generator the CLI used, rebuilt from the same options.
        let mut spec = Spec {
            seed: 11,
            ..Spec::new(kind)
        };
        match *options {
            ["--size", size] => spec.mean_size = size.parse().unwrap(),
            ["--shape", shape, "--dtype", dtype] => {
                spec.shape = shape.split(',').map(|d| d.parse().unwrap()).collect();
                spec.dtype = dtype.parse().unwrap();
            }
            ["--dtype", dtype] => spec.dtype = dtype.parse().unwrap(),
            ["--shape", shape] => {
                spec.shape = shape.split(',').map(|d| d.parse().unwrap()).collect()
            }
            _ => {}
        }
        let fields = spec.fields().unwrap();

        let info = ffcv(["inspect".as_ref(), "--json".as_ref(), out.as_os_str()]).json();
        assert_eq!(info["num_samples"], 150);
        assert_eq!(info["page_size"], 2097152);
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        let got_names: Vec<&str> = info["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(got_names, names, "{}", kind.name());

        let dump = ffcv(["dump".as_ref(), out.as_os_str(), "--raw".as_ref()]);
        assert_eq!(dump.code, Some(0), "{}", dump.stderr);
        let lines = dump.json_lines();
        assert_eq!(lines.len(), 150);
        for (i, line) in lines.iter().enumerate() {
            for (field, value) in fields.iter().zip(spec.sample(i as u64)) {
                let at = format!("{} sample {i} field {}", kind.name(), field.name);
                assert_covers(&line[&field.name], &expected_json(&value), &at);
                if let FieldValue::Float(x) = value {
                    assert_eq!(
                        line[format!("{}.bits", field.name)],
                        json!(x.to_bits()),
                        "{at}"
                    );
                }
            }
        }
    }
}

#[test]
fn one_worker_output_is_reproducible_and_threads_do_not_change_values() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|n| dir.path().join(format!("{n}.beton")));
    let one = ["--workers", "1", "--page-size", "2MiB", "--size", "200KiB"];
    assert_eq!(write(&a, "bytes", 60, &one).code, Some(0));
    assert_eq!(write(&b, "bytes", 60, &one).code, Some(0));
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "same command, same bytes"
    );

    let two = ["--workers", "2", "--page-size", "2MiB", "--size", "200KiB"];
    assert_eq!(write(&c, "bytes", 60, &two).code, Some(0));
    let dump = |path: &Path| ffcv(["dump".as_ref(), path.as_os_str()]).stdout;
    assert_eq!(
        dump(&a),
        dump(&c),
        "values do not depend on the writer's threads"
    );

    let seeded = [
        "--workers",
        "1",
        "--page-size",
        "2MiB",
        "--size",
        "200KiB",
        "--seed",
        "5",
    ];
    assert_eq!(write(&d, "bytes", 60, &seeded).code, Some(0));
    assert_ne!(dump(&a), dump(&d), "another seed, other content");
}

#[test]
fn no_progress_bar_off_a_terminal_and_a_summary_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.beton");
    let run = write(&out, "scalars", 1000, &[]);
    assert_eq!(run.code, Some(0));
    assert_eq!(
        run.stderr, "",
        "stderr is not a terminal here: nothing drawn"
    );
    assert!(
        run.stdout.starts_with("wrote ") && run.stdout.contains("1000 samples of kind scalars"),
        "{}",
        run.stdout
    );
}

#[test]
fn options_that_do_not_fit_the_kind_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.beton");
    for (kind, options) in [
        ("scalars", &["--size", "10"][..]),
        ("bytes", &["--dtype", "<f4"]),
        ("cifar-raw", &["--shape", "3,4"]),
        ("ndarray", &["--dtype", "<q9"]),
        ("ndarray", &["--dtype", "<c8"]),
        ("images-raw", &["--shape", "32"]),
        ("bytes", &["--page-size", "2MiB", "--size", "3MiB"]),
        ("bytes", &["--size", "1TiB"]),
        ("bytes", &["--size", "4GiB"]),
        ("ndarray", &["--shape", "100000000"]),
    ] {
        let run = write(&out, kind, 3, options);
        assert_eq!(run.code, Some(2), "{kind} {options:?}: {}", run.stderr);
        assert!(run.stderr.starts_with("ffcv: error: "), "{}", run.stderr);
        assert!(!out.exists());
    }
}

#[test]
fn writer_failures_exit_1_and_leave_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.beton");
    write(&out, "scalars", 3, &["--page-size", "1000"]).assert_runtime_error("page size 1000");
    let missing = dir.path().join("no/such/dir/x.beton");
    write(&missing, "scalars", 3, &[]).assert_runtime_error("no/such/dir");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn every_numpy_spelling_of_a_dtype_writes_the_descriptor_ffcv_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a.beton");
    // (what a user types, the descriptor numpy's `dtype.str` gives and FFCV stores)
    for (typed, stored) in [
        ("float32", "<f4"),
        ("f4", "<f4"),
        ("<f4", "<f4"),
        ("=f4", "<f4"),
        (">f4", ">f4"),
        ("single", "<f4"),
        ("int16", "<i2"),
        ("i2", "<i2"),
        ("uint8", "|u1"),
        ("u1", "|u1"),
        ("|u1", "|u1"),
        ("bool", "|b1"),
        ("?", "|b1"),
        ("b1", "|b1"),
        ("float16", "<f2"),
        ("half", "<f2"),
        ("float64", "<f8"),
        ("double", "<f8"),
        ("f8", "<f8"),
        ("int64", "<i8"),
        ("i8", "<i8"),
    ] {
        let run = write(&out, "ndarray", 2, &["--dtype", typed]);
        assert_eq!(run.code, Some(0), "--dtype {typed}: {}", run.stderr);
        let inspect = ffcv(["inspect", "--json", out.to_str().unwrap()]).json();
        assert_eq!(inspect["fields"][1]["dtype"], stored, "--dtype {typed}");
    }
    for unknown in ["float33", "f1", "<float32", "object"] {
        let run = write(&out, "ndarray", 2, &["--dtype", unknown]);
        assert_eq!(run.code, Some(2), "--dtype {unknown}: {}", run.stderr);
        assert!(
            run.stderr.contains("is not a numpy dtype"),
            "{}",
            run.stderr
        );
    }
}
