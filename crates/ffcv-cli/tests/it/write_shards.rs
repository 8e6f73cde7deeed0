//! `ffcv write … --shards N`: N files named `OUT-0000k-of-0000N.beton`, each valid alone,
//! whose samples in name order are the single-file write's; the same bytes on every run
//! with one thread per shard; read back as one dataset they dump as the single file; bad
//! counts are usage errors (exit 2).

use crate::support;

use std::path::{Path, PathBuf};

use beton_io::Reader;
use support::ffcv;

fn synthetic(out: &Path, samples: &str, extra: &[&str]) -> support::Run {
    let mut args = vec![
        "write",
        "synthetic",
        out.to_str().unwrap(),
        "--kind",
        "bytes",
        "--samples",
        samples,
        "--size",
        "40KiB",
        "--page-size",
        "2MiB",
    ];
    args.extend_from_slice(extra);
    ffcv(&args)
}

fn shard_names(dir: &Path, stem: &str, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|k| dir.join(format!("{stem}-{k:05}-of-{n:05}.beton")))
        .collect()
}

/// Every sample of the shards in order equals the single file's.
fn assert_concatenation_equals(shards: &[PathBuf], single: &Path) {
    let single = Reader::open(single).unwrap();
    let mut global = 0;
    for shard in shards {
        let reader = Reader::open(shard).unwrap();
        assert!(reader.num_samples() > 0, "{}", shard.display());
        for i in 0..reader.num_samples() {
            assert_eq!(
                reader.read_sample(i).unwrap(),
                single.read_sample(global).unwrap(),
                "{} sample {i}",
                shard.display()
            );
            global += 1;
        }
    }
    assert_eq!(global, single.num_samples());
}

#[test]
fn synthetic_shards_concatenate_to_the_single_file_and_repeat_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let single = dir.path().join("single.beton");
    let run = synthetic(&single, "50", &["--workers", "1"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let first_dir = dir.path().join("a");
    let second_dir = dir.path().join("b");
    std::fs::create_dir_all(&first_dir).unwrap();
    std::fs::create_dir_all(&second_dir).unwrap();
    for d in [&first_dir, &second_dir] {
        let run = synthetic(
            &d.join("train.beton"),
            "50",
            &["--shards", "4", "--workers", "4"],
        );
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert!(
            run.stdout.starts_with("wrote 4 shards ")
                && run.stdout.contains("train-00000-of-00004.beton … ")
                && run.stdout.contains("50 samples of kind bytes"),
            "{}",
            run.stdout
        );
        assert!(
            run.stdout
                .contains("train-00003-of-00004.beton: samples 38..50"),
            "{}",
            run.stdout
        );
        assert!(!d.join("train.beton").exists());
    }
    let first = shard_names(&first_dir, "train", 4);
    assert_concatenation_equals(&first, &single);
    // Read back as one dataset (a pattern), the shards dump as the single file does.
    let pattern = format!("{}/train-*-of-00004.beton", first_dir.display());
    let set = ffcv(["dump", pattern.as_str()]);
    let one = ffcv(["dump", single.to_str().unwrap()]);
    assert_eq!(set.code, Some(0), "{}", set.stderr);
    assert_eq!(set.stdout.lines().count(), 50);
    assert!(set.stdout == one.stdout, "the set dumps as the single file");
    for (a, b) in first.iter().zip(shard_names(&second_dir, "train", 4)) {
        assert!(
            std::fs::read(a).unwrap() == std::fs::read(&b).unwrap(),
            "{}",
            a.display()
        );
    }
    assert_eq!(
        std::fs::read_dir(&first_dir).unwrap().count(),
        4,
        "no temporary files"
    );
}

#[test]
fn one_shard_writes_out_itself() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("train.beton");
    let run = synthetic(&out, "5", &["--shards", "1"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with(&format!("wrote {}: 5 samples", out.display())),
        "{}",
        run.stdout
    );
    assert_eq!(Reader::open(&out).unwrap().num_samples(), 5);
}

#[test]
fn bad_shard_counts_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.beton");
    for (shards, needle) in [
        ("0", "--shards"),
        ("-3", "-3"),
        ("x", "--shards"),
        ("6", "--shards 6 is more than the 5 samples"),
    ] {
        let run = synthetic(&out, "5", &["--shards", shards]);
        assert_eq!(run.code, Some(2), "{shards}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{shards}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"));
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

fn write_png(path: &Path, w: u32, h: u32, k: u32) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut encoder = png::Encoder::new(file, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let pixels: Vec<u8> = (0..w * h * 3).map(|i| (i * 7 + k * 31) as u8).collect();
    encoder
        .write_header()
        .unwrap()
        .write_image_data(&pixels)
        .unwrap();
}

#[test]
fn image_folder_shards_concatenate_to_the_single_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    for (class, files) in [("a_cat", 2u32), ("b_dog", 3)] {
        std::fs::create_dir_all(src.join(class)).unwrap();
        for f in 0..files {
            write_png(
                &src.join(class).join(format!("{f}.png")),
                10 + f,
                7 + f,
                f + files,
            );
        }
    }
    let folder = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "write",
            "image-folder",
            src.to_str().unwrap(),
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        ffcv(&args)
    };
    let single = dir.path().join("single.beton");
    assert_eq!(folder(&single, &[]).code, Some(0));
    let run = folder(&dir.path().join("imgs.beton"), &["--shards", "2"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout.contains("5 images in 2 classes"),
        "{}",
        run.stdout
    );
    let shards = shard_names(dir.path(), "imgs", 2);
    assert_eq!(Reader::open(&shards[0]).unwrap().num_samples(), 3);
    assert_concatenation_equals(&shards, &single);
    let run = folder(&dir.path().join("x.beton"), &["--shards", "6"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("more than the 5 images"),
        "{}",
        run.stderr
    );
}
