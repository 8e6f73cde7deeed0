//! A forged file whose every image claims 65000x65000 (metadata and JPEG frame header, 8
//! bytes patched per sample of an FFCV-written fixture): `dump` and `bench` exit 1 with one
//! error line naming the sample, `doctor` reports its measurements failing with that
//! error, and no run's peak resident memory reaches 200 MB (the largest child's
//! `ru_maxrss`, which does not depend on timing).
//!
//! The test runs in its own process (`own_process`): `RUSAGE_CHILDREN` covers every
//! child the process has waited for, so no other test may run children beside it.

use crate::support;

use support::{ffcv, fixture};

/// The bound of the issue: well above what a refused sample costs, far below a decode.
const PEAK_RSS_LIMIT_BYTES: u64 = 200 << 20;

/// The largest peak resident set of the children waited for so far, in bytes.
fn children_peak_rss() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` writes a `rusage` into the pointer it is given, which points to
    // a zeroed value of that type, and reads nothing else.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage");
    // SAFETY: initialised (zeroed, then filled by the successful call).
    let usage = unsafe { usage.assume_init() };
    // Linux reports kilobytes.
    usage.ru_maxrss as u64 * 1024
}

#[test]
fn forged_65000_square_images_fail_fast_in_dump_bench_and_doctor() {
    ffcv_testkit::own_process(
        module_path!(),
        "forged_65000_square_images_fail_fast_in_dump_bench_and_doctor",
        || {
            let dir = tempfile::tempdir().unwrap();
            let original = std::fs::read(fixture("images_jpg")).unwrap();
            let forged =
                ffcv_testkit::corrupt::forge_image_size(&original, "image", 65000, 65000).unwrap();
            assert_eq!(forged.len(), original.len());
            let changed = original.iter().zip(&forged).filter(|(a, b)| a != b).count();
            // 8 bytes per sample (24 samples), fewer where a patched byte already held 0xFD/0xE8.
            assert!((24..=24 * 8).contains(&changed), "{changed} bytes changed");
            let path = dir.path().join("forged.beton");
            std::fs::write(&path, &forged).unwrap();
            let file = path.to_str().unwrap();

            // inspect only reads the structure: the file is valid as a .beton.
            let info = ffcv(["inspect", file]);
            assert_eq!(info.code, Some(0), "{}", info.stderr);

            let dump = ffcv(["dump", file]);
            dump.assert_runtime_error("sample 0");
            dump.assert_runtime_error("65000x65000");
            dump.assert_runtime_error("--max-image-pixels");

            for decoder in [
                "image=center-crop:64x64",
                "image=random-resized-crop:64x64",
                "image=simple",
            ] {
                let bench = ffcv([
                    "bench",
                    file,
                    "--decoder",
                    decoder,
                    "--batch-size",
                    "8",
                    "--epochs",
                    "1",
                    "--num-workers",
                    "4",
                ]);
                bench.assert_runtime_error("forged.beton");
                bench.assert_runtime_error("max_image_pixels");
                bench.assert_runtime_error("sample ");
            }

            // dump's loader path (`--decoder`) and a raised cap: the cap is not the only guard,
            // the frame's JPEG is far too short to code 65000x65000, so nothing is allocated.
            let dump = ffcv(["dump", file, "--decoder", "image=center-crop:32x32"]);
            dump.assert_runtime_error("max_image_pixels");
            let raised = ffcv([
                "bench",
                file,
                "--decoder",
                "image=center-crop:64x64",
                "--batch-size",
                "8",
                "--epochs",
                "1",
                "--max-image-pixels",
                "18446744073709551615",
            ]);
            raised.assert_runtime_error("cannot code a 65000x65000 frame");

            // Under the cap (10^8 < 2^27 pixels) the claim still needs a stream long enough to
            // code it before any pixel memory is allocated for it.
            let large = dir.path().join("large.beton");
            std::fs::write(
                &large,
                ffcv_testkit::corrupt::forge_image_size(&original, "image", 10000, 10000).unwrap(),
            )
            .unwrap();
            let large = large.to_str().unwrap();
            ffcv(["dump", large]).assert_runtime_error("cannot code a 10000x10000 frame");
            ffcv([
                "bench",
                large,
                "--decoder",
                "image=random-resized-crop:64x64",
                "--batch-size",
                "8",
                "--epochs",
                "1",
            ])
            .assert_runtime_error("cannot code a 10000x10000 frame");

            let doctor = ffcv([
                "doctor",
                file,
                "--decoder",
                "image=center-crop:64x64",
                "--batch-size",
                "8",
                "--time-budget",
                "5",
            ]);
            // Every measurement fails with the decoder's error naming a sample (whether the
            // doctor then exits 0 or 1 is its own rule, not this test's).
            assert!(matches!(doctor.code, Some(0 | 1)), "{}", doctor.stderr);
            assert!(!doctor.stderr.contains("panicked"), "{}", doctor.stderr);
            let failures = doctor
                .stdout
                .lines()
                .filter(|l| {
                    l.contains("failed: ") && l.contains("sample ") && l.contains("65000x65000")
                })
                .count();
            assert!(failures >= 1, "{}", doctor.stdout);

            let peak = children_peak_rss();
            assert!(
                peak < PEAK_RSS_LIMIT_BYTES,
                "a run peaked at {} MiB resident",
                peak >> 20
            );
        },
    );
}
