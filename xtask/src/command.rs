//! Running commands from xtask: in the workspace root, with inherited stdio, a non-zero
//! status turned into an error that shows the command.

use std::path::Path;
use std::process::Command;

/// Runs `command` in the workspace root with inherited stdio; fails on a non-zero status.
pub fn run(root: &Path, command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let status = command
        .current_dir(root)
        .status()
        .map_err(|err| format!("cannot run {shown}: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({status})"))
    }
}

/// Runs `cargo ARGS` in the workspace root with inherited stdio.
pub fn run_cargo(root: &Path, args: &[&str]) -> Result<(), String> {
    // The cargo that runs xtask, so `cargo +toolchain xtask` keeps its toolchain.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args(args)
        .current_dir(root)
        .status()
        .map_err(|err| format!("cannot run `cargo {}`: {err}", args.join(" ")))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}
