//! Every numeric flag of every command at its extremes (0, -1, NaN, infinity, 1e20,
//! u64::MAX, u64::MAX + 1, garbage): each run exits 0 where the value is meaningful, 2 (a
//! usage error) or 1 (a runtime error) with one line on stderr otherwise, and never panics.
//!
//! `ffcv inspect` takes no numeric flag. Values that would make a command run as long as
//! asked (`bench --epochs 18446744073709551615`) are not run.

use crate::support;

use std::path::{Path, PathBuf};

use support::{ffcv, fixture};

/// The extremes every flag is tried with.
const EXTREMES: [&str; 8] = [
    "0",
    "-1",
    "nan",
    "inf",
    "1e20",
    "18446744073709551615",
    "18446744073709551616",
    "garbage",
];

/// u64::MAX, for the rows' exceptions.
const MAX: &str = "18446744073709551615";

/// Stands for "this value is not run" in a row's exceptions.
const SKIP: i32 = -1;

/// One flag of one command: the arguments before it, the flag, a template of its value
/// (`{}` is replaced by the extreme), the arguments after it, and the exit status of each
/// extreme that is not a usage error (every other one must exit 2).
struct Row<'a> {
    args: Vec<String>,
    flag: &'a str,
    template: &'a str,
    exceptions: &'a [(&'a str, i32)],
}

fn row<'a>(
    args: &[&str],
    flag: &'a str,
    template: &'a str,
    exceptions: &'a [(&'a str, i32)],
) -> Row<'a> {
    Row {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        flag,
        template,
        exceptions,
    }
}

/// A folder of one class holding one 8x6 PNG.
fn image_folder(dir: &Path) -> PathBuf {
    let root = dir.join("images");
    let class = root.join("cat");
    std::fs::create_dir_all(&class).unwrap();
    let file = std::fs::File::create(class.join("1.png")).unwrap();
    let mut encoder = png::Encoder::new(file, 8, 6);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let pixels: Vec<u8> = (0..8 * 6 * 3).map(|i| (i * 7 % 256) as u8).collect();
    encoder
        .write_header()
        .unwrap()
        .write_image_data(&pixels)
        .unwrap();
    root
}

/// A WebDataset shard of one record: `k.png` (the folder's PNG) and `k.cls`.
fn webdataset_shard(dir: &Path, folder: &Path) -> PathBuf {
    let png = std::fs::read(folder.join("cat").join("1.png")).unwrap();
    let path = dir.join("shard.tar");
    let mut builder = tar::Builder::new(std::fs::File::create(&path).unwrap());
    for (name, bytes) in [("k.png", png), ("k.cls", b"1".to_vec())] {
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        builder
            .append_data(&mut header, name, bytes.as_slice())
            .unwrap();
    }
    builder.finish().unwrap();
    path
}

fn check(row: &Row<'_>, failures: &mut Vec<String>) {
    for extreme in EXTREMES {
        let expected = row
            .exceptions
            .iter()
            .find(|(value, _)| *value == extreme)
            .map_or(2, |&(_, code)| code);
        if expected == SKIP {
            continue;
        }
        let value = row.template.replace("{}", extreme);
        // `--flag=VALUE`, so that clap hands `-1` to the flag's parser.
        let mut args = row.args.clone();
        args.push(format!("{}={value}", row.flag));
        let run = ffcv(&args);
        let shown = format!("ffcv {}", args.join(" "));
        if run.stderr.contains("panicked") {
            failures.push(format!("{shown}: panicked: {}", run.stderr));
            continue;
        }
        if run.code != Some(expected) {
            failures.push(format!(
                "{shown}: exit {:?}, expected {expected}: {}",
                run.code,
                run.stderr.trim()
            ));
            continue;
        }
        if expected != 0 {
            let lines: Vec<&str> = run.stderr.lines().collect();
            let error_line = lines
                .first()
                .is_some_and(|l| l.starts_with("error: ") || l.starts_with("ffcv: error: "));
            if lines.len() != 1 || !error_line {
                failures.push(format!(
                    "{shown}: expected one error line, got: {}",
                    run.stderr
                ));
            }
        }
    }
}

