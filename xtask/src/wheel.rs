//! `cargo xtask wheel`: the `ffcv_rs` wheel (abi3, or for one free-threaded interpreter),
//! built once into `target/wheels/`.
//!
//! The wheel is built by maturin from the workspace itself, in the workspace's own
//! `target/` directory, so a release build that is already there (from an earlier wheel,
//! or `cargo build --release`) is reused instead of compiled again, and every other
//! virtual environment installs the result with `pip install target/wheels/ffcv_rs-*.whl`
//! in seconds. `pip install ./crates/ffcv-py` instead runs maturin inside pip's isolated
//! build environment, which costs a fresh maturin install and, each time the interpreter
//! differs, a rebuild of the PyO3 layer (see docs/python.md for the measured times).
//!
//! maturin comes from `$MATURIN` when set, else the test environment
//! `target/python-venv` when it has one, else `maturin` on `PATH`, else a small
//! environment `target/wheel-venv` made once with `python3 -m venv` and pip.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::command::{run, venv_with};

/// Where the wheel lands, relative to the workspace root.
pub const WHEEL_DIR: &str = "target/wheels";

/// What `cargo xtask wheel` was asked for.
#[derive(Debug, Default, PartialEq)]
struct WheelArgs {
    /// The dev profile (quick, unoptimised: for tests only) instead of release.
    debug: bool,
    /// The interpreter to build for (maturin's `--interpreter`); the one maturin finds
    /// when absent.
    interpreter: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<WheelArgs, String> {
    let mut parsed = WheelArgs::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--debug" => parsed.debug = true,
            "--interpreter" => match rest.next() {
                Some(path) => parsed.interpreter = Some(PathBuf::from(path)),
                None => return Err("`--interpreter` needs a path to a python".into()),
            },
            other => {
                return Err(format!(
                    "`wheel` takes `--debug` and `--interpreter PYTHON` (got `{other}`)"
                ));
            }
        }
    }
    Ok(parsed)
}

/// `cargo xtask wheel [--debug] [--interpreter PYTHON]`: builds the wheel into
/// [`WHEEL_DIR`] and prints its path. The wheel is abi3 (any CPython from 3.9), except
/// for a free-threaded interpreter (3.14t), which loads no abi3 module before 3.15:
/// `--interpreter python3.14t` builds a wheel for that version only.
pub fn wheel(root: &Path, args: &[String]) -> Result<(), String> {
    let WheelArgs { debug, interpreter } = parse_args(args)?;
    let maturin = find_maturin(root)?;
    let out = root.join(WHEEL_DIR);
    // Old wheels of other versions would make `pip install target/wheels/ffcv_rs-*.whl`
    // ambiguous: the directory holds the one just built.
    remove_old_wheels(&out)?;
    let mut command = Command::new(&maturin);
    command.args([
        "build",
        "--quiet",
        "--manifest-path",
        "crates/ffcv-py/Cargo.toml",
    ]);
    command.arg("--out").arg(&out);
    if !debug {
        command.arg("--release");
    }
    if let Some(python) = &interpreter {
        command.arg("--interpreter").arg(python);
    }
    run(root, &mut command)?;
    let built = wheels_in(&out)?;
    match built.as_slice() {
        [one] => {
            println!("{}", one.display());
            let which = if is_abi3(one) {
                "any environment (CPython >= 3.9)"
            } else {
                "an environment of the interpreter it was built for"
            };
            eprintln!("install it in {which}: pip install {}", one.display());
            Ok(())
        }
        [] => Err(format!(
            "maturin finished but left no wheel in {}",
            out.display()
        )),
        many => Err(format!(
            "{} wheels in {} after the build: {:?}",
            many.len(),
            out.display(),
            many
        )),
    }
}

