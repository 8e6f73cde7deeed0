//! `ffcv write` with inputs and OUT in an S3-compatible store (moto on loopback): tar
//! shards named by a `prefix*suffix` URL or a brace list convert to shards uploaded under
//! OUT's prefix, byte for byte those of the same write from and to local files; a corrupt
//! input is an error naming its URL and leaves no object under OUT, or with
//! `--skip-unreadable` is listed by its URL in a skip report uploaded beside OUT; the
//! staging directory is removed. Skips, saying why, when moto cannot be started (`.ci/run` installs it).

use crate::cli_webdataset::generated_shards;

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