#[test]
fn every_numeric_flag_at_its_extremes_exits_0_1_or_2_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let scalars = fixture("scalars");
    let scalars = scalars.to_str().unwrap();
    let arrays = fixture("bytes_ndarray");
    let arrays = arrays.to_str().unwrap();
    let jpegs = fixture("images_jpg");
    let jpegs = jpegs.to_str().unwrap();
    let out = dir.path().join("out.beton");
    let out = out.to_str().unwrap();
    let state = dir.path().join("state.json");
    let state = state.to_str().unwrap();
    let folder = image_folder(dir.path());
    let shard = webdataset_shard(dir.path(), &folder);
    let shard = shard.to_str().unwrap();
    let folder = folder.to_str().unwrap();
    let [parquet, arrow] = crate::cli_tables::label_files(dir.path());
    let tfrecord = dir.path().join("labels.tfrecord");
    crate::cli_tfrecord::label_file(&tfrecord, &[4, 5]);
    let (parquet, arrow, tfrecord) = (
        parquet.to_str().unwrap(),
        arrow.to_str().unwrap(),
        tfrecord.to_str().unwrap(),
    );
    let pages = dir.path().join("pages");
    let pages = pages.to_str().unwrap();

    let ok_zero_and_max: &[(&str, i32)] = &[("0", 0), (MAX, 0)];
    let dump = ["dump", scalars, "--count", "2"];
    let order = ["order", scalars];
    let mix = format!("{scalars}:1");
    let bench = [
        "bench",
        scalars,
        "--epochs",
        "1",
        "--warmup",
        "0",
        "--batch-size",
        "8",
    ];
    let bench_process = [
        "bench",
        scalars,
        "--epochs",
        "1",
        "--warmup",
        "0",
        "--batch-size",
        "8",
        "--no-os-cache",
    ];
    let bench_arrays = [
        "bench",
        arrays,
        "--epochs",
        "1",
        "--warmup",
        "0",
        "--batch-size",
        "8",
        "--no-os-cache",
    ];
    let doctor = [
        "doctor",
        scalars,
        "--batch-size",
        "8",
        "--time-budget",
        "0.2",
    ];
    let doctor_process = [
        "doctor",
        scalars,
        "--batch-size",
        "8",
        "--time-budget",
        "0.2",
        "--no-os-cache",
    ];
    let synthetic = [
        "write",
        "synthetic",
        out,
        "--kind",
        "scalars",
        "--samples",
        "4",
    ];
    let bytes = [
        "write",
        "synthetic",
        out,
        "--kind",
        "bytes",
        "--samples",
        "4",
    ];
    let ndarray = [
        "write",
        "synthetic",
        out,
        "--kind",
        "ndarray",
        "--samples",
        "4",
    ];
    let jpeg = [
        "write",
        "synthetic",
        out,
        "--kind",
        "jpeg",
        "--samples",
        "2",
    ];
    let synthetic_sharded = [
        "write",
        "synthetic",
        out,
        "--kind",
        "scalars",
        "--samples",
        "4",
        "--shards",
        "2",
    ];
    let webdataset = ["write", "webdataset", shard, out];
    let webdataset_proportion = [
        "write",
        "webdataset",
        shard,
        out,
        "--write-mode",
        "proportion",
    ];
    let tables = [
        ["write", "parquet", parquet, out],
        ["write", "arrow", arrow, out],
        ["write", "tfrecord", tfrecord, out],
    ];
    let tfrecord_proportion = [
        "write",
        "tfrecord",
        tfrecord,
        out,
        "--write-mode",
        "proportion",
    ];
    let folder_raw = ["write", "image-folder", folder, out];
    let folder_smart = [
        "write",
        "image-folder",
        folder,
        out,
        "--write-mode",
        "smart",
    ];
    let folder_proportion = [
        "write",
        "image-folder",
        folder,
        out,
        "--write-mode",
        "proportion",
    ];

    let rows = vec![
        // dump
        row(&["dump", scalars], "--start", "{}", &[("0", 0), (MAX, 1)]),
        row(&["dump", scalars], "--count", "{}", ok_zero_and_max),
        row(&dump, "--seed", "{}", ok_zero_and_max),
        row(
            &["dump", jpegs, "--count", "2"],
            "--max-image-pixels",
            "{}",
            &[(MAX, 0)],
        ),
        row(
            &["dump", jpegs, "--count", "2"],
            "--decoder",
            "image=center-crop:{}x8",
            &[],
        ),
        row(
            &["dump", jpegs, "--count", "2"],
            "--decoder",
            "image=center-crop:8x{}",
            &[],
        ),
        // A ratio above 1 is accepted (the crop is clamped to the image).
        row(
            &["dump", jpegs, "--count", "2"],
            "--decoder",
            "image=center-crop:8x8:{}",
            &[("1e20", 0), (MAX, 0), ("18446744073709551616", 0)],
        ),
        row(
            &["dump", jpegs, "--count", "2"],
            "--decoder",
            "image=random-resized-crop:{}x8",
            &[],
        ),
        row(
            &["dump", jpegs, "--count", "2"],
            "--decoder",
            "image=random-resized-crop:8x8:{},1",
            &[],
        ),
        row(
            &["dump", jpegs, "--count", "2"],
            "--decoder",
            "image=random-resized-crop:8x8:0.5,1:{},1.5",
            &[],
        ),
        // order
        row(&order, "--seed", "{}", ok_zero_and_max),
        row(&order, "--epoch", "{}", ok_zero_and_max),
        row(
            &["order", scalars, "--order", "random"],
            "--epoch",
            "{}",
            ok_zero_and_max,
        ),
        row(
            &["order", scalars, "--order", "random"],
            "--seed",
            "{}",
            ok_zero_and_max,
        ),
        row(&order, "--batch-size", "{}", &[]),
        row(
            &["order", "--mix", &mix],
            "--mix-samples-per-epoch",
            "{}",
            &[(MAX, 1)],
        ),
        row(
            &["order", arrays, "--order", "quasi-random"],
            "--buffer-pages",
            "{}",
            &[(MAX, 0)],
        ),
        row(
            &["order", scalars, "--rank", "0"],
            "--world-size",
            "{}",
            &[(MAX, 0)],
        ),
        row(
            &["order", scalars, "--world-size", "2"],
            "--rank",
            "{}",
            &[("0", 0), (MAX, 1)],
        ),
        // bench
        row(&bench, "--batch-size", "{}", &[]),
        row(&bench, "--num-workers", "{}", &[("-1", 0)]),
        row(&bench, "--seed", "{}", ok_zero_and_max),
        row(&bench, "--batches-ahead", "{}", &[]),
        // The scalar fixture has no data pages: a budget of 0 holds its (empty) schedule.
        row(&bench_process, "--max-memory", "{}", ok_zero_and_max),
        // A local file does not use the disk cache: any size above 0 runs.
        row(
            &[&bench_process[..], &["--page-cache-dir", pages]].concat(),
            "--page-cache-size",
            "{}",
            &[(MAX, 0)],
        ),
        row(&bench_arrays, "--max-memory", "{}", &[("0", 1), (MAX, 0)]),
        row(&bench_process, "--reader-threads", "{}", &[]),
        row(&bench_process, "--prefetch-ahead", "{}", ok_zero_and_max),
        row(&bench, "--max-image-pixels", "{}", &[(MAX, 0)]),
        // Stopping after 0 batches saves the epoch's start; u64::MAX stops at its end.
        row(
            &[&bench[..], &["--save-state", state]].concat(),
            "--stop-after",
            "{}",
            ok_zero_and_max,
        ),
        // u64::MAX ranks leave rank 0 no batch: a usage error.
        row(
            &[&bench[..], &["--rank", "0"]].concat(),
            "--world-size",
            "{}",
            &[],
        ),
        row(
            &[&bench[..], &["--world-size", "2"]].concat(),
            "--rank",
            "{}",
            &[("0", 0), (MAX, 1)],
        ),
        row(
            &["bench", scalars, "--warmup", "0", "--batch-size", "8"],
            "--epochs",
            "{}",
            &[(MAX, SKIP)],
        ),
        row(
            &["bench", scalars, "--epochs", "1", "--batch-size", "8"],
            "--warmup",
            "{}",
            &[("0", 0), (MAX, SKIP)],
        ),
        row(&bench, "--device", "cuda:{}", &[("0", SKIP)]),
        // doctor
        row(
            &["doctor", scalars, "--batch-size", "8"],
            "--time-budget",
            "{}",
            &[],
        ),
        row(
            &["doctor", scalars, "--time-budget", "0.2"],
            "--batch-size",
            "{}",
            &[],
        ),
        row(&doctor, "--num-workers", "{}", &[("-1", 0)]),
        row(&doctor, "--seed", "{}", ok_zero_and_max),
        row(&doctor, "--batches-ahead", "{}", &[]),
        row(&doctor_process, "--max-memory", "{}", ok_zero_and_max),
        row(&doctor_process, "--reader-threads", "{}", &[]),
        row(&doctor_process, "--prefetch-ahead", "{}", ok_zero_and_max),
        row(&doctor, "--max-image-pixels", "{}", &[(MAX, 0)]),
        row(
            &["doctor", scalars, "--no-measure", "--rank", "0"],
            "--world-size",
            "{}",
            &[(MAX, 0)],
        ),
        row(
            &["doctor", scalars, "--no-measure", "--world-size", "2"],
            "--rank",
            "{}",
            &[("0", 0)],
        ),
        row(&doctor, "--device", "cuda:{}", &[("0", SKIP)]),
        // write synthetic
        row(
            &["write", "synthetic", out, "--kind", "scalars"],
            "--samples",
            "{}",
            &[("0", 0), (MAX, 1)],
        ),
        row(&synthetic, "--seed", "{}", ok_zero_and_max),
        row(&synthetic, "--page-size", "{}", &[("0", 1), (MAX, 1)]),
        row(&synthetic, "--workers", "{}", &[]),
        row(&synthetic, "--var-rows", "{}", &[("0", 0)]),
        // 0 and more shards than the 4 samples are usage errors.
        row(&synthetic, "--shards", "{}", &[]),
        // Shard 0 of 2 is written; every other index is not below --shards.
        row(&synthetic_sharded, "--shard-index", "{}", &[("0", 0)]),
        row(&bytes, "--size", "{}", &[("0", 0)]),
        // A trailing 0 is refused by the writer: FFCV drops it when reading.
        row(&ndarray, "--shape", "{}", &[("0", 1)]),
        row(&ndarray, "--shape", "3,{}", &[("0", 1)]),
        row(&ndarray, "--shape", "{},3", &[("0", 0)]),
        row(&jpeg, "--min-size", "{}", &[]),
        row(&jpeg, "--max-size", "{}", &[]),
        row(&jpeg, "--jpeg-quality", "{}", &[]),
        // write image-folder
        row(&folder_raw, "--max-resolution", "{}", &[]),
        row(&folder_raw, "--jpeg-quality", "{}", &[]),
        row(&folder_smart, "--smart-threshold", "{}", ok_zero_and_max),
        row(
            &folder_proportion,
            "--compress-probability",
            "{}",
            &[("0", 0)],
        ),
        row(&folder_proportion, "--seed", "{}", ok_zero_and_max),
        row(&folder_raw, "--page-size", "{}", &[("0", 1), (MAX, 1)]),
        row(&folder_raw, "--workers", "{}", &[]),
        row(&folder_raw, "--shards", "{}", &[]),
        // write webdataset
        row(&webdataset, "--max-resolution", "{}", &[]),
        row(&webdataset, "--jpeg-quality", "{}", &[]),
        row(
            &webdataset_proportion,
            "--compress-probability",
            "{}",
            &[("0", 0)],
        ),
        row(&webdataset_proportion, "--seed", "{}", ok_zero_and_max),
        row(&webdataset, "--page-size", "{}", &[("0", 1), (MAX, 1)]),
        row(&webdataset, "--workers", "{}", &[]),
        row(&webdataset, "--shards", "{}", &[]),
        row(&webdataset, "--shard-index", "{}", &[("0", 0)]),
        // write parquet, arrow, tfrecord: one set of flags (write_table.rs's TableArgs)
        row(&tables[2], "--max-resolution", "{}", &[]),
        row(&tables[2], "--jpeg-quality", "{}", &[]),
        row(
            &tfrecord_proportion,
            "--compress-probability",
            "{}",
            &[("0", 0)],
        ),
        row(&tfrecord_proportion, "--seed", "{}", ok_zero_and_max),
        row(&tables[2], "--page-size", "{}", &[("0", 1), (MAX, 1)]),
        row(&tables[0], "--workers", "{}", &[]),
        row(&tables[1], "--workers", "{}", &[]),
        row(&tables[2], "--workers", "{}", &[]),
        row(&tables[0], "--shards", "{}", &[]),
        row(&tables[1], "--shard-index", "{}", &[("0", 0)]),
    ];
    let mut failures = Vec::new();
    for row in &rows {
        check(row, &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
