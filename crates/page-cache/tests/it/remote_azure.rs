//! `.beton` blobs in Azure Blob Storage, emulated by Azurite on loopback and configured
//! only through the `AZURE_*` environment variables `object_store` reads: every fixture
//! read through `az://` equals the local read, a blob replaced mid-epoch is an error
//! (never mixed bytes), a missing blob names the URL. Skips, saying why, when Azurite
//! cannot be started (`.ci/run` installs it with npm under `target/azurite`).

#![cfg(feature = "remote")]

use crate::common;
use ffcv_testkit::azurite;

use std::time::Duration;

use azurite::Azurite;
use beton_io::{Reader, ReaderOptions};
use page_cache::SourceKind;
use page_cache::remote::{RemoteConfig, open_url};

fn quick() -> RemoteConfig {
    RemoteConfig {
        request_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(2),
        max_retries: 2,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
        retry_timeout: Duration::from_secs(10),
        concurrency: 8,
        // Small parts, so that pages of the fixtures are read in several requests.
        part_bytes: 64 << 10,
    }
}

/// Reads the whole file at `url` in batches of 3 (see [`common::remote::read_url`]).
fn read_url(url: &str, local: &Reader, after_first: impl FnOnce()) -> Option<String> {
    common::remote::read_url(url, (SourceKind::Azure, &quick()), 3, local, after_first)
}

#[test]
fn http_dates_are_rfc_1123() {
    assert_eq!(azurite::http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_eq!(
        azurite::http_date(1_796_126_400),
        "Tue, 01 Dec 2026 12:00:00 GMT"
    );
    assert_eq!(
        azurite::http_date(951_782_400 + 86_399),
        "Tue, 29 Feb 2000 23:59:59 GMT"
    );
}

/// In its own process, because it sets the environment (the `AZURE_*` variables),
/// before any thread of its own starts.
#[test]
fn azure_blobs_read_like_local_files() {
    ffcv_testkit::own_process(module_path!(), "azure_blobs_read_like_local_files", || {
        let azurite = match Azurite::start() {
            Ok(a) => a,
            Err(why) => {
                eprintln!("SKIPPED azure tests: Azurite unavailable: {why}");
                return;
            }
        };
        let vars = [
            ("AZURE_STORAGE_USE_EMULATOR", "true".to_owned()),
            ("AZURITE_BLOB_STORAGE_URL", azurite.endpoint.clone()),
        ];
        for (k, v) in vars {
            // SAFETY: the test runs alone in its own process (`own_process`), and nothing
            // else there reads or writes the environment concurrently (the servers' threads
            // do not).
            unsafe { std::env::set_var(k, v) };
        }

        for name in common::FIXTURES_WITH_DATA {
            let path = common::fixture(name);
            azurite.put("fixtures", name, &std::fs::read(&path).unwrap());
            let local = Reader::open(&path).unwrap();
            assert_eq!(
                read_url(&format!("az://fixtures/{name}"), &local, || {}),
                None
            );
        }

        // Replaced after batch 0: an error naming the URL and the page.
        let path = common::fixture("multipage.beton");
        let local = Reader::open(&path).unwrap();
        let original = std::fs::read(&path).unwrap();
        let replacement = common::remote::data_replaced(&local, &original);
        azurite.put("fixtures", "replaced.beton", &original);
        let url = "az://fixtures/replaced.beton";
        let err = read_url(url, &local, || {
            azurite.put("fixtures", "replaced.beton", &replacement)
        })
        .expect("the epoch ends with an error");
        assert!(err.starts_with(&format!("{url}: reading page ")), "{err}");
        assert!(err.contains("changed since it was opened"), "{err}");

        let err = open_url(
            "az://fixtures/absent.beton",
            &ReaderOptions::new(),
            &quick(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("az://fixtures/absent.beton: cannot open: HEAD"),
            "{err}"
        );
    });
}
