//! The disk cache of pages: a second cache (a later loader, another process) on the same
//! directory is served from disk without reading the source; entries of the wrong length
//! are discarded and read again with exact bytes; a replaced object never matches the old
//! entries; the directory stays within its cap; two caches writing one directory at once
//! never hand out a wrong byte.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use beton_io::Reader;
use page_cache::{
    CachePolicy, DiskCache, DiskCacheConfig, PageCache, PageSource, ProcessConfig, SourceKind,
};

/// An object in memory that counts the reads it serves.
#[derive(Debug)]
struct FakeObject {
    name: String,
    identity: Option<String>,
    content: Vec<u8>,
    reads: AtomicU64,
}

impl FakeObject {
    fn new(name: &str, identity: Option<&str>, content: Vec<u8>) -> Arc<FakeObject> {
        Arc::new(FakeObject {
            name: name.into(),
            identity: identity.map(str::to_owned),
            content,
            reads: AtomicU64::new(0),
        })
    }

    fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }
}

impl PageSource for FakeObject {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> SourceKind {
        SourceKind::Http
    }
    fn len(&self) -> u64 {
        self.content.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = offset as usize;
        let bytes = self
            .content
            .get(start..start + buf.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "past the end"))?;
        buf.copy_from_slice(bytes);
        self.reads.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn pinned_identity(&self) -> Option<String> {
        self.identity.clone()
    }
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn cache(object: &Arc<FakeObject>, dir: &Path, max_bytes: u64) -> DiskCache {
    let inner: Arc<dyn PageSource> = object.clone();
    DiskCache::new(
        inner,
        &DiskCacheConfig {
            dir: dir.to_owned(),
            max_bytes,
        },
    )
    .unwrap()
}

fn read(cache: &DiskCache, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    cache.read_at(offset, &mut buf).unwrap();
    buf
}

/// Bytes of every file under `dir`, entries and temporary files alike.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for object in std::fs::read_dir(dir).unwrap().flatten() {
        for file in std::fs::read_dir(object.path()).unwrap().flatten() {
            total += file.metadata().unwrap().len();
        }
    }
    total
}

const KIB: usize = 1024;

#[test]
fn a_second_cache_on_the_directory_reads_nothing_from_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let content = pattern(1 << 20, 1);
    let object = FakeObject::new("http://h/data/a.beton", Some("\"v1\""), content.clone());
    let ranges: Vec<(u64, usize)> = (0..8)
        .map(|k| (k * 100_000 + 7, 60 * KIB + k as usize))
        .collect();
    let first = cache(&object, dir.path(), 1 << 30);
    for &(offset, len) in &ranges {
        assert_eq!(read(&first, offset, len), content[offset as usize..][..len]);
    }
    assert_eq!(object.reads(), 8);
    assert_eq!((first.stats().misses, first.stats().stored), (8, 8));
    drop(first);
    let second = cache(&object, dir.path(), 1 << 30);
    for &(offset, len) in &ranges {
        assert_eq!(
            read(&second, offset, len),
            content[offset as usize..][..len]
        );
    }
    assert_eq!(
        object.reads(),
        8,
        "every read of the second cache came from disk"
    );
    let stats = second.stats();
    assert_eq!((stats.hits, stats.misses), (8, 0));
    assert_eq!(
        stats.hit_bytes,
        ranges.iter().map(|r| r.1 as u64).sum::<u64>()
    );
}

#[test]
fn a_process_cache_epoch_through_the_disk_cache_matches_the_file_and_the_next_loader_reads_nothing()
{
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/ffcv-1.0.2/multipage.beton"
    );
    let reader = Arc::new(Reader::open(path).unwrap());
    let object = FakeObject::new(
        "http://h/data/multipage.beton",
        Some("\"v1\""),
        std::fs::read(path).unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let policy = CachePolicy::Process(ProcessConfig::default());
    let n = reader.num_samples();
    let batches: Vec<Vec<u64>> = (0..n)
        .collect::<Vec<_>>()
        .chunks(7)
        .map(<[u64]>::to_vec)
        .collect();
    let mut reads_after = Vec::new();
    for _loader in 0..2 {
        let source: Arc<dyn PageSource> = Arc::new(cache(&object, dir.path(), 1 << 30));
        let pc = PageCache::with_source(Arc::clone(&reader), Some(source), &policy).unwrap();
        let mut epoch = pc.schedule_epoch(&batches).unwrap();
        for (b, batch) in batches.iter().enumerate() {
            epoch.start_batch(b).unwrap();
            for row in reader.alloc_rows().filter(|r| batch.contains(&r.sample_id)) {
                assert_eq!(
                    epoch.read(row.ptr).unwrap(),
                    reader.data_at(row.ptr).unwrap()
                );
            }
        }
        drop(epoch);
        reads_after.push(object.reads());
    }
    assert!(reads_after[0] > 0);
    assert_eq!(
        reads_after[1], reads_after[0],
        "the second loader read only the disk"
    );
}

