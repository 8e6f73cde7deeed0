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
mod wheel;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use command::{cargo_command, run, run_cargo, venv_with};
use std::time::Instant;

const USAGE: &str = "\
usage: cargo xtask <task> [args]

tasks:
  verify              tidy check, `cargo fmt --check`, one build that lints (clippy's and
                      rustc's warnings are errors) and makes the test binaries, `cargo test`
                      (the whole workspace), then the Python package's pytest suite in
                      target/python-venv; stops at the first failing step
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
        "verify" => verify(&root, &args[1..]),
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

/// `cargo xtask verify`: each step printed with its duration; the first failure stops the run.
fn verify(root: &Path, args: &[String]) -> Result<(), String> {
    if let Some(extra) = args.first() {
        return Err(format!("`verify` takes no arguments (got `{extra}`)"));
    }
    let started = Instant::now();
    let result = verify_steps(root);
    let seconds = started.elapsed().as_secs_f64();
    match &result {
        Ok(()) => eprintln!("xtask verify: all steps passed in {seconds:.1} s"),
        Err(_) => eprintln!("xtask verify: stopped after {seconds:.1} s"),
    }
    result
}

/// The steps of `verify`, in order; the first failure ends the run.
fn verify_steps(root: &Path) -> Result<(), String> {
    step(
        "tidy: `//!` file headers, file lengths, crate layering, import loops",
        || tidy(root),
    )?;
    step("fmt: cargo fmt --all -- --check", || {
        run_cargo(root, &["fmt", "--all", "--", "--check"])
    })?;
    // Every cargo command below (and maturin's) compiles the workspace's crates through
    // clippy-driver with `-D warnings` (`clippy_build`), so the first build is both the
    // lint and the test build, and later steps reuse it.
    let lint_env = clippy_build::lint_env()?;
    let cargo_steps: [(&str, &[&str]); 5] = [
        // The targets with `test = true`: libraries, binaries and the one integration-test
        // binary per crate. `--lib` is not named: it would also build the test harness of
        // libraries that have no unit tests and say `test = false` (the Python extension's,
        // which links the whole stack again for nothing); the extension itself is built,
        // and linted, by the Python step.
        (
            "clippy + test build",
            &["test", "--workspace", "--tests", "--no-run"],
        ),
        // The examples (measurement programs), which `cargo clippy --all-targets` covers:
        // built, not run; their dependencies are the test build's.
        ("clippy + examples", &["build", "--workspace", "--examples"]),
        ("test", &["test", "--workspace", "--tests"]),
        ("doc tests", &["test", "--workspace", "--doc"]),
        // The tiny CUDA allocation/copy probe, with its output shown: a staged batch read
        // back from the device where one is present, "skipped: no CUDA device" elsewhere.
        (
            "cuda probe",
            &[
                // The test step's selection, so nothing is built again (one package alone
                // would unify features differently and rebuild its dependencies).
                "test",
                "--quiet",
                "--workspace",
                "--tests",
                "--",
                "--nocapture",
                "--exact",
                "gpu_stage::raw_outputs_arrive_unchanged_and_held_batches_keep_their_bytes",
            ],
        ),
    ];
    for (name, cargo_args) in cargo_steps {
        let title = format!("{name}: cargo {}", cargo_args.join(" "));
        step(&title, || {
            run(
                root,
                cargo_command()
                    .args(cargo_args)
                    .envs(lint_env.iter().cloned()),
            )
        })?;
    }
    step(
        "python: ffcv_rs into target/python-venv (maturin develop), pytest crates/ffcv-py/tests",
        || python_tests(root, &lint_env),
    )?;
    Ok(())
}

/// The Python package's suite: a virtual environment under `target/` (made once, with
/// `python3 -m venv`; `FFCV_PYTHON` names another interpreter), maturin, numpy, pytest,
/// webdataset, pyarrow and tfrecord from the package index, the package built into it,
/// then pytest.
/// pytest's exit 5 (no test collected) counts as a failure: the suite must run.
fn python_tests(root: &Path, lint_env: &[(&str, std::ffi::OsString)]) -> Result<(), String> {
    let venv = root.join("target").join("python-venv");
    let bin = venv.join("bin");
    let python = bin.join("python");
    venv_with(
        root,
        &venv,
        &[
            "maturin>=1.5,<2",
            "numpy",
            "pytest",
            // FFCV's `from_webdataset` reads shards through it (test_webdataset.py).
            "webdataset",
            // Parquet and Arrow IPC files for `ffcv write parquet|arrow`
            // (test_parquet_cli.py), and an independent TFRecord writer for
            // `ffcv write tfrecord` (test_tfrecord_cli.py).
            "pyarrow",
            "tfrecord",
        ],
    )?;
    run(
        root,
        Command::new(bin.join("maturin"))
            .args([
                "develop",
                "--quiet",
                "--manifest-path",
                "crates/ffcv-py/Cargo.toml",
            ])
            .env("VIRTUAL_ENV", &venv)
            .envs(lint_env.iter().cloned()),
    )?;
    run(
        root,
        Command::new(&python).args(["-m", "pytest", "-q", "crates/ffcv-py/tests"]),
    )
}

/// `cargo xtask bench ARGS...`: the benchmark runner in release mode, arguments passed through.
fn bench(root: &Path, args: &[String]) -> Result<(), String> {
    let mut cargo_args = vec!["run", "--release", "--package", "ffcv-bench", "--"];
    cargo_args.extend(args.iter().map(String::as_str));
    run_cargo(root, &cargo_args)
}

/// Runs one named step, printing its title before and its duration after.
fn step(title: &str, body: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    eprintln!("==> {title}");
    let started = Instant::now();
    let result = body();
    let seconds = started.elapsed().as_secs_f64();
    match &result {
        Ok(()) => eprintln!("    ok ({seconds:.1} s)"),
        Err(_) => eprintln!("    FAILED ({seconds:.1} s)"),
    }
    result
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
