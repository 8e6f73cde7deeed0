//! The read-only memory map of a `.beton` file: the crate's only `unsafe` code.

use std::fs::File;

use memmap2::Mmap;

/// A read-only view of a whole file.
#[derive(Debug)]
pub(crate) struct Mapping {
    map: Mmap,
}

impl Mapping {
    /// Maps `file` read-only. The caller has checked that the file is not empty.
    pub(crate) fn map(file: &File) -> std::io::Result<Mapping> {
        // SAFETY: the map is read-only and never handed out as `&mut`. memmap2 requires that the
        // file is not modified or truncated while mapped; a .beton is written once (to a
        // temporary name, then renamed) and only read afterwards. Truncating it under a live
        // Reader is outside this crate's contract (the process would get SIGBUS), as documented
        // on `Reader::open`.
        let map = unsafe { Mmap::map(file)? };
        Ok(Mapping { map })
    }

    /// The mapped bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }
}
