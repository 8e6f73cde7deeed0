//! `LoaderBuilder::page_cache_dir` over an `http://` URL: the loader yields the local
//! file's batches, and a second loader on the same directory sends the server no data
//! request (its pages come from the disk); a local file does not use the directory.

#![cfg(feature = "remote")]

use crate::loader_support;
use ffcv_testkit::servers;

use ffcv::{Loader, Order};
use loader_support::write_blobs;
use servers::HttpFileServer;

type Snapshot = (Vec<u64>, Vec<i64>, Vec<u8>);

fn epoch(loader: &mut Loader) -> Vec<Snapshot> {
    loader
        .iter()
        .map(|batch| {
            let batch = batch.unwrap();
            (
                batch.sample_ids().to_vec(),
                batch.get::<i64>("index").unwrap().to_vec(),
                batch.output("blob").unwrap().bytes().to_vec(),
            )
        })
        .collect()
}

fn build(path: &str, cache_dir: &std::path::Path) -> Loader {
    Loader::builder(path)
        .batch_size(16)
        .num_workers(2)
        .order(Order::QuasiRandom)
        .seed(3)
        .os_cache(false)
        .page_cache_dir(cache_dir)
        .page_cache_size(1 << 30)
        .build()
        .unwrap()
}

#[test]
fn a_second_loader_reads_its_pages_from_the_disk_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("pages");
    let path = write_blobs(dir.path(), "cached", 300);
    let server = HttpFileServer::start("cached.beton", std::fs::read(&path).unwrap());
    let want = epoch(&mut build(path.to_str().unwrap(), &cache_dir));
    assert!(
        !cache_dir.exists() || std::fs::read_dir(&cache_dir).unwrap().count() == 0,
        "a local file does not use the directory"
    );
    let data_gets = |from: usize| {
        server.seen()[from..]
            .iter()
            .filter(|s| s.method == "GET")
            .count()
    };
    let mut first = build(&server.url(), &cache_dir);
    let before = server.seen().len();
    assert!(epoch(&mut first) == want, "first loader's batches");
    assert!(data_gets(before) > 0);
    drop(first);
    let mut second = build(&server.url(), &cache_dir);
    let before = server.seen().len();
    assert!(epoch(&mut second) == want, "second loader's batches");
    assert_eq!(data_gets(before), 0, "every page came from the disk cache");
}