/// The maturin to run, in the order the module documentation gives.
fn find_maturin(root: &Path) -> Result<PathBuf, String> {
    if let Some(explicit) = std::env::var_os("MATURIN") {
        return Ok(PathBuf::from(explicit));
    }
    let test_venv = root.join("target/python-venv/bin/maturin");
    if test_venv.exists() {
        return Ok(test_venv);
    }
    if Command::new("maturin").arg("--version").output().is_ok() {
        return Ok(PathBuf::from("maturin"));
    }
    let venv = root.join("target/wheel-venv");
    let own = venv.join("bin/maturin");
    if !own.exists() {
        venv_with(root, &venv, &["maturin>=1.5,<2"])?;
    }
    Ok(own)
}

/// The `ffcv_rs-*.whl` files in `dir` (none when it does not exist), sorted.
fn wheels_in(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(format!("cannot list {}: {err}", dir.display())),
    };
    let mut wheels = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|err| format!("cannot list {}: {err}", dir.display()))?
            .path();
        if is_our_wheel(&path) {
            wheels.push(path);
        }
    }
    wheels.sort();
    Ok(wheels)
}

fn remove_old_wheels(dir: &Path) -> Result<(), String> {
    for old in wheels_in(dir)? {
        std::fs::remove_file(&old)
            .map_err(|err| format!("cannot remove the old wheel {}: {err}", old.display()))?;
    }
    Ok(())
}

/// Whether the wheel's tag is the stable ABI's (`…-cp39-abi3-…`).
fn is_abi3(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.contains("-abi3-"))
}

/// maturin names the wheel after the distribution `ffcv-rs`, normalised to `ffcv_rs`.
fn is_our_wheel(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.starts_with("ffcv_rs-") && name.ends_with(".whl"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ffcv_rs_wheels_count() {
        assert!(is_our_wheel(Path::new(
            "target/wheels/ffcv_rs-0.1.0-cp39-abi3-manylinux_2_34_x86_64.whl"
        )));
        assert!(!is_our_wheel(Path::new(
            "target/wheels/numpy-2.0-cp311.whl"
        )));
        assert!(!is_our_wheel(Path::new(
            "target/wheels/ffcv_rs-0.1.0.tar.gz"
        )));
    }

    #[test]
    fn arguments_name_the_profile_and_the_interpreter() {
        let args = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(parse_args(&[]).unwrap(), WheelArgs::default());
        assert_eq!(
            parse_args(&args(&[
                "--interpreter",
                "/opt/py/bin/python3.14t",
                "--debug"
            ]))
            .unwrap(),
            WheelArgs {
                debug: true,
                interpreter: Some(PathBuf::from("/opt/py/bin/python3.14t")),
            }
        );
        assert!(
            parse_args(&args(&["--interpreter"]))
                .unwrap_err()
                .contains("needs a path")
        );
        assert!(
            parse_args(&args(&["--release"]))
                .unwrap_err()
                .contains("`--release`")
        );
    }

    #[test]
    fn the_stable_abi_is_told_by_the_tag() {
        assert!(is_abi3(Path::new(
            "ffcv_rs-0.1.0-cp39-abi3-manylinux_2_34_x86_64.whl"
        )));
        assert!(!is_abi3(Path::new(
            "ffcv_rs-0.1.0-cp314-cp314t-manylinux_2_34_x86_64.whl"
        )));
    }

    #[test]
    fn wheels_in_lists_sorted_and_tolerates_a_missing_directory() {
        let dir = std::env::temp_dir().join(format!("xtask-wheels-{}", std::process::id()));
        assert_eq!(
            wheels_in(&dir.join("absent")).unwrap(),
            Vec::<PathBuf>::new()
        );
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["ffcv_rs-0.2-x.whl", "ffcv_rs-0.1-x.whl", "other-1.whl"] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        let found = wheels_in(&dir).unwrap();
        assert_eq!(
            found,
            vec![dir.join("ffcv_rs-0.1-x.whl"), dir.join("ffcv_rs-0.2-x.whl")]
        );
        remove_old_wheels(&dir).unwrap();
        assert_eq!(wheels_in(&dir).unwrap(), Vec::<PathBuf>::new());
        assert!(dir.join("other-1.whl").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
