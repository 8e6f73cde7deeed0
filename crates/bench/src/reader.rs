//! `reader/*` rows: every sample's bytes read through `beton_io::Reader`, beside a plain
//! memcpy of the same bytes in the same order on the same threads.
//!
//! A "read" is what a loader does with a sample: `Reader::field_data` (decode the field's
//! metadata, locate and bound the bytes), then copy them into a destination buffer. The memcpy baseline copies the
//! same byte ranges of the same mapping, precomputed, so the ratio is the Reader's overhead
//! (metadata decoding, allocation lookup, bounds checks) and nothing else.

use std::hint::black_box;

use beton_io::Reader;
use rayon::prelude::*;
use serde_json::json;

use crate::datasets::Dataset;
use crate::report::Row;
use crate::timing;

/// Samples handed to a rayon task at once: large enough to amortise scheduling.
const CHUNK: usize = 64;

/// One sample's bytes as a range of the mapped file.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    len: usize,
}

/// The sample order of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// 0, 1, 2, ...
    Sequential,
    /// A seeded uniform permutation.
    Random,
}

impl Order {
    fn name(self) -> &'static str {
        match self {
            Order::Sequential => "sequential",
            Order::Random => "random",
        }
    }
}

/// Thread-count labels of the rows: one thread, and every CPU.
const THREAD_LABELS: [&str; 2] = ["1t", "all"];

/// The name of the row for `order`, data set `label` and thread label.
fn row_name(order: Order, label: &str, threads: &str) -> String {
    format!("reader/{}/{label}/{threads}", order.name())
}

/// Every row name this suite can produce for data set `label`.
pub fn row_names(label: &str) -> Vec<String> {
    [Order::Sequential, Order::Random]
        .into_iter()
        .flat_map(|order| THREAD_LABELS.map(|threads| row_name(order, label, threads)))
        .collect()
}

