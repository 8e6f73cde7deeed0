//! `madvise` hints on the reader's read-only map: the only `unsafe` of the OS cache.

/// An access-pattern hint for the kernel's readahead on the mapped file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// Default readahead around each fault.
    Normal,
    /// Aggressive readahead; pages behind the reader may be dropped early.
    Sequential,
    /// No readahead: each fault reads only the page it needs.
    Random,
}

/// Applies `advice` to the part of `map` from `start` on (rounded down to the OS page).
///
/// Returns the OS error text if the kernel refuses (hints are best effort).
pub(crate) fn advise(map: &[u8], start: usize, advice: Advice) -> Result<(), String> {
    #[cfg(unix)]
    {
        if map.is_empty() {
            return Ok(());
        }
        let os_page = 4096usize;
        let start = (start.min(map.len()) / os_page) * os_page;
        let len = map.len() - start;
        if len == 0 {
            return Ok(());
        }
        let flag = match advice {
            Advice::Normal => libc::MADV_NORMAL,
            Advice::Sequential => libc::MADV_SEQUENTIAL,
            Advice::Random => libc::MADV_RANDOM,
        };
        // The start of a memory map is aligned to the OS page; only advise if that holds.
        let addr = map.as_ptr().wrapping_add(start);
        if !(addr as usize).is_multiple_of(os_page) {
            return Err("map is not page-aligned".into());
        }
        // SAFETY: [addr, addr + len) lies inside `map`, a live mapping borrowed for the
        // duration of the call. These three advice values only tune readahead; they
        // never change the mapping's contents or validity (unlike MADV_DONTNEED on
        // private maps, which is not used here).
        let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, flag) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = (map, start, advice);
        Ok(())
    }
}

/// Asks the OS to drop `path`'s clean pages from its page cache
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`), for cold-cache measurements. Pages that a
/// live map has faulted in, and dirty pages, stay.
pub fn evict_from_os_cache(path: &std::path::Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path)?;
        // SAFETY: a plain system call on a descriptor this function owns; the advice only
        // affects caching, never the file's contents or this process's memory.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "eviction is only implemented on Linux",
        ))
    }
}

/// Bytes of `path` currently in the OS page cache (`mincore` over a fresh map; the
/// last page counts whole).
pub fn os_cached_bytes(path: &std::path::Path) -> std::io::Result<u64> {
    #[cfg(target_os = "linux")]
    {
        let file = std::fs::File::open(path)?;
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| std::io::Error::other("file larger than the address space"))?;
        if len == 0 {
            return Ok(0);
        }
        let os_page = 4096usize;
        let mut resident = vec![0u8; len.div_ceil(os_page)];
        // SAFETY: maps the file read-only and private; the map is never dereferenced
        // (mincore only inspects page-table state), so a concurrent truncation cannot
        // fault here.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `map` is a live mapping of `len` bytes; `resident` has one byte per
        // OS page of it, as mincore requires.
        let rc = unsafe { libc::mincore(map, len, resident.as_mut_ptr()) };
        let err = std::io::Error::last_os_error();
        // SAFETY: unmapping exactly the mapping created above, which nothing references.
        unsafe { libc::munmap(map, len) };
        if rc != 0 {
            return Err(err);
        }
        Ok(resident.iter().filter(|&&r| r & 1 == 1).count() as u64 * os_page as u64)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "residency is only measured on Linux",
        ))
    }
}

/// Faults `map[start..start + len]` in (reading it from storage if the OS does not have
/// it cached), so later reads of it do not block; an error if part of it cannot be
/// backed (a file truncated since it was mapped) instead of a SIGBUS on access.
pub(crate) fn populate(map: &[u8], start: usize, len: usize) -> std::io::Result<()> {
    let Some(range) = map.get(start..start.saturating_add(len)) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "range outside the map",
        ));
    };
    if range.is_empty() {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    {
        let os_page = 4096usize;
        let addr = range.as_ptr() as usize;
        let aligned = addr - addr % os_page;
        let span = range.len() + (addr - aligned);
        // Already in the OS page cache (a warm file): nothing to read. Populating anyway
        // costs about 0.3 µs per 4 KiB page (measured: 19 ms per epoch of 256 MiB), a
        // residency check a hundredth of that.
        let mut resident = vec![0u8; span.div_ceil(os_page)];
        // SAFETY: [aligned, aligned + span) lies inside `map`'s mapping (see below);
        // `resident` has one byte per OS page of it, as mincore requires; mincore only
        // reports page-cache state and never touches the pages.
        let rc =
            unsafe { libc::mincore(aligned as *mut libc::c_void, span, resident.as_mut_ptr()) };
        if rc == 0 && resident.iter().all(|r| r & 1 == 1) {
            return Ok(());
        }
        // Cold: ask for the whole range at once (large reads), then wait for it below;
        // faulting alone reads in small readahead windows.
        // SAFETY: same range as above; MADV_WILLNEED only starts readahead.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, span, libc::MADV_WILLNEED);
        }
        // SAFETY: [aligned, aligned + span) lies inside `map`'s mapping: `range` is inside
        // `map`, and rounding its start down to the OS page stays in the same mapping
        // (mappings start on page boundaries). MADV_POPULATE_READ only faults pages in;
        // it never changes their contents.
        let rc =
            unsafe { libc::madvise(aligned as *mut libc::c_void, span, libc::MADV_POPULATE_READ) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINVAL) {
                // A kernel before 5.14: touch one byte per OS page instead.
                let mut sum = 0u8;
                for b in range.iter().step_by(os_page) {
                    sum = sum.wrapping_add(*b);
                }
                std::hint::black_box(sum);
                return Ok(());
            }
            return Err(e);
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let mut sum = 0u8;
        for b in range.iter().step_by(4096) {
            sum = sum.wrapping_add(*b);
        }
        std::hint::black_box(sum);
        Ok(())
    }
}

/// Starts asynchronous readahead of `len` bytes of `file` at `offset`
/// (`POSIX_FADV_WILLNEED`), so one large page read is fetched in large requests rather
/// than in the small readahead windows a cold `pread` would use. Best effort.
pub(crate) fn will_need(file: &std::fs::File, offset: u64, len: usize) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return;
        };
        // SAFETY: a plain system call on a descriptor borrowed for its duration; the
        // advice only affects caching, never the file's contents or this process's memory.
        unsafe {
            libc::posix_fadvise(file.as_raw_fd(), off, len, libc::POSIX_FADV_WILLNEED);
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, offset, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn populate_checks_its_range_and_accepts_an_empty_one() {
        let data = vec![7u8; 10_000];
        assert!(populate(&data, 0, 10_000).is_ok());
        assert!(populate(&data, 9_000, 0).is_ok());
        assert!(populate(&data, 9_000, 2_000).is_err());
        assert!(populate(&data, usize::MAX, 1).is_err());
    }

    #[test]
    fn advice_on_an_unaligned_or_empty_slice_is_refused_or_ignored() {
        assert!(advise(&[], 0, Advice::Random).is_ok());
        let data = vec![0u8; 3];
        // A heap slice is rarely page-aligned; either way no panic and no UB.
        let _ = advise(&data, 0, Advice::Sequential);
    }
}
