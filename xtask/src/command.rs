//! Running commands from xtask: in the workspace root, with inherited stdio, without the
//! package variables `cargo run` gave xtask, a non-zero status turned into an error that
//! shows the command.

use std::path::Path;
use std::process::Command;

/// Whether `name` is one of the variables `cargo run` sets for the program it runs
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, …, here xtask's own). `CARGO` (which cargo)
/// is not: xtask passes it on on purpose.
pub fn is_cargo_run_variable(name: &str) -> bool {
    ["CARGO_PKG_", "CARGO_MANIFEST_"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
        || matches!(
            name,
            "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE"
        )
}

/// Removes xtask's `cargo run` variables from `command`'s environment. Build scripts
/// declare `rerun-if-env-changed` on some of them (ring's on `CARGO_MANIFEST_DIR` and
/// `CARGO_PKG_NAME`), so a cargo started with xtask's values and a plain `cargo test` or
/// `pip install` would each find the other's build stale and rebuild ring and everything
/// above it (rustls, reqwest, object_store, page-cache, the facade) every time they take
/// turns.
pub fn without_cargo_run_env(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(is_cargo_run_variable) {
            command.env_remove(&name);
        }
    }
    command
}

/// Runs `command` in the workspace root with inherited stdio (less xtask's `cargo run`
/// variables, [`without_cargo_run_env`]); fails on a non-zero status.
pub fn run(root: &Path, command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let status = without_cargo_run_env(command)
        .current_dir(root)
        .status()
        .map_err(|err| format!("cannot run {shown}: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({status})"))
    }
}

/// Makes the virtual environment `venv` with `python3 -m venv` (`FFCV_PYTHON` names
/// another interpreter) unless it exists, then installs `packages` into it from the
/// package index (already installed ones are kept).
pub fn venv_with(root: &Path, venv: &Path, packages: &[&str]) -> Result<(), String> {
    let python = venv.join("bin").join("python");
    if !python.exists() {
        let base = std::env::var_os("FFCV_PYTHON").unwrap_or_else(|| "python3".into());
        run(root, Command::new(&base).args(["-m", "venv"]).arg(venv))?;
    }
    run(
        root,
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(packages),
    )
}

/// Runs `command` (shown in errors as `shown`) and returns what it printed on stdout; a
/// failure to start, a non-zero status (with its stderr) or non-UTF-8 output is an error.
pub fn stdout_of(command: &mut Command, shown: &str) -> Result<String, String> {
    let output = command
        .output()
        .map_err(|err| format!("cannot run `{shown}`: {err}"))?;
    if !output.status.success() {
        return Err(format!(
            "`{shown}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    String::from_utf8(output.stdout).map_err(|_| format!("`{shown}` printed non-UTF-8 output"))
}

/// A `cargo` command: the cargo that runs xtask, so `cargo +toolchain xtask` keeps its
/// toolchain.
pub fn cargo_command() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs `cargo ARGS` in the workspace root with inherited stdio (less xtask's `cargo run`
/// variables).
pub fn run_cargo(root: &Path, args: &[&str]) -> Result<(), String> {
    run(root, cargo_command().args(args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_package_variables_of_cargo_run_are_dropped() {
        for name in [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_NAME",
            "CARGO_PRIMARY_PACKAGE",
        ] {
            assert!(is_cargo_run_variable(name), "{name}");
        }
        for name in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "RUSTFLAGS",
            "PATH",
        ] {
            assert!(!is_cargo_run_variable(name), "{name}");
        }
    }

    #[test]
    fn a_child_does_not_see_xtask_package_variables() {
        // `cargo test` sets CARGO_MANIFEST_DIR and CARGO_PKG_NAME for this test binary, as
        // `cargo run` does for xtask.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let output = without_cargo_run_env(&mut Command::new("env"))
            .output()
            .expect("env runs");
        let seen = String::from_utf8_lossy(&output.stdout);
        assert!(
            !seen.lines().any(|l| l.starts_with("CARGO_MANIFEST_DIR=")),
            "{seen}"
        );
        assert!(
            !seen.lines().any(|l| l.starts_with("CARGO_PKG_NAME=")),
            "{seen}"
        );
        assert!(seen.lines().any(|l| l.starts_with("PATH=")), "{seen}");
    }
}
