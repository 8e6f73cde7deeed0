//! `cargo xtask verify` and its parts that run alone: `lint-build` (one build that lints
//! and makes the test binaries) and `python-env` (the Python suite's virtual environment).
//!
//! The parts exist on their own so that CI can overlap them: `.ci/run` makes the Python
//! environment and installs the test servers while `lint-build` compiles, then runs
//! `verify`, which finds both done and goes on from there.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::clippy_build;
use crate::command::{cargo_command, run, run_cargo, venv_with};

/// What the Python suite needs from the package index: the build tool, the test runner,
/// and the independent readers and writers its tests compare against.
const PYTHON_PACKAGES: [&str; 6] = [
    "maturin>=1.5,<2",
    "numpy",
    "pytest",
    // FFCV's `from_webdataset` reads shards through it (test_webdataset.py).
    "webdataset",
    // Parquet and Arrow IPC files for `ffcv write parquet|arrow` (test_parquet_cli.py),
    // and an independent TFRecord writer for `ffcv write tfrecord` (test_tfrecord_cli.py).
    "pyarrow",
    "tfrecord",
];

/// The lint build's cargo commands: what `cargo clippy --workspace --all-targets` covers.
const LINT_BUILDS: [(&str, &[&str]); 2] = [
    // The targets with `test = true`: libraries, binaries and the one integration-test
    // binary per crate. `--lib` is not named: it would also build the test harness of
    // libraries that have no unit tests and say `test = false` (the Python extension's,
    // which links the whole stack again for nothing); the extension itself is built, and
    // linted, by the Python step.
    (
        "clippy + test build",
        &["test", "--workspace", "--tests", "--no-run"],
    ),
    // The examples (measurement programs): built, not run; their dependencies are the
    // test build's.
    ("clippy + examples", &["build", "--workspace", "--examples"]),
];

/// `cargo xtask verify`: each step printed with its duration; the first failure stops the run.
pub fn verify(root: &Path, args: &[String]) -> Result<(), String> {
    no_arguments("verify", args)?;
    let started = Instant::now();
    let result = verify_steps(root);
    let seconds = started.elapsed().as_secs_f64();
    match &result {
        Ok(()) => eprintln!("xtask verify: all steps passed in {seconds:.1} s"),
        Err(_) => eprintln!("xtask verify: stopped after {seconds:.1} s"),
    }
    result
}

/// `cargo xtask lint-build`: verify's build alone, every step timed.
pub fn lint_build(root: &Path, args: &[String]) -> Result<(), String> {
    no_arguments("lint-build", args)?;
    lint_build_steps(root, &clippy_build::lint_env()?)
}

/// `cargo xtask python-env`: the Python suite's virtual environment alone.
pub fn python_env(root: &Path, args: &[String]) -> Result<(), String> {
    no_arguments("python-env", args)?;
    step("python env: target/python-venv", || {
        make_python_env(root).map(|_| ())
    })
}

fn no_arguments(task: &str, args: &[String]) -> Result<(), String> {
    match args.first() {
        Some(extra) => Err(format!("`{task}` takes no arguments (got `{extra}`)")),
        None => Ok(()),
    }
}

/// The steps of `verify`, in order; the first failure ends the run.
fn verify_steps(root: &Path) -> Result<(), String> {
    step(
        "tidy: `//!` file headers, file lengths, crate layering, import loops",
        || crate::tidy::tidy(root),
    )?;
    step("fmt: cargo fmt --all -- --check", || {
        run_cargo(root, &["fmt", "--all", "--", "--check"])
    })?;
    // Every cargo command below (and maturin's) compiles the workspace's crates through
    // clippy-driver with `-D warnings` (`clippy_build`), so the first build is both the
    // lint and the test build, and later steps reuse it.
    let lint_env = clippy_build::lint_env()?;
    lint_build_steps(root, &lint_env)?;
    let cargo_steps: [(&str, &[&str]); 3] = [
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
        cargo_step(root, name, cargo_args, &lint_env)?;
    }
    step(
        "python: ffcv_rs into target/python-venv (maturin develop), pytest crates/ffcv-py/tests",
        || python_tests(root, &lint_env),
    )
}

fn lint_build_steps(root: &Path, lint_env: &[(&str, OsString)]) -> Result<(), String> {
    for (name, cargo_args) in LINT_BUILDS {
        cargo_step(root, name, cargo_args, lint_env)?;
    }
    Ok(())
}

/// One timed step: `cargo ARGS` with the lint environment.
fn cargo_step(
    root: &Path,
    name: &str,
    cargo_args: &[&str],
    lint_env: &[(&str, OsString)],
) -> Result<(), String> {
    let title = format!("{name}: cargo {}", cargo_args.join(" "));
    step(&title, || {
        run(
            root,
            cargo_command()
                .args(cargo_args)
                .envs(lint_env.iter().cloned()),
        )
    })
}

/// The virtual environment under `target/` (made once, with `python3 -m venv`;
/// `FFCV_PYTHON` names another interpreter) with [`PYTHON_PACKAGES`]; returns its path.
fn make_python_env(root: &Path) -> Result<PathBuf, String> {
    let venv = root.join("target").join("python-venv");
    venv_with(root, &venv, &PYTHON_PACKAGES)?;
    Ok(venv)
}

/// The Python package's suite: the environment of [`make_python_env`], the package built
/// into it (with the lint environment, so the rest of the workspace is the test build's
/// and the extension itself is linted), then pytest.
/// pytest's exit 5 (no test collected) counts as a failure: the suite must run.
fn python_tests(root: &Path, lint_env: &[(&str, OsString)]) -> Result<(), String> {
    let venv = make_python_env(root)?;
    let bin = venv.join("bin");
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
        Command::new(bin.join("python")).args(["-m", "pytest", "-q", "crates/ffcv-py/tests"]),
    )
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
