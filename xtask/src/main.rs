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
mod tidy;
mod verify;
mod wheel;

use std::io::Write;
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
  wheel [--debug] [--interpreter PYTHON]
                      the ffcv_rs abi3 wheel (maturin, release profile, the workspace's own
                      target/) into target/wheels/, for `pip install target/wheels/ffcv_rs-*.whl`;
                      for a free-threaded PYTHON (3.14t), a wheel of that version
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
        "tidy" => tidy::tidy(&root),
        "gpu-bundle" => gpu_bundle::gpu_bundle(&root, &args[1..]),
        "wheel" => wheel::wheel(&root, &args[1..]),
        "help" | "--help" | "-h" => {
            // Not `println!`: a reader that closes the pipe early (`| head`) is no error.
            let _ = writeln!(std::io::stdout(), "{USAGE}");
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
