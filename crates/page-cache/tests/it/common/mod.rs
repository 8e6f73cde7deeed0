//! Shared helpers of the page-cache integration tests: fixture paths and a reader that
//! compares every sample's bytes through two epoch contexts; `remote`, what the
//! object-store tests share.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use beton_io::Reader;
use page_cache::{CachePolicy, EpochContext, PageCache, ProcessConfig};

#[cfg(feature = "remote")]
pub mod remote;

/// Path of an FFCV 1.0.2 fixture.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/ffcv-1.0.2"
    ))
    .join(name)
}

/// The fixtures that hold allocations.
pub const FIXTURES_WITH_DATA: &[&str] = &[
    "multipage.beton",
    "page_retry.beton",
    "bytes_ndarray.beton",
    "images_raw.beton",
    "images_jpg.beton",
    "json.beton",
];

/// Allocation pointers of every sample (zero-sized allocations included).
pub fn ptrs_by_sample(reader: &Reader) -> BTreeMap<u64, Vec<u64>> {
    let mut map: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for row in reader.alloc_rows() {
        map.entry(row.sample_id).or_default().push(row.ptr);
    }
    for ptrs in map.values_mut() {
        ptrs.sort_unstable();
        ptrs.dedup();
    }
    map
}

/// A process-cache config with small, test-friendly thread counts.
pub fn process_config(prefetch_ahead: usize, reader_threads: usize) -> ProcessConfig {
    ProcessConfig {
        prefetch_ahead,
        reader_threads,
        ..ProcessConfig::default()
    }
}

/// Runs the epoch `batches` through the OS cache and through a process cache with
/// `config`, asserting that every allocation of every sample reads the same bytes, and
/// returns the process epoch's context (for its counters) after the last batch.
pub fn compare_epoch(
    reader: &Arc<Reader>,
    config: &ProcessConfig,
    batches: &[Vec<u64>],
) -> EpochContext {
    let ptrs = ptrs_by_sample(reader);
    let os = PageCache::new(Arc::clone(reader), &CachePolicy::default()).unwrap();
    let process =
        PageCache::new(Arc::clone(reader), &CachePolicy::Process(config.clone())).unwrap();
    let mut os_epoch = os.schedule_epoch(batches).unwrap();
    let mut pc_epoch = process.schedule_epoch(batches).unwrap();
    for (b, batch) in batches.iter().enumerate() {
        os_epoch.start_batch(b).unwrap();
        pc_epoch.start_batch(b).unwrap();
        for sample in batch {
            for &ptr in ptrs.get(sample).map(Vec::as_slice).unwrap_or(&[]) {
                let expected = os_epoch.read(ptr).unwrap();
                let got = pc_epoch.read(ptr).unwrap();
                assert_eq!(got.len(), expected.len(), "sample {sample} ptr {ptr}");
                assert!(got == expected, "sample {sample} ptr {ptr}: bytes differ");
                assert_eq!(Some(got.len() as u64), reader.alloc_size(ptr));
            }
        }
    }
    pc_epoch
}

/// Cuts `order` into batches of `batch_size` (the last may be short).
pub fn batches_of(order: &[u64], batch_size: usize) -> Vec<Vec<u64>> {
    order
        .chunks(batch_size.max(1))
        .map(<[u64]>::to_vec)
        .collect()
}

/// Bytes a process-cache read of `page` fetches: from the page start to the end of its
/// last allocation (rounded up to 4 KiB blocks with `O_DIRECT`, within the file).
pub fn page_read_bytes(reader: &Reader, page: u64, direct: bool) -> u64 {
    let ps = reader.page_size();
    let used = reader
        .alloc_rows()
        .filter(|r| r.ptr / ps == page)
        .map(|r| r.ptr + r.size - page * ps)
        .max()
        .unwrap_or(0);
    let len = if direct {
        used.div_ceil(4096) * 4096
    } else {
        used
    };
    len.min(reader.file_size() - page * ps)
}
