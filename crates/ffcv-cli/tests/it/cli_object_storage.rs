//! `ffcv write` with inputs and OUT in an S3-compatible store (moto on loopback): tar
//! shards named by a `prefix*suffix` URL or a brace list convert to shards uploaded under
//! OUT's prefix, byte for byte those of the same write from and to local files; a corrupt
//! input is an error naming its URL and leaves no object under OUT, or with
//! `--skip-unreadable` is listed by its URL in a skip report uploaded beside OUT; a
//! sharded write whose last shard fails after the first ones were uploaded (each is
//! uploaded as soon as it is written) deletes them, so no shard of the failed set is left;
//! the staging directory is removed. Skips, saying why, when moto cannot be started (`.ci/run` installs it).

use crate::cli_webdataset::{generated_shards, tar};

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output};

use ffcv::page_cache::remote::RemoteConfig;
use ffcv::page_cache::remote::listing::list_prefix_ending;
use ffcv::page_cache::remote::stream::ObjectReader;
use ffcv_testkit::servers::Moto;

/// The CLI with `TMPDIR` (where it stages objects) set to `tmp`.
fn ffcv(tmp: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ffcv"))
        .args(args)
        .env("TMPDIR", tmp)
        .output()
        .unwrap()
}

fn object(url: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    ObjectReader::open(url, &RemoteConfig::default())
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    bytes
}

