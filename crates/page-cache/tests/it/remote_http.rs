//! A `.beton` served over plain HTTP with range requests (a loopback server written in
//! the harness) reads exactly as the local file, through faults: 503s, dropped and cut
//! connections are retried; a server that stops or an object replaced mid-epoch ends
//! the epoch with an error naming the URL and the page, and no byte handed out ever
//! differs from the file opened.

#![cfg(feature = "remote")]

use crate::common;
use ffcv_testkit::servers;

use std::sync::Arc;
use std::time::Duration;

use beton_io::{Reader, ReaderOptions};
use page_cache::remote::{ObjectSource, RemoteConfig, open_url};
use page_cache::{CachePolicy, PageCache, PageSource, ProcessConfig};
use servers::{Fault, FaultProxy, HttpFileServer};

/// Short timeouts and quick retries: the tests' servers are on loopback.
fn quick() -> RemoteConfig {
    RemoteConfig {
        request_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        max_retries: 4,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
        retry_timeout: Duration::from_secs(10),
        concurrency: 8,
        ..RemoteConfig::default()
    }
}

fn process_cache(prefetch_ahead: usize) -> CachePolicy {
    CachePolicy::Process(ProcessConfig {
        prefetch_ahead,
        ..ProcessConfig::default()
    })
}

/// Reads every sample in batches of `batch` in file order through `cache`, comparing
/// each allocation with the local file; `after_first` runs once batch 0 is read.
/// Returns how many batches were read before the first error, and that error's text.
fn read_all(
    cache: &PageCache,
    local: &Reader,
    batch: u64,
    after_first: impl FnOnce(),
) -> (usize, Option<String>) {
    let n = local.num_samples();
    let batches: Vec<Vec<u64>> = (0..n)
        .collect::<Vec<_>>()
        .chunks(batch as usize)
        .map(<[u64]>::to_vec)
        .collect();
    let mut rows: Vec<Vec<(u64, u64)>> = vec![Vec::new(); n as usize];
    for r in local.alloc_rows() {
        rows[r.sample_id as usize].push((r.ptr, r.size));
    }
    let mut epoch = cache.schedule_epoch(&batches).unwrap();
    let mut after_first = Some(after_first);
    for (b, samples) in batches.iter().enumerate() {
        if let Err(e) = epoch.start_batch(b) {
            return (b, Some(e.to_string()));
        }
        for &s in samples {
            for &(ptr, _) in &rows[s as usize] {
                let got = epoch.read(ptr).unwrap();
                assert_eq!(got, local.data_at(ptr).unwrap(), "sample {s} at {ptr}");
            }
        }
        if let Some(f) = after_first.take() {
            f();
        }
    }
    (batches.len(), None)
}

fn serve(name: &str) -> (HttpFileServer, Reader) {
    let path = common::fixture(name);
    let server = HttpFileServer::start(name, std::fs::read(&path).unwrap());
    (server, Reader::open(&path).unwrap())
}

#[test]
fn every_fixture_read_over_http_equals_the_local_read() {
    for name in common::FIXTURES_WITH_DATA {
        let (server, local) = serve(name);
        let url = server.url();
        let (reader, source) = open_url(&url, &ReaderOptions::new(), &quick()).unwrap();
        assert_eq!(reader.path().to_str(), Some(url.as_str()));
        assert_eq!(reader.fields(), local.fields());
        assert_eq!(source.len(), local.file_size());
        assert_eq!(source.e_tag(), Some("\"v1\""));
        // os_cache = true is served by the process cache for a remote source.
        let cache = PageCache::with_source(
            Arc::new(reader),
            Some(source.clone() as Arc<dyn PageSource>),
            &CachePolicy::default(),
        )
        .unwrap();
        assert!(matches!(cache, PageCache::Process(_)));
        for batch in [1, 7] {
            assert_eq!(read_all(&cache, &local, batch, || {}).1, None, "{name}");
        }
        // Only ranged GETs of structure and pages, never the whole file.
        let seen = server.seen();
        assert!(seen.iter().all(|s| s.method == "HEAD" || s.range.is_some()));
        let stats = source.stats();
        assert_eq!(stats.failures, 0);
        assert!(stats.requests >= 2, "{name}: {stats:?}");
    }
}

