//! Giving freed heap memory back to the kernel between the doctor's measurements.
//!
//! The doctor measures several configurations in one process, one loader after another.
//! A dropped loader's batch slots and buffers go back to the allocator, and glibc's
//! `malloc` keeps much of that memory mapped for later allocations, so it still counts as
//! the process's anonymous memory (and in its cgroup). The next measurement's "memory
//! held" would then include the previous configuration's. `malloc_trim(0)` hands the free
//! pages of every arena back first.

/// Returns the allocator's free memory to the kernel (glibc; elsewhere nothing).
pub fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only walks and trims the allocator's own free lists; it takes
    // the arenas' locks itself and touches no memory the program holds.
    unsafe {
        libc::malloc_trim(0);
    }
}
