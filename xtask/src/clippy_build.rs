//! Clippy's lints inside the test build: `verify` compiles the workspace's own crates with
//! `clippy-driver` as the compiler (`RUSTC_WORKSPACE_WRAPPER`), so one build both lints
//! and produces the test binaries.
//!
//! Why not `cargo clippy` and then `cargo test`: `cargo clippy` is a *check* build, and
//! cargo never reuses check results for a real build, so every dependency (cranelift,
//! the Arrow and Parquet readers, the object-store stack, …) was type-checked once for
//! clippy and compiled again for the tests. On a 2-core machine that check build was a
//! third of `verify`. `clippy-driver` is rustc with clippy's lint passes added; run as
//! the workspace wrapper it lints exactly the crates `cargo clippy` lints (the workspace
//! members, not dependencies) and still writes their libraries and executables.
//!
//! Two differences from a plain build, both harmless for tests: the workspace crates are
//! compiled with `--cfg clippy` and without MIR optimisations (clippy-driver turns them
//! off so its MIR lints see the code as written; LLVM still optimises at the profile's
//! level). Every cargo command of `verify` carries the same environment, so the test,
//! doc-test, CUDA-probe and Python steps reuse this build instead of compiling the
//! workspace again.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use crate::command::stdout_of;

/// How `cargo clippy` hands its lint arguments (`-- -D warnings`) to `clippy-driver`: an
/// environment variable whose arguments each end with this separator.
const CLIPPY_ARGS_SEPARATOR: &str = "__CLIPPY_HACKERY__";

/// The lint arguments of `verify`: every warning, rustc's and clippy's, is an error.
const LINT_ARGS: [&str; 2] = ["-D", "warnings"];

/// The environment that makes cargo compile the workspace's crates through
/// `clippy-driver` with [`LINT_ARGS`]; fails, naming the fix, when clippy is not
/// installed for the toolchain.
pub fn lint_env() -> Result<Vec<(&'static str, OsString)>, String> {
    let driver = clippy_driver()?;
    Ok(vec![
        ("RUSTC_WORKSPACE_WRAPPER", driver.into_os_string()),
        ("CLIPPY_ARGS", clippy_args(&LINT_ARGS).into()),
    ])
}

/// `args` in `CLIPPY_ARGS`'s encoding: each argument followed by the separator.
fn clippy_args(args: &[&str]) -> String {
    args.iter()
        .map(|arg| format!("{arg}{CLIPPY_ARGS_SEPARATOR}"))
        .collect()
}

/// `clippy-driver` of the toolchain that runs xtask: the `bin/` of `rustc --print
/// sysroot` (rustup's `RUSTUP_TOOLCHAIN`, set for xtask, picks the same toolchain), where
/// the clippy component installs it.
fn clippy_driver() -> Result<PathBuf, String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = stdout_of(
        Command::new(&rustc).args(["--print", "sysroot"]),
        "rustc --print sysroot",
    )?;
    let sysroot = PathBuf::from(sysroot.trim());
    let driver = sysroot.join("bin").join("clippy-driver");
    if driver.is_file() {
        Ok(driver)
    } else {
        Err(format!(
            "clippy is not installed for this toolchain ({} is missing): run \
             `rustup component add clippy`",
            driver.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles `source` as a library the way cargo would through the wrapper
    /// (`clippy-driver rustc ARGS`), with [`lint_env`]; returns whether it compiled and
    /// what the compiler printed.
    fn compile(name: &str, source: &str) -> (bool, String) {
        let dir = std::env::temp_dir().join(format!("xtask-clippy-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("lib.rs");
        std::fs::write(&file, source).unwrap();
        let env = lint_env().expect("clippy is installed where verify runs");
        // The driver cargo would run: the wrapper the environment names.
        let (_, driver) = env
            .iter()
            .find(|(name, _)| *name == "RUSTC_WORKSPACE_WRAPPER")
            .expect("lint_env names the wrapper");
        let output = Command::new(driver)
            .arg("rustc")
            .args([
                "--edition",
                "2024",
                "--crate-type",
                "lib",
                "--emit",
                "metadata",
            ])
            .arg("--out-dir")
            .arg(&dir)
            .arg(&file)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        std::fs::remove_dir_all(&dir).ok();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    #[test]
    fn a_clippy_warning_fails_the_build_and_clean_code_compiles() {
        let (ok, stderr) = compile("lint", "pub fn len(v: &Vec<u8>) -> usize { v.len() }\n");
        assert!(!ok, "a clippy warning must stop the build:\n{stderr}");
        assert!(
            stderr.contains("clippy::ptr_arg") || stderr.contains("clippy::ptr-arg"),
            "{stderr}"
        );

        let (ok, stderr) = compile("rustc", "pub fn f() { let unused = 1; }\n");
        assert!(!ok, "a rustc warning must stop the build:\n{stderr}");

        let (ok, stderr) = compile("clean", "pub fn len(v: &[u8]) -> usize { v.len() }\n");
        assert!(ok, "{stderr}");
    }
}
