//! `.beton` objects in an S3-compatible store (the moto server on loopback, configured
//! through the standard `AWS_*` environment variables) read exactly as the local files,
//! 503s injected by the fault proxy are retried, and an object replaced mid-epoch is an
//! error, never mixed bytes. Skips, saying why, when moto cannot be started (`.ci/run`
//! installs it).

#![cfg(feature = "remote")]

use crate::common;
use ffcv_testkit::servers;

use std::time::Duration;

use beton_io::{Reader, ReaderOptions};
use page_cache::SourceKind;
use page_cache::remote::{RemoteConfig, open_url};
use servers::{Fault, FaultProxy, Moto};

fn quick() -> RemoteConfig {
    RemoteConfig {
        request_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(2),
        max_retries: 4,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
        retry_timeout: Duration::from_secs(20),
        concurrency: 8,
        ..RemoteConfig::default()
    }
}

/// Reads the whole file at `url` in batches of 4 (see [`common::remote::read_url`]).
fn read_url(url: &str, local: &Reader, after_first: impl FnOnce()) -> Option<String> {
    common::remote::read_url(url, (SourceKind::S3, &quick()), 4, local, after_first)
}

/// In its own process, because it sets the process's environment (the `AWS_*`
/// variables) before any thread of its own starts.
#[test]
fn s3_objects_read_like_local_files_through_faults() {
    ffcv_testkit::own_process(
        module_path!(),
        "s3_objects_read_like_local_files_through_faults",
        || {
            let moto = match Moto::start() {
                Ok(m) => m,
                Err(why) => {
                    eprintln!("SKIPPED s3 tests: moto server unavailable: {why}");
                    return;
                }
            };
            let proxy = FaultProxy::start(moto.addr);
            let vars = [
                ("AWS_ENDPOINT_URL", format!("http://{}", proxy.addr())),
                ("AWS_ALLOW_HTTP", "true".into()),
                ("AWS_ACCESS_KEY_ID", "testing".into()),
                ("AWS_SECRET_ACCESS_KEY", "testing".into()),
                ("AWS_REGION", "us-east-1".into()),
            ];
            for (k, v) in vars {
                // SAFETY: the test runs alone in its own process (`own_process`), and nothing
                // else there reads or writes the environment concurrently (the servers' threads
                // do not).
                unsafe { std::env::set_var(k, v) };
            }

            // Every fixture, through S3, gives the bytes of the local read.
            for name in common::FIXTURES_WITH_DATA {
                let path = common::fixture(name);
                moto.put("fixtures", name, &std::fs::read(&path).unwrap());
                let local = Reader::open(&path).unwrap();
                assert_eq!(
                    read_url(&format!("s3://fixtures/{name}"), &local, || {}),
                    None
                );
            }

            // Transient 503s and resets from the proxy: retried, the epoch completes exactly.
            let path = common::fixture("multipage.beton");
            let local = Reader::open(&path).unwrap();
            let url = "s3://fixtures/multipage.beton";
            proxy.next(&[
                Fault::Unavailable,
                Fault::Drop,
                Fault::Unavailable,
                Fault::Cut(300),
            ]);
            assert_eq!(read_url(url, &local, || {}), None);

            // Replaced after batch 0: an error naming the URL and the page; every byte handed
            // out before it was the original's (read_url compares them).
            let original = std::fs::read(&path).unwrap();
            let replacement = common::remote::data_replaced(&local, &original);
            moto.put("fixtures", "replaced.beton", &original);
            let url = "s3://fixtures/replaced.beton";
            let err = read_url(url, &local, || {
                moto.put("fixtures", "replaced.beton", &replacement)
            })
            .expect("the epoch ends with an error");
            assert!(err.starts_with(&format!("{url}: reading page ")), "{err}");
            assert!(err.contains("changed since it was opened"), "{err}");

            // A missing object names the URL.
            let err = open_url(
                "s3://fixtures/absent.beton",
                &ReaderOptions::new(),
                &quick(),
            )
            .unwrap_err()
            .to_string();
            assert!(
                err.starts_with("s3://fixtures/absent.beton: cannot open: HEAD"),
                "{err}"
            );
        },
    );
}
