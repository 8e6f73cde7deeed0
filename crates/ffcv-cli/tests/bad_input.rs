//! Corrupt files and bad command lines: exit 1 with one `ffcv: error:` line, or exit 2 for
//! usage errors; never a panic.

mod support;

use std::path::{Path, PathBuf};

use support::{ffcv, fixture};

/// A copy of fixture `name` with `edit` applied, written into `dir` as `label.beton`.
fn corrupt(dir: &Path, name: &str, label: &str, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(fixture(name)).unwrap();
    edit(&mut bytes);
    let path = dir.join(format!("{label}.beton"));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn put_u16(bytes: &mut [u8], at: usize, value: u16) {
    bytes[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

#[test]
fn corrupt_files_exit_1_with_one_line_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = vec![
        corrupt(d, "scalars", "empty", |b| b.clear()),
        corrupt(d, "scalars", "truncated_header", |b| b.truncate(10)),
        corrupt(d, "scalars", "truncated_descriptor", |b| {
            b.truncate(24 + 700)
        }),
        corrupt(d, "scalars", "truncated_metadata", |b| {
            b.truncate(2106 + 800)
        }),
        corrupt(d, "bytes_ndarray", "truncated_data", |b| {
            b.truncate(3_000_000)
        }),
        corrupt(d, "bytes_ndarray", "partial_alloc_row", |b| {
            let len = b.len();
            b.truncate(len - 5);
        }),
        corrupt(d, "scalars", "version_3", |b| put_u16(b, 0, 3)),
        corrupt(d, "scalars", "zero_fields", |b| put_u16(b, 2, 0)),
        corrupt(d, "scalars", "huge_field_count", |b| {
            put_u16(b, 2, u16::MAX)
        }),
        corrupt(d, "scalars", "page_size_0", |b| put_u32(b, 4, 0)),
        corrupt(d, "scalars", "page_size_not_pow2", |b| {
            put_u32(b, 4, 3_000_000)
        }),
        corrupt(d, "scalars", "num_samples_huge", |b| {
            put_u64(b, 8, u64::MAX)
        }),
        corrupt(d, "json", "alloc_table_past_end", |b| {
            put_u64(b, 16, 1 << 40)
        }),
        corrupt(d, "scalars", "type_id_77", |b| b[24] = 77),
        corrupt(d, "scalars", "non_ascii_name", |b| b[25] = 0xC3),
        corrupt(d, "json", "row_past_end", |b| {
            // The first allocation-table row's size: far past the end of the file.
            let table = u64::from_le_bytes(b[16..24].try_into().unwrap()) as usize;
            put_u64(b, table + 16, u64::MAX - 8);
        }),
    ];
    for path in &cases {
        let file_name = path.file_name().unwrap().to_str().unwrap();
        for command in [&["inspect"][..], &["inspect", "--json"], &["dump", "--raw"]] {
            let mut args: Vec<&str> = command.to_vec();
            args.push(path.to_str().unwrap());
            ffcv(&args).assert_runtime_error(file_name);
        }
    }
}

#[test]
fn missing_files_and_directories_are_runtime_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.beton");
    ffcv(["inspect".as_ref(), missing.as_os_str()]).assert_runtime_error("missing.beton");
    ffcv(["dump".as_ref(), dir.path().as_os_str()])
        .assert_runtime_error(dir.path().to_str().unwrap());
}

#[test]
fn usage_errors_exit_2() {
    let scalars = fixture("scalars");
    let scalars = scalars.to_str().unwrap();
    let cases: &[&[&str]] = &[
        &[],
        &["frobnicate"],
        &["inspect"],
        &["inspect", scalars, "--no-such-flag"],
        &["dump"],
        &["dump", scalars, "--count", "many"],
        &["dump", scalars, "--start", "-1"],
        &["write", "synthetic"],
        &[
            "write",
            "synthetic",
            "out.beton",
            "--kind",
            "nope",
            "--samples",
            "3",
        ],
        &["write", "synthetic", "out.beton", "--kind", "scalars"],
        &[
            "write",
            "synthetic",
            "out.beton",
            "--kind",
            "scalars",
            "--samples",
            "3",
            "--page-size",
            "8XB",
        ],
    ];
    for args in cases {
        let run = ffcv(*args);
        assert_eq!(run.code, Some(2), "ffcv {args:?}: {}", run.stderr);
        // clap's own messages: `error: ...` or the usage text when nothing was given.
        let clap_message = run.stderr.starts_with("error: ") || run.stderr.contains("Usage: ffcv");
        assert!(clap_message, "ffcv {args:?}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"));
    }
    let help = ffcv(["--help"]);
    assert_eq!(help.code, Some(0));
    for command in ["inspect", "dump", "order", "write"] {
        assert!(help.stdout.contains(command), "{}", help.stdout);
    }
}
