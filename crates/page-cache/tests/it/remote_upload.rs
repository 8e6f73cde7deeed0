//! Objects written by `page_cache::remote::upload` to an S3-compatible store (moto on
//! loopback): a multipart upload reads back byte for byte through `ObjectReader`, and an
//! upload whose input fails part-way leaves no object under its key. Skips, saying why,
//! when moto cannot be started (`.ci/run` installs it).

#![cfg(feature = "remote")]

use ffcv_testkit::servers::Moto;

use std::io::{self, Read};
use std::time::Duration;

use page_cache::remote::listing::list_prefix_ending;
use page_cache::remote::stream::{ObjectReader, STREAM_CHUNK_BYTES};
use page_cache::remote::upload::{UPLOAD_PART_BYTES, upload_from};
use page_cache::remote::{ObjectSource, RemoteConfig};

fn quick() -> RemoteConfig {
    RemoteConfig {
        request_timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(2),
        max_retries: 2,
        ..RemoteConfig::default()
    }
}

/// Bytes that differ at every offset (a misplaced part shows).
fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// Gives `bytes`, then fails.
struct FailingAfter {
    bytes: io::Cursor<Vec<u8>>,
}

impl Read for FailingAfter {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.bytes.read(buf)? {
            0 => Err(io::Error::other("the input broke")),
            n => Ok(n),
        }
    }
}

/// In its own process, because it sets the process's environment (the `AWS_*`
/// variables) before any thread of its own starts.
#[test]
fn uploads_commit_whole_objects_and_failed_ones_leave_none() {
    ffcv_testkit::own_process(
        module_path!(),
        "uploads_commit_whole_objects_and_failed_ones_leave_none",
        || {
            let moto = match Moto::start() {
                Ok(m) => m,
                Err(why) => {
                    eprintln!("SKIPPED upload tests: moto server unavailable: {why}");
                    return;
                }
            };
            for (k, v) in moto.aws_env() {
                // SAFETY: the test runs alone in its own process (`own_process`), and
                // nothing else there reads or writes the environment concurrently.
                unsafe { std::env::set_var(k, v) };
            }
            moto.create_bucket("out").unwrap();
            let config = quick();

            // Three parts (8 + 8 + 4 MiB and a few bytes), read back in two chunks.
            let len = 2 * UPLOAD_PART_BYTES + (4 << 20) + 17;
            assert!(len as u64 > STREAM_CHUNK_BYTES);
            let bytes = pattern(len);
            let url = "s3://out/set/train-00000-of-00002.beton";
            let stats = upload_from(&mut io::Cursor::new(bytes.clone()), url, &config).unwrap();
            assert_eq!((stats.bytes, stats.parts), (len as u64, 3));
            let mut reader = ObjectReader::open(url, &config).unwrap();
            assert_eq!(reader.len(), len as u64);
            let mut back = Vec::new();
            reader.read_to_end(&mut back).unwrap();
            assert!(back == bytes, "the object reads back as uploaded");
            // A reader dropped part-way stops its fetcher (the drop joins it).
            let mut partial = ObjectReader::open(url, &config).unwrap();
            let mut head = vec![0; 1000];
            partial.read_exact(&mut head).unwrap();
            assert_eq!(head, bytes[..1000]);
            drop(partial);

            // An input that breaks after 12 MiB: an error, and no object under the key.
            let broken = "s3://out/set/train-00001-of-00002.beton";
            let mut input = FailingAfter {
                bytes: io::Cursor::new(pattern(12 << 20)),
            };
            let err = upload_from(&mut input, broken, &config).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("nothing committed"), "{text}");
            assert!(text.contains("the input broke"), "{text}");
            assert_eq!(
                list_prefix_ending("s3://out/set/train-", ".beton", &config).unwrap(),
                vec![url.to_owned()]
            );
            let missing = ObjectSource::open(broken, &config).unwrap_err();
            assert_eq!(missing.kind(), io::ErrorKind::NotFound, "{missing}");

            // An empty input is an empty object.
            let empty = "s3://out/empty.bin";
            upload_from(&mut io::empty(), empty, &config).unwrap();
            let mut reader = ObjectReader::open(empty, &config).unwrap();
            let mut back = Vec::new();
            reader.read_to_end(&mut back).unwrap();
            assert!(back.is_empty());

            // HTTP servers take no uploads.
            let err =
                upload_from(&mut io::empty(), "http://127.0.0.1:1/x.beton", &config).unwrap_err();
            assert!(err.to_string().contains("s3://, gs:// or az://"), "{err}");
        },
    );
}