#[test]
fn transient_503s_are_retried_and_the_bytes_are_exact() {
    let (server, local) = serve("multipage.beton");
    let (reader, source) = open_url(&server.url(), &ReaderOptions::new(), &quick()).unwrap();
    let cache = PageCache::with_source(
        Arc::new(reader),
        Some(source as Arc<dyn PageSource>),
        &process_cache(3),
    )
    .unwrap();
    server.fail_next(3);
    assert_eq!(read_all(&cache, &local, 4, || {}).1, None);
    let refused = server.seen().len();
    assert!(refused > 8, "{refused} requests");
}

#[test]
fn dropped_cut_and_refused_connections_are_retried() {
    let (server, local) = serve("multipage.beton");
    let proxy = FaultProxy::start(server.addr());
    let url = server.url_via(proxy.addr());
    let (reader, source) = open_url(&url, &ReaderOptions::new(), &quick()).unwrap();
    let cache = PageCache::with_source(
        Arc::new(reader),
        Some(source as Arc<dyn PageSource>),
        &process_cache(2),
    )
    .unwrap();
    proxy.next(&[
        Fault::Drop,
        Fault::Cut(200),
        Fault::Unavailable,
        Fault::Delay(Duration::from_millis(30)),
        Fault::Cut(5000),
    ]);
    assert_eq!(read_all(&cache, &local, 4, || {}).1, None);
    assert!(proxy.connections() >= 5);
}

#[test]
fn a_server_stopped_mid_epoch_ends_it_with_an_error_naming_url_and_page() {
    let (mut server, local) = serve("multipage.beton");
    let url = server.url();
    let (reader, source) = open_url(&url, &ReaderOptions::new(), &quick()).unwrap();
    let cache = PageCache::with_source(
        Arc::new(reader),
        Some(source as Arc<dyn PageSource>),
        &process_cache(1),
    )
    .unwrap();
    // 40 samples over 8 pages in batches of 4: the last pages are asked for only
    // batches later, after the server is gone.
    let server_ref = &mut server;
    let (read, err) = read_all(&cache, &local, 4, move || server_ref.stop());
    let err = err.expect("the epoch ended with an error");
    assert!((1..10).contains(&read), "{read} batches read");
    assert!(err.starts_with(&format!("{url}: reading page ")), "{err}");
    assert!(err.contains("bytes at offset"), "{err}");
}

fn flipped_data(local: &Reader, original: &[u8]) -> Vec<u8> {
    let start = local.layout().data_region_start as usize;
    let end = local.header().alloc_table_ptr as usize;
    let mut v = original.to_vec();
    for b in &mut v[start..end] {
        *b ^= 0xff;
    }
    v
}

#[test]
fn an_object_replaced_mid_epoch_is_an_error_never_mixed_bytes() {
    for honor_if_match in [true, false] {
        let (server, local) = serve("multipage.beton");
        server.honor_if_match(honor_if_match);
        let url = server.url();
        let (reader, source) = open_url(&url, &ReaderOptions::new(), &quick()).unwrap();
        let cache = PageCache::with_source(
            Arc::new(reader),
            Some(source as Arc<dyn PageSource>),
            &process_cache(1),
        )
        .unwrap();
        let original = std::fs::read(common::fixture("multipage.beton")).unwrap();
        let replacement = flipped_data(&local, &original);
        // read_all compares every byte handed out with the original file.
        let (read, err) = read_all(&cache, &local, 4, || server.replace(replacement));
        let err = err.expect("the epoch ended with an error");
        assert!((1..10).contains(&read), "{read} batches read");
        assert!(err.starts_with(&format!("{url}: reading page ")), "{err}");
        assert!(err.contains("changed since it was opened"), "{err}");
    }
}

#[test]
fn a_missing_object_or_a_bad_url_is_a_clear_error() {
    let (server, _) = serve("multipage.beton");
    let url = server.url().replace("multipage", "nothing");
    let err = open_url(&url, &ReaderOptions::new(), &quick()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{url}: cannot open: HEAD {url}")),
        "{msg}"
    );
    let err = ObjectSource::open("http://", &quick()).unwrap_err();
    assert!(
        err.to_string().contains("an HTTP URL names a file"),
        "{err}"
    );
    let err = ObjectSource::open("ftp://host/x.beton", &quick()).unwrap_err();
    assert!(err.to_string().contains("not an s3://"), "{err}");
}

#[test]
fn a_reader_opened_from_ranges_needs_its_source() {
    let (server, _) = serve("multipage.beton");
    let (reader, _source) = open_url(&server.url(), &ReaderOptions::new(), &quick()).unwrap();
    let err = PageCache::new(Arc::new(reader), &process_cache(3))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("give the process cache its page source"),
        "{err}"
    );
}
