//! The read-only bytes behind a Reader: a memory map of the file (the crate's only `unsafe`
//! code), an owned buffer, only the structural regions of a file read elsewhere (a
//! remote object: its header, descriptors and metadata, and its allocation table), or
//! several local files mapped side by side into one address range (a set of shards read
//! as one file, see `concat.rs`).

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
    /// Several files mapped at fixed offsets of one reserved range (shards).
    Stitched(Stitched),
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
            Mapping::Stitched(s) => Some(s.bytes()),
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

    /// The open file of a mapped file (`None` for the other kinds).
    pub(crate) fn file(&self) -> Option<&File> {
        match self {
            Mapping::Map(_, file) => Some(file),
            _ => None,
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
            Mapping::Stitched(s) => Some(s.current_len()),
            Mapping::Owned(_) | Mapping::Regions { .. } => None,
        }
    }
}

/// One file of a [`Stitched`] mapping: where it sits and how long it was when mapped.
#[derive(Debug)]
pub(crate) struct StitchedFile {
    /// The open file (kept to re-check its size).
    pub(crate) file: File,
    /// Its offset in the stitched range (a multiple of the OS page size).
    pub(crate) base: u64,
    /// Its size when mapped.
    pub(crate) len: u64,
}

/// A read-only range of `len` bytes in which each file of `files` is mapped at its base
/// and every other byte comes from `fill` (the synthetic structure of a shard set): the
/// OS cache reads shards through one contiguous slice, as it reads a single file.
#[derive(Debug)]
pub(crate) struct Stitched {
    ptr: *mut u8,
    len: usize,
    /// The reserved length (`len` rounded up to the OS page size).
    reserved: usize,
    files: Vec<StitchedFile>,
}

// SAFETY: the range is read-only after construction (`mprotect(PROT_READ)`), never handed
// out as `&mut`, and unmapped only in `Drop`; sharing `&[u8]` views of it across threads
// is as safe as sharing a `memmap2::Mmap`.
unsafe impl Send for Stitched {}
// SAFETY: as for `Send`: every access after construction is a read.
unsafe impl Sync for Stitched {}

impl Stitched {
    /// Reserves `len` bytes, copies each `(offset, bytes)` of `fill` into them, then maps
    /// each file of `files` over its place (`MAP_FIXED`). The caller guarantees that the
    /// files' bases are multiples of the OS page size, that no two files and no fill
    /// part overlap, and that every part lies inside `len`.
    pub(crate) fn new(
        len: u64,
        fill: &[(u64, &[u8])],
        files: Vec<StitchedFile>,
    ) -> std::io::Result<Stitched> {
        let os_page = page_size();
        let len_usize = usize::try_from(len).map_err(|_| std::io::Error::other("too large"))?;
        let reserved = len_usize
            .checked_next_multiple_of(os_page)
            .ok_or_else(|| std::io::Error::other("too large"))?
            .max(os_page);
        for f in &files {
            let end = f.base.checked_add(f.len);
            if !(f.base as usize).is_multiple_of(os_page) || end.is_none_or(|e| e > len) {
                return Err(std::io::Error::other(format!(
                    "a file at offset {} of {} bytes does not fit the stitched range",
                    f.base, f.len
                )));
            }
        }
        for (offset, bytes) in fill {
            if offset
                .checked_add(bytes.len() as u64)
                .is_none_or(|e| e > len)
            {
                return Err(std::io::Error::other("a fill part lies outside the range"));
            }
        }
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // From here `Drop` unmaps the whole reservation, whatever fails next.
        let mut stitched = Stitched {
            ptr: ptr.cast(),
            len: len_usize,
            reserved,
            files: Vec::with_capacity(files.len()),
        };
        for (offset, bytes) in fill {
            // SAFETY: checked above that `offset + bytes.len() <= len <= reserved`; the
            // range is writable and nothing else refers to it yet.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    stitched.ptr.add(*offset as usize),
                    bytes.len(),
                );
            }
        }
        for f in files {
            if f.len > 0 {
                use std::os::fd::AsRawFd;
                // SAFETY: the target `ptr + base .. + len` lies inside our own
                // reservation (checked above, base page-aligned), so MAP_FIXED replaces
                // only pages this value owns; the file is mapped read-only and shared,
                // as `memmap2::Mmap::map` does, and must not be truncated while mapped
                // (the contract of `Reader::open`).
                let at = unsafe {
                    libc::mmap(
                        stitched.ptr.add(f.base as usize).cast(),
                        f.len as usize,
                        libc::PROT_READ,
                        libc::MAP_SHARED | libc::MAP_FIXED,
                        f.file.as_raw_fd(),
                        0,
                    )
                };
                if at == libc::MAP_FAILED {
                    return Err(std::io::Error::last_os_error());
                }
            }
            stitched.files.push(f);
        }
        // SAFETY: our own reservation; from now on it is only read.
        if unsafe { libc::mprotect(stitched.ptr.cast(), reserved, libc::PROT_READ) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stitched)
    }

    /// The whole range.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` is mapped readable for as long as `self` lives and is
        // never written after `new` returned.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The range's length now: its length while every file keeps its size, else the
    /// offset where the first shrunk file now ends (so the loader's truncation check
    /// sees a shard truncated in place).
    fn current_len(&self) -> std::io::Result<u64> {
        for f in &self.files {
            let now = f.file.metadata()?.len();
            if now < f.len {
                return Ok(f.base + now);
            }
        }
        Ok(self.len as u64)
    }
}

impl Drop for Stitched {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the reservation made in `new` (and the file maps inside
        // it); no slice of it outlives `self`, whose borrows end before drop.
        unsafe {
            libc::munmap(self.ptr.cast(), self.reserved);
        }
    }
}

/// The OS page size.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}
