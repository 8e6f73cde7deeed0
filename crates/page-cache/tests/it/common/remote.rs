//! What the object-store tests (S3 through moto, Azure through Azurite) share: reading a
//! whole `.beton` object through a process cache against the local file, and the
//! replacement object of the mid-epoch change.

use std::sync::Arc;

use beton_io::{Reader, ReaderOptions};
use page_cache::remote::{RemoteConfig, open_url};
use page_cache::{CachePolicy, PageCache, PageSource, ProcessConfig, SourceKind};

/// Reads the whole object at `url` (opened with `config`, served by a store of `kind`,
/// which gives ETags) in batches of `batch` samples through a process cache, comparing
/// every allocation with `local`; `after_first` runs after batch 0. The error text, if
/// the epoch ended early.
pub fn read_url(
    url: &str,
    (kind, config): (SourceKind, &RemoteConfig),
    batch: usize,
    local: &Reader,
    after_first: impl FnOnce(),
) -> Option<String> {
    let (reader, source) = open_url(url, &ReaderOptions::new(), config).unwrap();
    assert_eq!(source.kind(), kind);
    assert!(source.e_tag().is_some(), "{kind:?} stores give ETags");
    assert_eq!(reader.fields(), local.fields());
    let policy = CachePolicy::Process(ProcessConfig {
        prefetch_ahead: 1,
        ..ProcessConfig::default()
    });
    let cache = PageCache::with_source(
        Arc::new(reader),
        Some(Arc::clone(&source) as Arc<dyn PageSource>),
        &policy,
    )
    .unwrap();
    let ids: Vec<u64> = (0..local.num_samples()).collect();
    let batches: Vec<Vec<u64>> = ids.chunks(batch).map(<[u64]>::to_vec).collect();
    let mut epoch = cache.schedule_epoch(&batches).unwrap();
    let mut after_first = Some(after_first);
    for (b, batch) in batches.iter().enumerate() {
        if let Err(e) = epoch.start_batch(b) {
            return Some(e.to_string());
        }
        for row in local.alloc_rows().filter(|r| batch.contains(&r.sample_id)) {
            assert_eq!(
                epoch.read(row.ptr).unwrap(),
                local.data_at(row.ptr).unwrap(),
                "{url}: sample {} at {}",
                row.sample_id,
                row.ptr
            );
        }
        if let Some(f) = after_first.take() {
            f();
        }
    }
    let stats = source.stats();
    assert!(stats.requests >= stats.reads, "{url}: {stats:?}");
    None
}

/// `original`, the bytes of the file `local` reads, with every byte of its data region
/// changed: the same structure and size, so only the store's ETag tells them apart.
pub fn data_replaced(local: &Reader, original: &[u8]) -> Vec<u8> {
    let mut replacement = original.to_vec();
    let data = local.layout().data_region_start as usize..local.header().alloc_table_ptr as usize;
    for b in &mut replacement[data] {
        *b ^= 0x5a;
    }
    replacement
}
