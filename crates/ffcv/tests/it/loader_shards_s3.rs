//! Shards in an S3-compatible store (the moto server on loopback, configured only by the
//! `AWS_*` variables): an `s3://bucket/prefix` names every `.beton` object under it,
//! sorted, and reads like the single local file; a prefix matching nothing is an error
//! naming it. Skips with a message when moto cannot start (`.ci/run` installs it).

#![cfg(feature = "remote")]

use crate::loader_support;
use ffcv_testkit::servers;

use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, from_fn};
use ffcv::{Dataset, Loader, Order};
use loader_support::blob;

fn write_range(path: &std::path::Path, start: u64, end: u64) {
    let fields = vec![
        FieldSpec::new("index", FieldType::Int),
        FieldSpec::new("blob", FieldType::Bytes),
    ];
    DatasetWriter::new(path, fields)
        .unwrap()
        .with_page_size(2 << 20)
        .unwrap()
        .write(&from_fn(end - start, |i| {
            let id = start + i;
            Ok(vec![
                FieldValue::Int(id as i64),
                FieldValue::Bytes(blob(id)),
            ])
        }))
        .unwrap();
}

/// In its own process, because it sets the process's environment before any thread of
/// its own starts.
#[test]
fn an_s3_prefix_names_the_shards_and_reads_like_the_single_file() {
    ffcv_testkit::own_process(
        module_path!(),
        "an_s3_prefix_names_the_shards_and_reads_like_the_single_file",
        || {
            let moto = match servers::Moto::start() {
                Ok(m) => m,
                Err(why) => {
                    eprintln!("SKIPPED s3 shard tests: moto server unavailable: {why}");
                    return;
                }
            };
            for (k, v) in [
                ("AWS_ENDPOINT_URL", moto.endpoint.clone()),
                ("AWS_ALLOW_HTTP", "true".into()),
                ("AWS_ACCESS_KEY_ID", "testing".into()),
                ("AWS_SECRET_ACCESS_KEY", "testing".into()),
                ("AWS_REGION", "us-east-1".into()),
            ] {
                // SAFETY: the test runs alone in its own process (`own_process`); nothing else
                // there reads or writes the environment concurrently.
                unsafe { std::env::set_var(k, v) };
            }
            let dir = tempfile::tempdir().unwrap();
            let single = dir.path().join("single.beton");
            write_range(&single, 0, 120);
            // Uploaded out of order, plus objects the prefix must skip.
            for (i, (start, end)) in [(2, (80, 120)), (0, (0, 30)), (1, (30, 80))] {
                let p = dir.path().join(format!("part-{i}.beton"));
                write_range(&p, start, end);
                let key = format!("data/train-{i:05}-of-00003.beton");
                moto.put("shards", &key, &std::fs::read(&p).unwrap());
            }
            moto.put("shards", "data/train-index.json", b"{}");
            moto.put(
                "shards",
                "data/valid-00000-of-00001.beton",
                &std::fs::read(&single).unwrap(),
            );

            let d = Dataset::open_shards(["s3://shards/data/train-"]).unwrap();
            let names: Vec<String> = d
                .shards
                .iter()
                .map(|s| s.path.display().to_string())
                .collect();
            assert_eq!(
                names,
                (0..3)
                    .map(|i| format!("s3://shards/data/train-{i:05}-of-00003.beton"))
                    .collect::<Vec<_>>()
            );
            assert!(d.is_remote());
            let build = |b: ffcv::LoaderBuilder| {
                b.batch_size(8)
                    .drop_last(false)
                    .num_workers(2)
                    .order(Order::Random)
                    .seed(4)
                    .build()
                    .unwrap()
            };
            let mut one = build(Loader::builder(&single));
            let mut set = build(Loader::builder_shards(["s3://shards/data/train-*"]));
            let snap = |l: &mut Loader| -> Vec<(Vec<u64>, Vec<u8>)> {
                l.iter()
                    .map(|b| {
                        let b = b.unwrap();
                        (
                            b.sample_ids().to_vec(),
                            b.output("blob").unwrap().bytes().to_vec(),
                        )
                    })
                    .collect()
            };
            assert!(snap(&mut set) == snap(&mut one));

            let err = Dataset::open_shards(["s3://shards/data/test-"])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("s3://shards/data/test-") && err.contains("no .beton object"),
                "{err}"
            );
        },
    );
}
