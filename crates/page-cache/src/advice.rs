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
