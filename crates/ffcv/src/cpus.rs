//! How many CPUs this process may run on (`num_workers = -1`).

/// CPUs in this process's affinity mask (`sched_getaffinity`), or the standard library's
/// estimate where that call is unavailable; at least 1.
pub fn affinity_cpus() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `cpu_set_t` is plain data for which all-zero is a valid (empty) set;
        // `sched_getaffinity(0, size, &mut set)` writes at most `size` bytes into it, and
        // `CPU_COUNT` only reads the set.
        let count = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
                Some(libc::CPU_COUNT(&set) as usize)
            } else {
                None
            }
        };
        if let Some(n) = count.filter(|&n| n > 0) {
            return n;
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
