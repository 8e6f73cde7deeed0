//! `ffcv dump URL`: a reader of only the bytes the dump prints. The object's structure
//! (header, field descriptors, metadata, allocation table) and the allocations of the
//! samples asked for are fetched by range requests into a zero-filled buffer the size of
//! the object, which `Reader::from_vec` validates as usual; bytes nobody reads are never
//! fetched, and their zero pages are never touched, so they cost no memory.

use std::ops::Range;
use std::sync::Arc;

use beton_io::{Reader, ReaderOptions};

/// Ranges closer than this are fetched by one request (a request's latency costs more
/// than this many bytes on any real link).
const MERGE_GAP: u64 = 1 << 20;

/// The reader `dump` prints `samples` from: `dataset`'s own for a local file; for a
/// remote one, the sparse copy described above.
pub fn reader_for(dataset: ffcv::Dataset, samples: Range<u64>) -> ffcv::Result<Arc<Reader>> {
    let Some(source) = dataset.source else {
        return Ok(dataset.reader);
    };
    let ranged = dataset.reader;
    let path = ranged.path().to_owned();
    let len = source.len();
    let layout = ranged.layout();
    let mut wanted = vec![
        0..layout.data_region_start.min(len),
        ranged.header().alloc_table_ptr.min(len)..len,
    ];
    wanted.extend(
        ranged
            .alloc_rows()
            .filter(|r| samples.contains(&r.sample_id))
            .map(|r| r.ptr..r.ptr.saturating_add(r.size).min(len)),
    );
    let ranges = merge(wanted, MERGE_GAP);
    let mut bytes =
        usize::try_from(len)
            .ok()
            .and_then(zeroed)
            .ok_or_else(|| ffcv::Error::Config {
                path: path.clone(),
                reason: format!(
                    "cannot reserve address space for the {len}-byte remote object; copy it to a \
                 local file first"
                ),
                cause: None,
            })?;
    for r in &ranges {
        // In bounds: every range was clipped to len, the buffer's length.
        let buf = &mut bytes[r.start as usize..r.end as usize];
        source
            .read_at(r.start, buf)
            .map_err(|e| ffcv::Error::Setup {
                path: path.clone(),
                what: "range read for dump",
                source: e,
            })?;
    }
    tracing::debug!(
        url = %path.display(),
        requests = ranges.len(),
        bytes = ranges.iter().map(|r| r.end - r.start).sum::<u64>(),
        "dump read only the samples asked for"
    );
    Ok(Arc::new(Reader::from_vec(
        path,
        bytes,
        &ReaderOptions::default(),
    )?))
}

/// `ranges` sorted and merged where they overlap or lie less than `gap` apart; empty
/// ones dropped.
fn merge(mut ranges: Vec<Range<u64>>, gap: u64) -> Vec<Range<u64>> {
    ranges.retain(|r| r.start < r.end);
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(gap) => {
                last.end = last.end.max(r.end);
            }
            _ => out.push(r),
        }
    }
    out
}

/// A zero-filled buffer of `len` bytes whose pages are only committed when written (the
/// allocator's zeroed allocation: fresh anonymous memory for large sizes), or `None` if
/// the address space cannot be had. `vec![0; len]` would abort on failure instead.
fn zeroed(len: usize) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(len).ok()?;
    // SAFETY: `layout` has a non-zero size (len > 0), as `alloc_zeroed` requires.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `len` bytes
    // of alignment 1, which is a `Vec<u8>`'s for capacity `len`; all `len` bytes are
    // initialised (zeroed), and the Vec becomes the allocation's only owner.
    Some(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

#[cfg(test)]
mod tests {
    use super::{merge, zeroed};

    #[test]
    fn ranges_merge_when_they_overlap_or_are_close() {
        assert_eq!(
            merge(vec![50..60, 0..10, 12..20, 5..8, 30..30, 100..200], 5),
            vec![0..20, 50..60, 100..200]
        );
        assert_eq!(merge(vec![0..10, 15..20], 5), vec![0..20]);
        assert_eq!(merge(vec![0..10, 16..20], 5), vec![0..10, 16..20]);
        assert!(merge(vec![], 5).is_empty());
    }

    #[test]
    fn a_zeroed_buffer_is_zero_and_an_impossible_one_is_none() {
        let v = zeroed(1 << 20).unwrap();
        assert_eq!(v.len(), 1 << 20);
        assert!(v.iter().all(|&b| b == 0));
        assert_eq!(zeroed(0), Some(Vec::new()));
        assert!(zeroed(usize::MAX).is_none());
    }
}
