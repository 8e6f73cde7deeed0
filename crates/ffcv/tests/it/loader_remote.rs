//! `Loader::builder` over an `http://` URL (a loopback range server from page-cache's test
//! harness) yields, under every order, exactly the batches of the same loader over the
//! local file; `os_cache = true` is served by the process cache; a server that stops
//! mid-epoch ends the epoch with an error naming the URL and the page, and the loader's
//! threads end.

#![cfg(feature = "remote")]

use crate::loader_support;
use ffcv_testkit::servers;

use std::time::Duration;

use ffcv::{Loader, Order, RemoteConfig};
use loader_support::write_blobs;
use servers::HttpFileServer;

fn quick() -> RemoteConfig {
    RemoteConfig {
        request_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        max_retries: 3,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
        retry_timeout: Duration::from_secs(10),
        concurrency: 8,
        ..RemoteConfig::default()
    }
}

type Snapshot = (Vec<u64>, Vec<i64>, Vec<u8>);

fn epoch(loader: &mut Loader) -> Result<Vec<Snapshot>, String> {
    let mut out = Vec::new();
    for batch in loader.iter() {
        let batch = batch.map_err(|e| e.to_string())?;
        out.push((
            batch.sample_ids().to_vec(),
            batch.get::<i64>("index").unwrap().to_vec(),
            batch.output("blob").unwrap().bytes().to_vec(),
        ));
    }
    Ok(out)
}

#[test]
fn a_url_loads_the_batches_of_the_local_file_under_every_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "remote", 300);
    let server = HttpFileServer::start("remote.beton", std::fs::read(&path).unwrap());
    for order in [Order::Sequential, Order::Random, Order::QuasiRandom] {
        let build = |p: &str, os_cache: bool| {
            Loader::builder(p)
                .batch_size(16)
                .num_workers(2)
                .order(order.clone())
                .seed(7)
                .os_cache(os_cache)
                .remote_config(quick())
                .build()
                .unwrap()
        };
        let local = path.to_str().unwrap();
        let mut mapped = build(local, true);
        let mut copied = build(local, false);
        // Default os_cache = true: mapped to the process cache for a URL.
        let mut remote = build(&server.url(), true);
        let mut file_url = build(&format!("file://{local}"), true);
        for e in 0..2 {
            let want = epoch(&mut mapped).unwrap();
            assert!(
                epoch(&mut remote).unwrap() == want,
                "{order:?} epoch {e}: http differs"
            );
            assert!(
                epoch(&mut copied).unwrap() == want,
                "{order:?} epoch {e}: process cache differs"
            );
            assert!(
                epoch(&mut file_url).unwrap() == want,
                "{order:?} epoch {e}: file:// differs"
            );
        }
    }
}

#[test]
fn a_server_stopped_mid_epoch_is_an_error_naming_url_and_page() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_blobs(dir.path(), "stopped", 300);
    let mut server = HttpFileServer::start("stopped.beton", std::fs::read(&path).unwrap());
    let url = server.url();
    let mut loader = Loader::builder(&url)
        .batch_size(8)
        .num_workers(1)
        .batches_ahead(1)
        .os_cache(false)
        .prefetch_ahead(1)
        .remote_config(quick())
        .build()
        .unwrap();
    let mut it = loader.iter();
    let first = it.next().unwrap().unwrap();
    drop(first);
    server.stop();
    let err = it
        .find_map(|b| b.err())
        .expect("the epoch ends with an error")
        .to_string();
    assert!(err.contains(&url) && err.contains("reading page"), "{err}");
}