#[test]
fn an_entry_of_the_wrong_length_is_discarded_and_read_again_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let content = pattern(300 * KIB, 2);
    let object = FakeObject::new("s3://b/k", Some("etag"), content.clone());
    let c = cache(&object, dir.path(), 1 << 30);
    let (a, b) = ((0u64, 100 * KIB), (150_000u64, 100 * KIB));
    read(&c, a.0, a.1);
    read(&c, b.0, b.1);
    let entry = |offset: u64, len: usize| c.dir().join(format!("{offset}-{len}.page"));
    // One entry cut short, one grown by garbage.
    std::fs::OpenOptions::new()
        .write(true)
        .open(entry(a.0, a.1))
        .unwrap()
        .set_len(10)
        .unwrap();
    let mut longer = std::fs::read(entry(b.0, b.1)).unwrap();
    longer.extend_from_slice(b"garbage");
    std::fs::write(entry(b.0, b.1), longer).unwrap();
    assert_eq!(object.reads(), 2);
    assert_eq!(read(&c, a.0, a.1), content[..a.1]);
    assert_eq!(read(&c, b.0, b.1), content[b.0 as usize..][..b.1]);
    assert_eq!(object.reads(), 4, "both pages read again from the source");
    assert_eq!(c.stats().discarded, 2);
    // Stored again whole: the next reads are hits.
    assert_eq!(
        std::fs::metadata(entry(a.0, a.1)).unwrap().len(),
        a.1 as u64
    );
    assert_eq!(read(&c, a.0, a.1), content[..a.1]);
    assert_eq!(object.reads(), 4);
}

#[test]
fn a_replaced_object_never_matches_the_old_entries() {
    let dir = tempfile::tempdir().unwrap();
    let old = pattern(200 * KIB, 3);
    let new = pattern(200 * KIB, 4);
    let v1 = FakeObject::new("http://h/data/x.beton", Some("\"v1\""), old.clone());
    let v2 = FakeObject::new("http://h/data/x.beton", Some("\"v2\""), new.clone());
    let c1 = cache(&v1, dir.path(), 1 << 30);
    assert_eq!(read(&c1, 4096, 64 * KIB), old[4096..][..64 * KIB]);
    let c2 = cache(&v2, dir.path(), 1 << 30);
    assert_ne!(c1.dir(), c2.dir());
    assert_eq!(read(&c2, 4096, 64 * KIB), new[4096..][..64 * KIB]);
    assert_eq!((v2.reads(), c2.stats().hits), (1, 0));
    // The same version through a new cache is still found.
    let c1_again = cache(&v1, dir.path(), 1 << 30);
    assert_eq!(read(&c1_again, 4096, 64 * KIB), old[4096..][..64 * KIB]);
    assert_eq!(c1_again.stats().hits, 1);
}

#[test]
fn a_source_without_an_etag_or_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let object = FakeObject::new("http://h/data/plain.beton", None, vec![0; 100]);
    let inner: Arc<dyn PageSource> = object;
    let err = DiskCache::new(
        inner,
        &DiskCacheConfig {
            dir: dir.path().to_owned(),
            max_bytes: 1 << 20,
        },
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("http://h/data/plain.beton"),
        "{err}"
    );
    assert!(err.to_string().contains("no ETag"), "{err}");
}

