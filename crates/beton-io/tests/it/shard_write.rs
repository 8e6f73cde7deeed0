//! Sharded writes: naming, the contiguous split, each shard a valid file alone, the shards
//! in name order equal to a single-file write sample for sample, determinism, and errors
//! that leave nothing behind.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use beton_io::{
    DatasetWriter, Error, FieldMetadata, FieldSpec, FieldType, FieldValue, JsonValue, Reader,
    SourceError, from_fn, shard_path, shard_ranges,
};

const PAGE: u64 = 2 << 20;

fn fields() -> Vec<FieldSpec> {
    vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new("blob", FieldType::Bytes),
        FieldSpec::new("meta", FieldType::Json),
        FieldSpec::new("score", FieldType::Float),
    ]
}

/// Sample `i`: sizes from 1 byte to ~300 KiB so that pages fill unevenly.
fn sample(i: u64) -> Vec<FieldValue> {
    let len = 1 + (i * 7919 % 300_000) as usize;
    let blob = (0..len).map(|j| (i as usize * 31 + j) as u8).collect();
    vec![
        FieldValue::Int(i as i64 * 3 - 50),
        FieldValue::Bytes(blob),
        FieldValue::Json(JsonValue::String(format!("sample {i}"))),
        FieldValue::Float(i as f64 / 7.0),
    ]
}

fn write_shards(out: &Path, samples: u64, shards: u64, workers: usize) -> Vec<PathBuf> {
    let written = DatasetWriter::new(out, fields())
        .unwrap()
        .with_page_size(PAGE)
        .unwrap()
        .with_num_workers(workers)
        .write_shards(&from_fn(samples, |i| Ok(sample(i))), shards)
        .unwrap();
    written.into_iter().map(|s| s.path).collect()
}

/// A sample's metadata with file offsets zeroed: pointers differ between files, nothing
/// else may.
fn metadata_without_ptrs(reader: &Reader, sample: u64) -> Vec<FieldMetadata> {
    (0..reader.fields().len())
        .map(|f| match reader.metadata(sample, f).unwrap() {
            FieldMetadata::Bytes { size, .. } => FieldMetadata::Bytes { ptr: 0, size },
            FieldMetadata::Json { size, .. } => FieldMetadata::Json { ptr: 0, size },
            other => other,
        })
        .collect()
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn shard_names_put_number_and_count_before_the_extension() {
    let p = |s: &str| PathBuf::from(s);
    assert_eq!(
        shard_path(&p("data/train.beton"), 0, 4),
        p("data/train-00000-of-00004.beton")
    );
    assert_eq!(
        shard_path(&p("train.beton"), 3, 4),
        p("train-00003-of-00004.beton")
    );
    assert_eq!(shard_path(&p("train"), 1, 2), p("train-00001-of-00002"));
    assert_eq!(
        shard_path(&p("a.b.beton"), 7, 10),
        p("a.b-00007-of-00010.beton")
    );
    assert_eq!(
        shard_path(&p("x.beton"), 5, 123_456),
        p("x-000005-of-123456.beton")
    );
}

#[test]
fn the_split_is_contiguous_in_order_with_sizes_differing_by_at_most_one() {
    assert_eq!(shard_ranges(10, 3), vec![0..4, 4..7, 7..10]);
    assert_eq!(shard_ranges(8, 4), vec![0..2, 2..4, 4..6, 6..8]);
    assert_eq!(shard_ranges(5, 5), vec![0..1, 1..2, 2..3, 3..4, 4..5]);
    for samples in 1..60u64 {
        for shards in 1..=samples {
            let ranges = shard_ranges(samples, shards);
            assert_eq!(ranges.len() as u64, shards);
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges.last().unwrap().end, samples);
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
            let sizes: Vec<u64> = ranges.iter().map(|r| r.end - r.start).collect();
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(max - min <= 1, "{samples} in {shards}: {sizes:?}");
            assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "larger first");
        }
    }
}

