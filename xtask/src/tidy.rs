//! The tidy checks of `cargo xtask tidy` and `verify`: file headers, file lengths, the
//! crate layering and import loops between module files.

use std::path::{Path, PathBuf};

use crate::{layering, long_files, module_cycles};

/// The tidy checks: every Rust source under `crates/`, `xtask/`, `tests/` and `fuzz/` opens
/// with a `//!` line saying what the file holds (rust-analyzer's habit) and stays within
/// [`long_files::MAX_LINES`] unless allowed; then the crate layering ([`layering`]) and
/// every crate's module-file graph ([`module_cycles`]).
pub fn tidy(root: &Path) -> Result<(), String> {
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
