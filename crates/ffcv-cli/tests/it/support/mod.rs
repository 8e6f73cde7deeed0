//! Helpers shared by the `ffcv` command-line tests: run the binary, load fixtures.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The FFCV 1.0.2 reference fixtures, by name (`NAME.beton` + `NAME.expected.json`).
pub const FIXTURES: [&str; 7] = [
    "scalars",
    "bytes_ndarray",
    "json",
    "images_raw",
    "images_jpg",
    "multipage",
    "page_retry",
];

/// `tests/fixtures/ffcv-1.0.2` at the repository root.
pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/ffcv-1.0.2")
}

/// The path of fixture `name`'s .beton file.
pub fn fixture(name: &str) -> PathBuf {
    fixture_dir().join(format!("{name}.beton"))
}

/// The parsed `NAME.expected.json`.
pub fn expected(name: &str) -> Value {
    let path = fixture_dir().join(format!("{name}.expected.json"));
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The result of one `ffcv` run.
pub struct Run {
    /// Exit status code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// The stdout lines parsed as JSON (one document per line).
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}")))
            .collect()
    }

    /// Asserts success and returns stdout parsed as one JSON document.
    pub fn json(&self) -> Value {
        assert_eq!(self.code, Some(0), "stderr: {}", self.stderr);
        serde_json::from_str(&self.stdout).unwrap_or_else(|err| panic!("{err}: {}", self.stdout))
    }

    /// Asserts the runtime-error contract: exit 1, exactly one stderr line `ffcv: error: ...`
    /// mentioning `needle`, and no panic message.
    pub fn assert_runtime_error(&self, needle: &str) {
        assert_eq!(
            self.code,
            Some(1),
            "stdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        assert!(!self.stderr.contains("panicked"), "panic: {}", self.stderr);
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "expected one stderr line, got: {}",
            self.stderr
        );
        assert!(lines[0].starts_with("ffcv: error: "), "{}", lines[0]);
        assert!(lines[0].contains(needle), "`{needle}` not in: {}", lines[0]);
    }
}

/// Runs `ffcv ARGS`.
pub fn ffcv<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let output: Output = Command::new(env!("CARGO_BIN_EXE_ffcv"))
        .args(args)
        .output()
        .expect("the ffcv binary runs");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// The unsigned integers of a JSON array (an order, a list of sample ids).
pub fn u64s(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}
