//! Developer tasks, run as `cargo xtask <task>`: `verify` (tidy, fmt, clippy, tests),
//! `bench` (the bounded benchmark matrix of `crates/bench`) and `wheel` (the Python wheel).
//!
//! xtask stays thin on purpose: it has no dependencies and only runs cargo (and the tidy
//! checks: file headers, file lengths, crate layering, import loops), so it builds in
//! seconds on a fresh machine. The benchmark
//! matrix itself lives in the `ffcv-bench` package.

mod clippy_build;
mod command;
mod gpu_bundle;
mod layering;
mod long_files;
mod module_cycles;
mod verify;
mod wheel;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use command::run_cargo;

const USAGE: &str = "\
usage: cargo xtask <task> [args]

tasks:
  verify              tidy check, `cargo fmt --check`, one build that lints (clippy's and
                      rustc's warnings are errors) and makes the test binaries, `cargo test`
                      (the whole workspace), then the Python package's pytest suite in
                      target/python-venv; stops at the first failing step
  lint-build          verify's build alone: the test binaries and examples, compiled with
                      clippy-driver as the workspace's compiler and warnings as errors
  python-env          verify's Python environment alone: target/python-venv with maturin,
                      numpy, pytest and the packages the suite compares against
  bench [ARGS...]     `cargo run --release -p ffcv-bench -- ARGS...`, e.g.
                      `cargo xtask bench --small [--only PATTERN] [--json] [--compare OLD.json]
                      [--transform FIELD=OP[,OP...]]...`
  gpu-bundle          build the GPU checks and benchmark (no CUDA needed) into
                      target/gpu-bundle/ with a run.sh for a GPU host
  wheel [--debug]     the ffcv_rs abi3 wheel (maturin, release profile, the workspace's own
                      target/) into target/wheels/, for `pip install target/wheels/ffcv_rs-*.whl`
  tidy                only the tidy checks: every .rs file opens with a `//!` line and has
                      at most 800 lines (or a reason in xtask/src/long_files.rs); no crate
                      depends on one of its own or a higher layer (docs/ARCHITECTURE.md);
                      in no crate do module files import each other in a loop
  help                this text";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(task) = args.first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let root = workspace_root();
    let result = match task.as_str() {
        "verify" => verify::verify(&root, &args[1..]),
        "lint-build" => verify::lint_build(&root, &args[1..]),
        "python-env" => verify::python_env(&root, &args[1..]),
        "bench" => bench(&root, &args[1..]),
        "tidy" => tidy(&root),
        "gpu-bundle" => gpu_bundle::gpu_bundle(&root, &args[1..]),
        "wheel" => wheel::wheel(&root, &args[1..]),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => {
            eprintln!("xtask: unknown task `{other}`\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: xtask's manifest directory is `<root>/xtask`.
fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or(manifest_dir)
}

/// `cargo xtask bench ARGS...`: the benchmark runner in release mode, arguments passed through.
fn bench(root: &Path, args: &[String]) -> Result<(), String> {
    let mut cargo_args = vec!["run", "--release", "--package", "ffcv-bench", "--"];
    cargo_args.extend(args.iter().map(String::as_str));
    run_cargo(root, &cargo_args)
}

/// The tidy checks: every Rust source under `crates/`, `xtask/`, `tests/` and `fuzz/` opens
/// with a `//!` line saying what the file holds (rust-analyzer's habit) and stays within
/// [`long_files::MAX_LINES`] unless allowed; then the crate layering ([`layering`]) and
/// every crate's module-file graph ([`module_cycles`]).
fn tidy(root: &Path) -> Result<(), String> {
    let mut files = Vec::new();
    for dir in ["crates", "xtask", "tests", "fuzz"] {
        collect_rust_files(&root.join(dir), &mut files)?;
    }
    files.sort();
    let mut offenders = Vec::new();
    let mut lengths = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .map_err(|err| format!("cannot read {}: {err}", file.display()))?;
        let shown = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        if !opens_with_module_doc(&text) {
            offenders.push(shown.clone());
        }
        lengths.push((shown, text.lines().count()));
    }
    if !offenders.is_empty() {
        return Err(format!(
            "{} file(s) do not open with a `//!` line: {}",
            offenders.len(),
            offenders.join(", ")
        ));
    }
    let long = long_files::offenders(lengths.iter().map(|(p, n)| (p.as_str(), *n)));
    if !long.is_empty() {
        return Err(format!(
            "{} file(s) exceed {} lines (split them, or add a one-line reason to \
             xtask/src/long_files.rs): {}",
            long.len(),
            long_files::MAX_LINES,
            long.join(", ")
        ));
    }
    eprintln!("    {} files checked", files.len());
    layering::check(root)?;
    module_cycles::check(root)
}

/// True when the first line of `text` is a `//!` inner doc comment.
fn opens_with_module_doc(text: &str) -> bool {
    text.lines()
        .next()
        .is_some_and(|line| line.trim_start().starts_with("//!"))
}

/// Collects `*.rs` files below `dir`, skipping build output (`target/`) and hidden folders.
fn collect_rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(format!("cannot list {}: {err}", dir.display())),
    };
    for entry in entries {
        let entry = entry.map_err(|err| format!("cannot list {}: {err}", dir.display()))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let file_type = entry
            .file_type()
            .map_err(|err| format!("cannot stat {}: {err}", path.display()))?;
        if file_type.is_dir() {
            if name != "target" && !name.starts_with('.') && name != "fixtures" {
                collect_rust_files(&path, out)?;
            }
        } else if file_type.is_file() && name.ends_with(".rs") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::opens_with_module_doc;

    #[test]
    fn module_doc_must_be_the_first_line() {
        assert!(opens_with_module_doc(
            "//! What this file holds.\nfn main() {}\n"
        ));
        assert!(!opens_with_module_doc("use std::io;\n//! late\n"));
        assert!(!opens_with_module_doc(
            "/// An item doc, not a module doc.\n"
        ));
        assert!(!opens_with_module_doc(""));
    }
}
