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
