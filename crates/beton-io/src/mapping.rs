//! The read-only bytes behind a Reader: a memory map of the file (the crate's only `unsafe`
//! code), an owned buffer, or only the structural regions of a file read elsewhere (a
//! remote object: its header, descriptors and metadata, and its allocation table).

use std::fs::File;

use memmap2::Mmap;

/// A read-only view of a whole file.
#[derive(Debug)]
pub(crate) enum Mapping {
    /// The file, memory-mapped, and the open file itself (to re-check its size).
    Map(Mmap, File),
    /// Bytes already in memory.
    Owned(Vec<u8>),
    /// Some byte ranges of a file of `len` bytes (read by range requests); the data
    /// region between them is not held.
    Regions {
        /// The file's size.
        len: u64,
        /// `(start, bytes)` pairs, sorted by start and not overlapping.
        parts: Vec<(u64, Vec<u8>)>,
    },
}

impl Mapping {
    /// Maps `file` read-only and keeps it. The caller has checked that the file is not
    /// empty.
    pub(crate) fn map(file: File) -> std::io::Result<Mapping> {
        // SAFETY: the map is read-only and never handed out as `&mut`. memmap2 requires that the
        // file is not modified or truncated while mapped; a .beton is written once (to a
        // temporary name, then renamed) and only read afterwards. Truncating it under a live
        // Reader is outside this crate's contract (the process would get SIGBUS), as documented
        // on `Reader::open`.
        let map = unsafe { Mmap::map(&file)? };
        Ok(Mapping::Map(map, file))
    }

    /// The whole file's bytes, or `None` when only some regions are held.
    pub(crate) fn whole(&self) -> Option<&[u8]> {
        match self {
            Mapping::Map(m, _) => Some(m),
            Mapping::Owned(v) => Some(v),
            Mapping::Regions { .. } => None,
        }
    }

    /// The file's size in bytes.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Mapping::Regions { len, .. } => *len,
            other => other.whole().map_or(0, |b| b.len() as u64),
        }
    }

    /// Bytes `start..end`, or `None` when they are not all held (outside the file, or in
    /// a region a ranged reader did not read).
    pub(crate) fn get(&self, start: u64, end: u64) -> Option<&[u8]> {
        if start > end || end > self.len() {
            return None;
        }
        if start == end {
            return Some(&[]);
        }
        fn slice(bytes: &[u8], base: u64, start: u64, end: u64) -> Option<&[u8]> {
            let s = usize::try_from(start.checked_sub(base)?).ok()?;
            let e = usize::try_from(end - base).ok()?;
            bytes.get(s..e)
        }
        match self {
            Mapping::Regions { parts, .. } => parts
                .iter()
                .rev()
                .find(|(base, _)| *base <= start)
                .and_then(|(base, bytes)| slice(bytes, *base, start, end)),
            other => slice(other.whole()?, 0, start, end),
        }
    }

    /// The regions held by a `Regions` mapping (nothing for the other kinds).
    pub(crate) fn into_regions(self) -> Vec<(u64, Vec<u8>)> {
        match self {
            Mapping::Regions { parts, .. } => parts,
            _ => Vec::new(),
        }
    }

    /// The mapped file's size now (`fstat` of the open file, so a rename over its path
    /// does not count); `None` for bytes in memory.
    pub(crate) fn current_len(&self) -> Option<std::io::Result<u64>> {
        match self {
            Mapping::Map(_, file) => Some(file.metadata().map(|m| m.len())),
            Mapping::Owned(_) | Mapping::Regions { .. } => None,
        }
    }
}
