//! Finding the CUDA driver and NVRTC shared libraries at run time, without panicking.
//!
//! cudarc loads both lazily and panics when a library is missing, so every entry point of
//! this crate asks here first. NVRTC often lives outside the loader's search path (under
//! `/usr/local/cuda*/lib64`); when `LD_LIBRARY_PATH` does not name it, we load it from there by
//! full path once, and cudarc's later load by soname then finds the already loaded library.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// True when the CUDA driver library (`libcuda.so`) can be loaded.
pub fn driver_available() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries `dlopen` on a list of library names and closes
    // what it opened; loading the NVIDIA driver library runs no code we depend on.
    *PRESENT.get_or_init(|| unsafe { cudarc::driver::sys::is_culib_present() })
}

/// True when NVRTC can be loaded, after trying the usual CUDA install directories.
pub fn nvrtc_available() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| {
        if nvrtc_loadable() {
            return true;
        }
        for dir in cuda_lib_dirs() {
            if preload_nvrtc_from(&dir) && nvrtc_loadable() {
                tracing::info!(dir = %dir.display(), "loaded NVRTC from a CUDA install directory");
                return true;
            }
        }
        false
    })
}

fn nvrtc_loadable() -> bool {
    // SAFETY: as in `driver_available`: a `dlopen`/`dlclose` probe of NVRTC's names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Candidate directories: `$CUDA_HOME`, `$CUDA_PATH`, then `/usr/local/cuda*` newest name first.
fn cuda_lib_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            dirs.push(Path::new(&root).join("lib64"));
        }
    }
    let mut installs: Vec<PathBuf> = std::fs::read_dir("/usr/local")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().as_bytes().starts_with(b"cuda"))
        .map(|e| e.path().join("lib64"))
        .collect();
    installs.sort();
    installs.reverse();
    dirs.extend(installs);
    dirs.retain(|d| d.is_dir());
    dirs
}

/// Loads NVRTC's builtins and then NVRTC itself from `dir`, globally and for the life of the
/// process. Returns whether NVRTC itself loaded.
fn preload_nvrtc_from(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    names.sort();
    let named = |prefix: &[u8]| {
        names
            .iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.as_bytes().starts_with(prefix))
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    // NVRTC opens its builtins by soname while compiling; loaded first, they are found.
    if let Some(builtins) = named(b"libnvrtc-builtins.so").first() {
        dlopen_global(builtins);
    }
    named(b"libnvrtc.so").iter().any(|p| dlopen_global(p))
}

fn dlopen_global(path: &Path) -> bool {
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c_path` is a valid NUL-terminated string that outlives the call. The handle is
    // deliberately never closed: the library must stay loaded while cudarc uses it, which is
    // until the process exits.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    !handle.is_null()
}