#[test]
fn shards_open_alone_and_concatenate_to_the_single_file_write() {
    let dir = tempfile::tempdir().unwrap();
    let samples = 103;
    let single = dir.path().join("single.beton");
    DatasetWriter::new(&single, fields())
        .unwrap()
        .with_page_size(PAGE)
        .unwrap()
        .with_num_workers(1)
        .write(&from_fn(samples, |i| Ok(sample(i))))
        .unwrap();
    let single = Reader::open(&single).unwrap();
    // Two threads per shard: the split does not depend on how a shard is written.
    let paths = write_shards(&dir.path().join("train.beton"), samples, 4, 8);
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "train-00000-of-00004.beton",
            "train-00001-of-00004.beton",
            "train-00002-of-00004.beton",
            "train-00003-of-00004.beton"
        ]
    );
    let mut global = 0u64;
    for (path, range) in paths.iter().zip(shard_ranges(samples, 4)) {
        let shard = Reader::open(path).unwrap();
        assert_eq!(shard.num_samples(), range.end - range.start);
        assert_eq!(shard.page_size(), PAGE);
        for i in 0..shard.num_samples() {
            assert_eq!(range.start + i, global);
            assert_eq!(shard.read_sample(i).unwrap(), sample(global));
            assert_eq!(
                shard.read_sample(i).unwrap(),
                single.read_sample(global).unwrap()
            );
            assert_eq!(
                metadata_without_ptrs(&shard, i),
                metadata_without_ptrs(&single, global),
                "sample {global}"
            );
            global += 1;
        }
    }
    assert_eq!(global, samples);
    assert_eq!(
        dir_names(dir.path()).len(),
        5,
        "no temporary files remain: {:?}",
        dir_names(dir.path())
    );
}

#[test]
fn one_thread_per_shard_writes_each_block_as_a_single_worker_write_does_on_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let samples = 61;
    let first = write_shards(&dir.path().join("a.beton"), samples, 3, 3);
    let second = write_shards(&dir.path().join("b.beton"), samples, 3, 2);
    for (k, range) in shard_ranges(samples, 3).into_iter().enumerate() {
        let alone = dir.path().join(format!("alone-{k}.beton"));
        DatasetWriter::new(&alone, fields())
            .unwrap()
            .with_page_size(PAGE)
            .unwrap()
            .with_num_workers(1)
            .write(&from_fn(range.end - range.start, |i| {
                Ok(sample(range.start + i))
            }))
            .unwrap();
        let alone = std::fs::read(&alone).unwrap();
        assert!(std::fs::read(&first[k]).unwrap() == alone, "shard {k}");
        assert!(std::fs::read(&second[k]).unwrap() == alone, "shard {k}");
    }
}

#[test]
fn one_shard_writes_the_path_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("train.beton");
    let paths = write_shards(&out, 10, 1, 2);
    assert_eq!(paths, vec![out.clone()]);
    assert_eq!(dir_names(dir.path()), ["train.beton"]);
    assert_eq!(Reader::open(&out).unwrap().num_samples(), 10);
}

#[test]
fn zero_shards_or_more_shards_than_samples_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let writer = DatasetWriter::new(dir.path().join("t.beton"), fields()).unwrap();
    let source = from_fn(5, |i| Ok(sample(i)));
    for shards in [0, 6, u64::MAX] {
        let err = writer.write_shards(&source, shards).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidConfig { reason, .. } if reason.contains("1 to 5 shards")),
            "{shards}: {err}"
        );
    }
    assert!(dir_names(dir.path()).is_empty());
}