#[test]
fn the_directory_stays_within_its_cap_evicting_the_least_recently_used() {
    let dir = tempfile::tempdir().unwrap();
    let content = pattern(2 << 20, 5);
    let object = FakeObject::new("s3://b/cap", Some("e"), content.clone());
    let page = 64 * KIB;
    let cap = 5 * page as u64;
    let c = cache(&object, dir.path(), cap);
    for k in 0..20u64 {
        let offset = k * page as u64;
        assert_eq!(read(&c, offset, page), content[offset as usize..][..page]);
        assert!(
            dir_bytes(dir.path()) <= cap,
            "after page {k}: {}",
            dir_bytes(dir.path())
        );
    }
    assert!(c.stats().evicted >= 15, "{:?}", c.stats());
    // A page larger than the whole cap is served but not stored.
    let big = cap as usize + 1;
    assert_eq!(read(&c, 0, big), content[..big]);
    assert!(dir_bytes(dir.path()) <= cap);
    // A smaller cap given to a new cache is enforced at once.
    let _small = cache(&object, dir.path(), 2 * page as u64);
    assert!(dir_bytes(dir.path()) <= 2 * page as u64);
}

#[test]
fn two_caches_on_one_directory_at_once_hand_out_only_exact_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let content = pattern(1 << 20, 6);
    let object = FakeObject::new(
        "http://h/data/shared.beton",
        Some("\"v1\""),
        content.clone(),
    );
    let page = 32 * KIB;
    let cap = 12 * page as u64;
    let caches = [
        cache(&object, dir.path(), cap),
        cache(&object, dir.path(), cap),
    ];
    std::thread::scope(|scope| {
        for t in 0..8usize {
            let (c, content) = (&caches[t % 2], &content);
            scope.spawn(move || {
                let mut x = t as u64 + 1;
                for _ in 0..300 {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let k = (x >> 33) % 24;
                    let offset = k * page as u64;
                    let got = read(c, offset, page);
                    assert!(got == content[offset as usize..][..page], "page {k}");
                }
            });
        }
    });
    let both: u64 = caches.iter().map(|c| c.stats().hits).sum();
    assert!(both > 0, "some reads were served from disk");
    // Each cache may be behind the other's writes by what it stored since its last scan.
    let slack = 2 * (cap / 16 + page as u64);
    assert!(
        dir_bytes(dir.path()) <= cap + slack,
        "{}",
        dir_bytes(dir.path())
    );
    let _rescan = cache(&object, dir.path(), cap);
    assert!(dir_bytes(dir.path()) <= cap);
}

#[cfg(feature = "remote")]
use ffcv_testkit::servers;

/// Over real HTTP: the second loader's epoch sends the server no range request for data.
#[cfg(feature = "remote")]
#[test]
fn over_http_the_second_loader_sends_no_data_requests() {
    use page_cache::remote::{RemoteConfig, open_url};
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/ffcv-1.0.2/multipage.beton"
    );
    let local = Reader::open(path).unwrap();
    let server = servers::HttpFileServer::start("multipage.beton", std::fs::read(path).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let n = local.num_samples();
    let batches: Vec<Vec<u64>> = (0..n)
        .collect::<Vec<_>>()
        .chunks(5)
        .map(<[u64]>::to_vec)
        .collect();
    let mut gets = Vec::new();
    for _loader in 0..2 {
        let (reader, object) = open_url(
            &server.url(),
            &beton_io::ReaderOptions::default(),
            &RemoteConfig::default(),
        )
        .unwrap();
        let at_open = server.seen().len();
        let inner: Arc<dyn PageSource> = object;
        let disk = DiskCache::new(
            inner,
            &DiskCacheConfig {
                dir: dir.path().to_owned(),
                max_bytes: 1 << 30,
            },
        )
        .unwrap();
        let source: Arc<dyn PageSource> = Arc::new(disk);
        let policy = CachePolicy::Process(ProcessConfig::default());
        let pc = PageCache::with_source(Arc::new(reader), Some(source), &policy).unwrap();
        let mut epoch = pc.schedule_epoch(&batches).unwrap();
        for (b, batch) in batches.iter().enumerate() {
            epoch.start_batch(b).unwrap();
            for row in local.alloc_rows().filter(|r| batch.contains(&r.sample_id)) {
                assert_eq!(
                    epoch.read(row.ptr).unwrap(),
                    local.data_at(row.ptr).unwrap()
                );
            }
        }
        drop(epoch);
        gets.push(server.seen().len() - at_open);
    }
    assert!(gets[0] > 0);
    assert_eq!(
        gets[1], 0,
        "the second loader's pages all came from the disk cache"
    );
}