/// Measures the rows for `dataset` whose names pass `keep`.
pub fn rows(
    dataset: &Dataset,
    reps: usize,
    threads: usize,
    keep: &dyn Fn(&str) -> bool,
    progress: &dyn Fn(&str),
) -> Result<Vec<Row>, String> {
    let reader = Reader::open(&dataset.path).map_err(|err| err.to_string())?;
    let field = dataset.field.as_str();
    let field_index = reader
        .field_index(field)
        .ok_or_else(|| format!("{}: no field `{field}`", dataset.path.display()))?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|err| format!("cannot start {threads} threads: {err}"))?;
    let mut rows = Vec::new();
    for order in [Order::Sequential, Order::Random] {
        let ids = sample_order(reader.num_samples(), order)?;
        // Validates every sample through the Reader once, and gives the memcpy baseline its ranges.
        let spans = spans(&reader, field_index, &ids)?;
        let total_bytes: usize = spans.iter().map(|span| span.len).sum();
        let max_len = spans.iter().map(|span| span.len).max().unwrap_or(0);
        for (label, n) in THREAD_LABELS.into_iter().zip([1, threads]) {
            let name = row_name(order, &dataset.label, label);
            if !keep(&name) {
                continue;
            }
            progress(&name);
            let through_reader = || -> Result<(), String> {
                let read = |chunk: &[u64], dest: &mut Vec<u8>| {
                    read_chunk(&reader, field_index, chunk, dest)
                };
                run_chunks(&pool, n, &ids, max_len, &read)
            };
            let plain_memcpy = || -> Result<(), String> {
                let whole = reader.bytes().map_err(|e| e.to_string())?;
                let copy = |chunk: &[Span], dest: &mut Vec<u8>| {
                    copy_chunk(whole, chunk, dest);
                    Ok(())
                };
                run_chunks(&pool, n, &spans, max_len, &copy)
            };
            let [reader_time, memcpy_time] =
                timing::interleaved(reps, [&through_reader, &plain_memcpy])?;
            let seconds = reader_time.median();
            let memcpy_seconds = memcpy_time.median();
            let samples = ids.len() as f64;
            let mut row = Row {
                name,
                config: format!(
                    "{}: {} samples of {}, field `{field}`, {} order, {n} thread(s)",
                    dataset
                        .path
                        .file_name()
                        .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
                    ids.len(),
                    dataset.sample_description,
                    order.name()
                ),
                samples_per_sec: samples / seconds,
                bytes_per_sec: total_bytes as f64 / seconds,
                ratio: Some(memcpy_seconds / seconds),
                ratio_to: Some("memcpy".to_owned()),
                ..Row::default()
            };
            row.extra.insert("threads".into(), json!(n));
            row.extra.insert("samples".into(), json!(ids.len()));
            row.extra.insert("payload_bytes".into(), json!(total_bytes));
            row.extra
                .insert("epoch_seconds".into(), reader_time.summary());
            row.extra.insert(
                "memcpy_bytes_per_sec".into(),
                json!(total_bytes as f64 / memcpy_seconds),
            );
            row.extra
                .insert("memcpy_epoch_seconds".into(), memcpy_time.summary());
            if let Some(target) = target_ratio(order, dataset) {
                row.extra.insert("target_ratio".into(), json!(target));
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The targets: sequential 128 KiB reads at >= 80% of memcpy, random 3 KiB at >= 50%.
fn target_ratio(order: Order, dataset: &Dataset) -> Option<f64> {
    match (order, dataset.label.as_str()) {
        (Order::Sequential, "128k") => Some(0.8),
        (Order::Random, "3k") => Some(0.5),
        _ => None,
    }
}

/// Work on one chunk of items with a worker's destination buffer.
type ChunkWork<'a, T> = dyn Fn(&[T], &mut Vec<u8>) -> Result<(), String> + Sync + 'a;

/// Runs `work` over `items` in chunks: on this thread when `threads == 1`, else on the pool;
/// each worker owns one destination buffer of `buffer_len` bytes.
fn run_chunks<T: Sync>(
    pool: &rayon::ThreadPool,
    threads: usize,
    items: &[T],
    buffer_len: usize,
    work: &ChunkWork<'_, T>,
) -> Result<(), String> {
    if threads <= 1 {
        let mut dest = vec![0u8; buffer_len];
        return items
            .chunks(CHUNK)
            .try_for_each(|chunk| work(chunk, &mut dest));
    }
    pool.install(|| {
        items
            .par_chunks(CHUNK)
            .try_for_each_init(|| vec![0u8; buffer_len], |dest, chunk| work(chunk, dest))
    })
}

/// Reads `ids` through the Reader into `dest`, the way a loader's decoder would.
fn read_chunk(reader: &Reader, field: usize, ids: &[u64], dest: &mut [u8]) -> Result<(), String> {
    for &sample in ids {
        let bytes = sample_bytes(reader, field, sample)?;
        let target = dest
            .get_mut(..bytes.len())
            .ok_or("destination buffer too small")?;
        target.copy_from_slice(bytes);
        black_box(&mut *target);
    }
    Ok(())
}

/// Copies the precomputed ranges of `file` into `dest`.
fn copy_chunk(file: &[u8], spans: &[Span], dest: &mut [u8]) {
    for span in spans {
        let source = &file[span.start..span.start + span.len];
        let target = &mut dest[..span.len];
        target.copy_from_slice(source);
        black_box(&mut *target);
    }
}

/// The stored bytes of one sample's field, through the Reader's public API.
fn sample_bytes(reader: &Reader, field: usize, sample: u64) -> Result<&[u8], String> {
    reader
        .field_data(sample, field)
        .map_err(|err| err.to_string())?
        .ok_or_else(|| format!("sample {sample}: the field keeps no bytes"))
}

/// The byte range of every sample in `ids`, in that order (each validated through the Reader).
fn spans(reader: &Reader, field: usize, ids: &[u64]) -> Result<Vec<Span>, String> {
    let base = reader.bytes().map_err(|e| e.to_string())?.as_ptr() as usize;
    ids.iter()
        .map(|&sample| {
            let bytes = sample_bytes(reader, field, sample)?;
            Ok(Span {
                start: bytes.as_ptr() as usize - base,
                len: bytes.len(),
            })
        })
        .collect()
}

/// `0..n` in the given order; Random is a fixed-seed Fisher-Yates shuffle (splitmix64).
fn sample_order(n: u64, order: Order) -> Result<Vec<u64>, String> {
    let len = usize::try_from(n).map_err(|_| format!("{n} samples do not fit in memory"))?;
    let mut ids: Vec<u64> = (0..n).collect();
    if order == Order::Random {
        let mut state = 0x5EED_u64;
        for i in (1..len).rev() {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            // Multiply-shift maps z uniformly enough onto 0..=i for a benchmark order.
            let j = ((u128::from(z) * (i as u128 + 1)) >> 64) as usize;
            ids.swap(i, j);
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::{Order, sample_order};

    #[test]
    fn random_order_is_a_permutation_and_not_the_identity() {
        let ids = sample_order(1000, Order::Random).unwrap();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_ne!(ids, sorted);
        assert_eq!(
            sample_order(5, Order::Sequential).unwrap(),
            vec![0, 1, 2, 3, 4]
        );
    }
}