#[test]
fn a_failing_sample_names_its_shard_and_leaves_no_file_behind() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("train.beton");
    let source = from_fn(40, |i| {
        if i == 25 {
            Err(SourceError::from("cannot read image 25"))
        } else {
            Ok(sample(i))
        }
    });
    let err = DatasetWriter::new(&out, fields())
        .unwrap()
        .with_page_size(PAGE)
        .unwrap()
        .with_num_workers(4)
        .write_shards(&source, 4)
        .unwrap_err();
    // 40 in 4: shard 2 holds 20..30, so source sample 25 is its sample 5.
    let Error::Shard {
        shard,
        start,
        end,
        source,
        ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!((*shard, *start, *end), (2, 20, 30));
    assert!(
        matches!(&**source, Error::Source { path, sample: 5, .. } if path.ends_with("train-00002-of-00004.beton")),
        "{source}"
    );
    let text = err.to_string();
    assert!(text.contains("train-00002-of-00004.beton"), "{text}");
    assert!(text.contains("samples 20..30 of the source"), "{text}");
    assert!(
        dir_names(dir.path()).is_empty(),
        "{:?}",
        dir_names(dir.path())
    );
}

#[test]
fn progress_counts_the_whole_job_and_only_increases() {
    let dir = tempfile::tempdir().unwrap();
    let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    DatasetWriter::new(dir.path().join("p.beton"), fields())
        .unwrap()
        .with_page_size(PAGE)
        .unwrap()
        .with_num_workers(3)
        .with_chunk_size(4)
        .with_progress(move |done| log.lock().unwrap().push(done))
        .write_shards(&from_fn(50, |i| Ok(sample(i))), 3)
        .unwrap();
    let seen = seen.lock().unwrap();
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert_eq!(seen.last(), Some(&50));
}

#[test]
fn each_finished_shard_is_handed_over_with_its_final_bytes_before_the_set_is_renamed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("train.beton");
    // One thread: shards are written one after another, so shard k is handed over while
    // shards k+1.. are not written yet.
    // (shard, the bytes handed over, the folder's names at that moment)
    type Handed = (u64, Vec<u8>, Vec<String>);
    let seen: Mutex<Vec<Handed>> = Mutex::new(Vec::new());
    let written = DatasetWriter::new(&out, fields())
        .unwrap()
        .with_page_size(PAGE)
        .unwrap()
        .with_num_workers(1)
        .write_shards_each(&from_fn(10, |i| Ok(sample(i))), 3, &|k, file| {
            let bytes = std::fs::read(file).unwrap();
            seen.lock()
                .unwrap()
                .push((k, bytes, dir_names(file.parent().unwrap())));
        })
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), [0, 1, 2]);
    for ((k, bytes, names), shard) in seen.iter().zip(&written) {
        // The bytes handed over are the shard's final file.
        assert_eq!(*bytes, std::fs::read(&shard.path).unwrap(), "shard {k}");
        // No shard is in place yet (only temporary files), and later shards have not
        // started.
        assert!(
            names.iter().all(|n| !n.ends_with(".beton")),
            "shard {k}: {names:?}"
        );
        assert_eq!(names.len(), *k as usize + 1, "shard {k}: {names:?}");
    }
    // One shard: the file itself, in place.
    let one = dir.path().join("one.beton");
    let calls: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());
    DatasetWriter::new(&one, fields())
        .unwrap()
        .with_num_workers(1)
        .write_shards_each(&from_fn(4, |i| Ok(sample(i))), 1, &|k, file| {
            calls.lock().unwrap().push((k, file.to_path_buf()));
        })
        .unwrap();
    assert_eq!(calls.into_inner().unwrap(), [(0, one)]);
}

#[test]
fn after_a_failing_shard_the_handed_over_files_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("train.beton");
    let handed: Mutex<Vec<u64>> = Mutex::new(Vec::new());
    let err = DatasetWriter::new(&out, fields())
        .unwrap()
        .with_page_size(PAGE)
        .unwrap()
        .with_num_workers(1)
        .write_shards_each(
            &from_fn(9, |i| {
                if i == 7 {
                    Err(SourceError::from("sample 7 is unreadable"))
                } else {
                    Ok(sample(i))
                }
            }),
            3,
            &|k, _| handed.lock().unwrap().push(k),
        )
        .unwrap_err();
    assert!(matches!(err, Error::Shard { shard: 2, .. }), "{err}");
    assert_eq!(handed.into_inner().unwrap(), [0, 1]);
    assert!(
        dir_names(dir.path()).is_empty(),
        "{:?}",
        dir_names(dir.path())
    );
}
