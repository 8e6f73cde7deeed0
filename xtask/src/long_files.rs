//! The file-length check of `cargo xtask tidy`: no Rust source exceeds [`MAX_LINES`]
//! lines unless [`ALLOWED`] names it with a one-line reason, so a file that keeps growing
//! is split by concept (or its length is defended) rather than noticed by accident.

/// The most lines a source file may have without an entry in [`ALLOWED`].
pub const MAX_LINES: usize = 800;

/// Files allowed past [`MAX_LINES`], relative to the workspace root, each with why.
pub const ALLOWED: &[(&str, &str)] = &[
    (
        "crates/beton-io/src/reader.rs",
        "the whole validation of a file's structure, one pass in file order",
    ),
    (
        "crates/ffcv/src/gpu.rs",
        "ToDevice: the GPU stage of the loader, its configuration and its batch type",
    ),
    (
        "crates/rgb-image/src/accurate.rs",
        "one libjpeg-exact decoder: baseline and progressive scans share its state",
    ),
    (
        "crates/rgb-image/src/turbo.rs",
        "one libjpeg-turbo-exact decoder: frame set-up, scans, IDCT dispatch, upsampling and colour conversion (entropy decoding is entropy.rs)",
    ),
    (
        "crates/bench/src/loader_matrix.rs",
        "the loader benchmark rows and their unit tests (a third of the file)",
    ),
    (
        "crates/ffcv-py/src/writer.rs",
        "the native writer: one column per field kind, its Python value conversion, the reading and writing threads",
    ),
    (
        "crates/ffcv/src/builder.rs",
        "LoaderBuilder: every FFCV knob's setter and the named build steps (views are views.rs)",
    ),
    (
        "crates/pipeline-jit/src/jit.rs",
        "the code generator's driver: the stage function, native calls, loop nests of both lowerings",
    ),
];

/// The files (relative paths and their line counts) over the limit and not allowed.
pub fn offenders<'a>(files: impl IntoIterator<Item = (&'a str, usize)>) -> Vec<String> {
    files
        .into_iter()
        .filter(|&(path, lines)| {
            lines > MAX_LINES && !ALLOWED.iter().any(|&(allowed, _)| allowed == path)
        })
        .map(|(path, lines)| format!("{path} ({lines} lines)"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unlisted_files_over_the_limit_offend() {
        let files = [
            ("crates/a/src/small.rs", MAX_LINES),
            ("crates/a/src/big.rs", MAX_LINES + 1),
            ("crates/rgb-image/src/turbo.rs", 5000),
        ];
        assert_eq!(offenders(files), ["crates/a/src/big.rs (801 lines)"]);
    }

    #[test]
    fn every_allowance_has_a_reason_and_appears_once() {
        for (i, &(path, reason)) in ALLOWED.iter().enumerate() {
            assert!(path.ends_with(".rs") && !reason.trim().is_empty(), "{path}");
            assert!(!reason.contains('\n'), "{path}: one line");
            assert!(
                ALLOWED[i + 1..].iter().all(|&(p, _)| p != path),
                "{path} twice"
            );
        }
    }
}
