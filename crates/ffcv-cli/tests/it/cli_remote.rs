//! The commands that take a FILE take an `http://` URL (a loopback range server from
//! page-cache's test harness) and print what they print for the local file; a missing
//! object is one `ffcv: error:` line naming the URL, exit status 1. `doctor URL` names
//! the source, its measured latency and bandwidth, and recommends the process cache,
//! QuasiRandom and a prefetch depth; `bench URL` counts the bytes the cache fetched.

use ffcv_testkit::servers;

use std::process::{Command, Output};

use servers::HttpFileServer;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/ffcv-1.0.2/multipage.beton"
);

fn ffcv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ffcv"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(args: &[&str]) -> String {
    let out = ffcv(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn inspect_dump_and_order_of_a_url_match_the_local_file() {
    let server = HttpFileServer::start("multipage.beton", std::fs::read(FIXTURE).unwrap());
    let url = server.url();
    let file_url = format!("file://{FIXTURE}");
    for args in [
        vec!["dump", "URL"],
        vec![
            "order",
            "URL",
            "--order",
            "quasi-random",
            "--seed",
            "3",
            "--batch-size",
            "4",
        ],
    ] {
        let with = |f: &str| -> Vec<String> {
            args.iter()
                .map(|a| {
                    if *a == "URL" {
                        f.to_string()
                    } else {
                        a.to_string()
                    }
                })
                .collect()
        };
        let local = stdout(&with(FIXTURE).iter().map(String::as_str).collect::<Vec<_>>());
        let remote = stdout(&with(&url).iter().map(String::as_str).collect::<Vec<_>>());
        let file = stdout(
            &with(&file_url)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        assert_eq!(remote, local, "{args:?}");
        assert_eq!(file, local, "{args:?}");
    }
    let local = stdout(&["inspect", FIXTURE, "--json"]).replace(FIXTURE, "FILE");
    let remote = stdout(&["inspect", &url, "--json"]).replace(&url, "FILE");
    assert_eq!(remote, local);
}

#[test]
fn a_missing_object_is_one_error_line_naming_the_url() {
    let server = HttpFileServer::start("multipage.beton", std::fs::read(FIXTURE).unwrap());
    let url = server.url().replace("multipage", "absent");
    let out = ffcv(&["inspect", &url]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("ffcv: error: {url}: cannot open")),
        "{err}"
    );
}

/// A fixture whose loader can be built over a URL (the bytes field of `multipage.beton`
/// cannot be, yet: its decoder reads sample data at build time).
const IMAGES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/ffcv-1.0.2/images_raw.beton"
);

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&stdout(args)).unwrap()
}

#[test]
fn doctor_of_a_url_names_the_source_and_recommends_the_process_cache() {
    let server = HttpFileServer::start("images_raw.beton", std::fs::read(IMAGES).unwrap());
    let url = server.url();
    for measure in [false, true] {
        let mut args = vec!["doctor", &url, "--batch-size", "2", "--json"];
        if measure {
            args.extend(["--time-budget", "2"]);
        } else {
            args.push("--no-measure");
        }
        let report = json(&args);
        let source = &report["facts"]["source"];
        assert_eq!(source["kind"], "http", "{source}");
        assert_eq!(source["remote"], true);
        assert!(source["request_latency_seconds"].as_f64().unwrap() > 0.0);
        assert!(source["bandwidth_bytes_per_sec"].as_f64().unwrap() > 0.0);
        // 5 header reads and up to 8 whole pages, each at least one byte.
        let requests = source["probe_requests"].as_u64().unwrap();
        assert!((6..=13).contains(&requests), "{source}");
        assert!(source["probe_bytes"].as_u64().unwrap() >= requests - 5);
        assert_eq!(source["probe_error"], serde_json::Value::Null);

        let rules = &report["rules"];
        assert_eq!(rules["os_cache"], false, "never os_cache=true for a URL");
        assert_eq!(rules["order"], "quasi-random");
        assert_eq!(rules["remote"], true);
        let ids: Vec<&str> = rules["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        assert!(ids.contains(&"remote-source"), "{ids:?}");
        assert!(ids.contains(&"remote-prefetch"), "{ids:?}");

        let recommended = &report["recommended"];
        assert_eq!(recommended["os_cache"], false, "{recommended}");
        assert_eq!(recommended["order"], "quasi-random");
        let command = report["command"].as_str().unwrap();
        assert!(command.contains("--no-os-cache"), "{command}");
        let depth: u64 = command
            .split("--prefetch-ahead ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no --prefetch-ahead in {command}"));
        assert!((3..=64).contains(&depth), "{command}");
        if measure {
            let trials = report["trials"].as_array().unwrap();
            assert!(!trials.is_empty());
            for trial in trials {
                assert_eq!(trial["knobs"]["os_cache"], false, "{trial}");
            }
            // The window's storage reads are the cache's range requests, not /proc's
            // (which counts none for a socket): the same figure twice.
            let measured = &trials[0]["measurement"];
            assert!(measured["read_bytes"].is_u64(), "{measured}");
            assert_eq!(
                measured["read_bytes"], measured["storage_bytes_read"],
                "{measured}"
            );
        }
    }
    let text = stdout(&["doctor", &url, "--batch-size", "2", "--no-measure"]);
    assert!(
        text.contains("  source        http object, request latency "),
        "{text}"
    );
    assert!(text.contains("--no-os-cache"), "{text}");
    assert!(text.contains("remote-prefetch: "), "{text}");
    // A local file is named as one, and probed for nothing.
    let local = json(&[
        "doctor",
        FIXTURE,
        "--batch-size",
        "2",
        "--no-measure",
        "--json",
    ]);
    assert_eq!(local["facts"]["source"]["kind"], "local");
    assert_eq!(local["facts"]["source"]["probe_requests"], 0);
    assert_eq!(
        local["facts"]["source"]["request_latency_seconds"],
        serde_json::Value::Null
    );
}

#[test]
fn bench_of_a_url_counts_the_bytes_the_cache_fetched() {
    let bytes = std::fs::read(IMAGES).unwrap();
    let len = bytes.len() as u64;
    let server = HttpFileServer::start("images_raw.beton", bytes);
    let url = server.url();
    let report = json(&[
        "bench",
        &url,
        "--batch-size",
        "2",
        "--epochs",
        "1",
        "--warmup",
        "0",
        "--json",
    ]);
    assert_eq!(report["remote"], true);
    let read = report["storage_bytes_read"].as_u64().unwrap();
    assert!(read > 0, "{report}");
    assert!(read <= len, "whole pages of a {len}-byte object: {report}");
    assert_eq!(report["cache_bytes_read"].as_u64().unwrap(), read);
    assert!(report["read_amplification"].as_f64().unwrap() > 0.0);
}
