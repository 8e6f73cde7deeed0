//! Corrupt files and bad command lines: exit 1 with one `ffcv: error:` line, or exit 2 for
//! usage errors; never a panic.

use crate::support;

use support::{ffcv, fixture};

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

#[test]
fn every_file_of_beton_ios_corrupt_corpus_exits_1_without_panic() {
    // The shared corpus: truncations at every structural boundary and many other offsets,
    // and targeted edits of the header, descriptors, NDArray arguments, metadata and
    // allocation table. Every one must be refused at open with one line naming the file.
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for name in ["scalars", "json", "bytes_ndarray", "images_raw"] {
        let original = std::fs::read(fixture(name)).unwrap();
        for (n, case) in ffcv_testkit::corrupt::corpus(&original)
            .unwrap()
            .into_iter()
            .enumerate()
        {
            let path = dir.path().join(format!("{name}-{n}.beton"));
            std::fs::write(&path, &case.bytes).unwrap();
            let file = path.to_str().unwrap();
            let file_name = path.file_name().unwrap().to_str().unwrap();
            for args in [&["inspect", "--json", file][..], &["dump", "--raw", file]] {
                let run = ffcv(args);
                assert!(
                    !run.stderr.contains("panicked"),
                    "{} ({}): {}",
                    case.name,
                    name,
                    run.stderr
                );
                run.assert_runtime_error(file_name);
            }
            std::fs::remove_file(&path).unwrap();
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} corrupt files");
}

#[test]
fn a_damaged_jpeg_fails_dump_with_the_sample_and_field_named() {
    // The file structure stays valid (inspect works); only the image data is wrong.
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read(fixture("images_jpg")).unwrap();
    // Sample 0's JPEG starts the first data page; its metadata row starts at byte 3147
    // (mode u8, width u16, height u16, data_ptr u64).
    type Edit = fn(&mut Vec<u8>);
    let cases: [(&str, Edit, &str); 3] = [
        (
            "garbled",
            |b| b[2_097_152 + 2..2_097_152 + 400].fill(0xAB),
            "sample 0, field `image`: cannot decode the JPEG",
        ),
        (
            "wrong_width",
            |b| b[3148..3150].copy_from_slice(&90u16.to_le_bytes()),
            "the JPEG is 61x89 but the metadata says 61x90",
        ),
        (
            "smaller_in_metadata",
            |b| b[3148..3150].copy_from_slice(&50u16.to_le_bytes()),
            "the JPEG is 61x89 but the metadata says 61x50",
        ),
    ];
    for (label, edit, message) in cases {
        let mut bytes = original.clone();
        edit(&mut bytes);
        let path = dir.path().join(format!("{label}.beton"));
        std::fs::write(&path, bytes).unwrap();
        let file = path.to_str().unwrap();
        assert_eq!(ffcv(["inspect", file]).code, Some(0), "{label}");
        ffcv(["dump", file]).assert_runtime_error(message);
        // The other fields of the same sample still dump.
        assert_eq!(
            ffcv(["dump", file, "--fields", "label,index"]).code,
            Some(0)
        );
    }
}
