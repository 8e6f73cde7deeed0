//! The read-only bytes behind a Reader: a memory map of the file (the crate's only `unsafe`
//! code) or an owned buffer.

use std::fs::File;

use memmap2::Mmap;

/// A read-only view of a whole file.
#[derive(Debug)]
pub(crate) enum Mapping {
    /// The file, memory-mapped, and the open file itself (to re-check its size).
    Map(Mmap, File),
    /// Bytes already in memory.
    Owned(Vec<u8>),
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

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Mapping::Map(m, _) => m,
            Mapping::Owned(v) => v,
        }
    }

    /// The mapped file's size now (`fstat` of the open file, so a rename over its path
    /// does not count); `None` for bytes in memory.
    pub(crate) fn current_len(&self) -> Option<std::io::Result<u64>> {
        match self {
            Mapping::Map(_, file) => Some(file.metadata().map(|m| m.len())),
            Mapping::Owned(_) => None,
        }
    }
}