/// In its own process, because it sets the process's environment (the `AWS_*`
/// variables, which the CLI runs inherit) before any thread of its own starts.
#[test]
fn webdataset_shards_in_s3_convert_to_shards_in_s3_as_local_files_do() {
    ffcv_testkit::own_process(
        module_path!(),
        "webdataset_shards_in_s3_convert_to_shards_in_s3_as_local_files_do",
        || {
            let moto = match Moto::start() {
                Ok(m) => m,
                Err(why) => {
                    eprintln!("SKIPPED object-storage writes: moto server unavailable: {why}");
                    return;
                }
            };
            for (k, v) in moto.aws_env() {
                // SAFETY: the test runs alone in its own process (`own_process`), and
                // nothing else there reads or writes the environment concurrently.
                unsafe { std::env::set_var(k, v) };
            }
            let dir = tempfile::tempdir().unwrap();
            let tmp = tempfile::tempdir().unwrap();
            generated_shards(dir.path());
            moto.create_bucket("outputs").unwrap();
            for s in 0..3 {
                let name = format!("shard-{s:03}.tar");
                moto.put(
                    "inputs",
                    &format!("wds/{name}"),
                    &std::fs::read(dir.path().join(&name)).unwrap(),
                );
            }

            // The local write: two shards, one writer thread (a byte-exact layout).
            let local_out = dir.path().join("train.beton");
            let shards = format!("{}/shard-{{000..002}}.tar", dir.path().display());
            let local = ffcv(
                tmp.path(),
                &[
                    "write",
                    "webdataset",
                    &shards,
                    local_out.to_str().unwrap(),
                    "--shards",
                    "2",
                    "--workers",
                    "1",
                ],
            );
            assert!(
                local.status.success(),
                "{}",
                String::from_utf8_lossy(&local.stderr)
            );

            for (input, prefix) in [
                ("s3://inputs/wds/shard-*.tar", "s3://outputs/glob/"),
                (
                    "s3://inputs/wds/shard-{000..002}.tar",
                    "s3://outputs/braces/",
                ),
            ] {
                let out = format!("{prefix}train.beton");
                let run = ffcv(
                    tmp.path(),
                    &[
                        "write",
                        "webdataset",
                        input,
                        &out,
                        "--shards",
                        "2",
                        "--workers",
                        "1",
                    ],
                );
                let stdout = String::from_utf8_lossy(&run.stdout);
                assert!(
                    run.status.success(),
                    "{input}: {}",
                    String::from_utf8_lossy(&run.stderr)
                );
                assert!(
                    stdout.contains(&format!("{prefix}train-00000-of-00002.beton")),
                    "{stdout}"
                );
                let listed = list_prefix_ending(
                    &format!("{prefix}train-"),
                    ".beton",
                    &RemoteConfig::default(),
                )
                .unwrap();
                assert_eq!(
                    listed,
                    vec![
                        format!("{prefix}train-00000-of-00002.beton"),
                        format!("{prefix}train-00001-of-00002.beton")
                    ]
                );
                for (k, url) in listed.iter().enumerate() {
                    let local =
                        std::fs::read(dir.path().join(format!("train-0000{k}-of-00002.beton")))
                            .unwrap();
                    assert!(
                        object(url) == local,
                        "{url} differs from the local shard {k}"
                    );
                }
                // Nothing is left in the staging directory.
                assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "{input}");
            }

            // One shard index of the split, from S3 to S3: shard 1 alone.
            let run = ffcv(
                tmp.path(),
                &[
                    "write",
                    "webdataset",
                    "s3://inputs/wds/shard-*.tar",
                    "s3://outputs/one/train.beton",
                    "--shards",
                    "2",
                    "--shard-index",
                    "1",
                    "--workers",
                    "1",
                ],
            );
            assert!(
                run.status.success(),
                "{}",
                String::from_utf8_lossy(&run.stderr)
            );
            let local = std::fs::read(dir.path().join("train-00001-of-00002.beton")).unwrap();
            assert!(object("s3://outputs/one/train-00001-of-00002.beton") == local);

            // A broken tar among the inputs: exit 1, the URL named, nothing under OUT.
            moto.put(
                "inputs",
                "bad/shard-000.tar",
                &std::fs::read(dir.path().join("shard-000.tar")).unwrap(),
            );
            moto.put("inputs", "bad/shard-001.tar", &[7u8; 700]);
            let run = ffcv(
                tmp.path(),
                &[
                    "write",
                    "webdataset",
                    "s3://inputs/bad/shard-*.tar",
                    "s3://outputs/bad/train.beton",
                ],
            );
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert_eq!(run.status.code(), Some(1), "{stderr}");
            assert!(stderr.contains("s3://inputs/bad/shard-001.tar"), "{stderr}");
            assert!(
                list_prefix_ending("s3://outputs/bad/", ".beton", &RemoteConfig::default())
                    .unwrap()
                    .is_empty()
            );
            assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);

            // With --skip-unreadable the broken shard is listed by its URL, the write
            // goes on, and the skip report is uploaded beside OUT.
            let run = ffcv(
                tmp.path(),
                &[
                    "write",
                    "webdataset",
                    "s3://inputs/bad/shard-*.tar",
                    "s3://outputs/skip/train.beton",
                    "--skip-unreadable",
                ],
            );
            let stdout = String::from_utf8_lossy(&run.stdout);
            assert!(
                run.status.success(),
                "{}",
                String::from_utf8_lossy(&run.stderr)
            );
            assert!(stdout.contains("s3://inputs/bad/shard-001.tar"), "{stdout}");
            assert!(
                stdout.contains("listed in s3://outputs/skip/train.beton.skipped.json"),
                "{stdout}"
            );
            let report =
                String::from_utf8(object("s3://outputs/skip/train.beton.skipped.json")).unwrap();
            assert!(
                report.contains("\"s3://inputs/bad/shard-001.tar\""),
                "{report}"
            );
            assert!(
                !report.contains(&tmp.path().display().to_string()),
                "{report}"
            );
            assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);

            // Shards are uploaded as each is written (one thread: shard 0, then 1, then
            // 2); the last fails on its record `k8`, after shards 0 and 1 were handed over
            // for upload. The write fails naming the record, and leaves no shard.
            let labels = dir.path().join("labels.tar");
            let members: Vec<(String, Vec<u8>)> = (0..9)
                .map(|i| {
                    let cls = if i == 8 {
                        "eight".to_owned()
                    } else {
                        i.to_string()
                    };
                    (format!("k{i}.cls"), cls.into_bytes())
                })
                .collect();
            tar(&labels, &members);
            moto.put(
                "inputs",
                "late/labels.tar",
                &std::fs::read(&labels).unwrap(),
            );
            let run = ffcv(
                tmp.path(),
                &[
                    "write",
                    "webdataset",
                    "s3://inputs/late/labels.tar",
                    "s3://outputs/late/train.beton",
                    "--field",
                    "label=cls:int",
                    "--shards",
                    "3",
                    "--workers",
                    "1",
                ],
            );
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert_eq!(run.status.code(), Some(1), "{stderr}");
            assert!(
                stderr.contains(
                    "s3://outputs/late/train-00002-of-00003.beton: sample source failed at \
                     sample 2: s3://inputs/late/labels.tar: record `k8`"
                ),
                "{stderr}"
            );
            assert!(
                list_prefix_ending("s3://outputs/late/", ".beton", &RemoteConfig::default())
                    .unwrap()
                    .is_empty()
            );
            assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
            // The same set without the bad record: all three shards, each the bytes of
            // the local write.
            tar(&labels, &members[..8]);
            moto.put(
                "inputs",
                "late/labels.tar",
                &std::fs::read(&labels).unwrap(),
            );
            let args = |out: &str| {
                vec![
                    "write".to_owned(),
                    "webdataset".to_owned(),
                    "s3://inputs/late/labels.tar".to_owned(),
                    out.to_owned(),
                    "--field".to_owned(),
                    "label=cls:int".to_owned(),
                    "--shards".to_owned(),
                    "3".to_owned(),
                    "--workers".to_owned(),
                    "1".to_owned(),
                ]
            };
            let local = dir.path().join("late.beton").display().to_string();
            for out in ["s3://outputs/late/train.beton", local.as_str()] {
                let args = args(out);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let run = ffcv(tmp.path(), &args);
                assert!(
                    run.status.success(),
                    "{}",
                    String::from_utf8_lossy(&run.stderr)
                );
            }
            for k in 0..3 {
                let name = format!("-{k:05}-of-00003.beton");
                assert!(
                    object(&format!("s3://outputs/late/train{name}"))
                        == std::fs::read(dir.path().join(format!("late{name}"))).unwrap(),
                    "shard {k}"
                );
            }

            // A missing object and an HTTP OUT are one-line errors.
            let run = ffcv(
                tmp.path(),
                &[
                    "write",
                    "webdataset",
                    "s3://inputs/none-*.tar",
                    "s3://outputs/x.beton",
                ],
            );
            assert_eq!(
                run.status.code(),
                Some(2),
                "{}",
                String::from_utf8_lossy(&run.stderr)
            );
            assert!(String::from_utf8_lossy(&run.stderr).contains("no object matches"));
            let run = ffcv(
                tmp.path(),
                &["write", "webdataset", &shards, "http://127.0.0.1:1/x.beton"],
            );
            assert_eq!(
                run.status.code(),
                Some(2),
                "{}",
                String::from_utf8_lossy(&run.stderr)
            );
            assert!(String::from_utf8_lossy(&run.stderr).contains("s3://, gs:// or az://"));
        },
    );
}
