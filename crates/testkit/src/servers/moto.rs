//! The moto S3 server (a Python program) on loopback, for the S3 tests and the remote
//! benchmark: found, started on a free port, given buckets and objects, and stopped
//! (killed and reaped) on drop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::spawned::{Spawned, exchange};

/// How long an upload may wait for moto's answer: it stores the whole object first,
/// which takes seconds for the benchmark's files of a few hundred megabytes.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// What to do when no `moto_server` is found.
const MISSING: &str = "moto_server not found (set FFCV_MOTO_SERVER, or pip install \
                       'moto[server]', e.g. into target/moto-venv)";

/// A moto S3 server on loopback, stopped (killed and reaped) on drop.
pub struct Moto {
    _server: Spawned,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The port.
    pub addr: SocketAddr,
}

/// Where a `moto_server` executable may be: `FFCV_MOTO_SERVER`, the CI's virtual
/// environment under `target/`, then `PATH`.
fn moto_candidates() -> Vec<PathBuf> {
    let mut c = Vec::new();
    if let Some(p) = std::env::var_os("FFCV_MOTO_SERVER") {
        c.push(PathBuf::from(p));
    }
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    c.push(root.join("target/moto-venv/bin/moto_server"));
    if let Some(path) = std::env::var_os("PATH") {
        c.extend(std::env::split_paths(&path).map(|d| d.join("moto_server")));
    }
    c
}

impl Moto {
    /// The `moto_server` [`start`](Self::start) would run, or why there is none (so that
    /// a caller can skip its work before preparing anything for moto).
    pub fn executable() -> Result<PathBuf, String> {
        moto_candidates()
            .into_iter()
            .find(|p| p.is_file())
            .ok_or_else(|| MISSING.to_owned())
    }

    /// Starts moto on a free loopback port and waits (at most 30 s) until it answers;
    /// `Err` says why it could not (the caller skips its test with that message).
    pub fn start() -> Result<Moto, String> {
        let server = Spawned::start(moto_candidates(), MISSING, |port| {
            vec![
                "-H".into(),
                "127.0.0.1".into(),
                "-p".into(),
                port.to_string(),
            ]
        })?;
        let addr = server.addr;
        Ok(Moto {
            _server: server,
            endpoint: format!("http://{addr}"),
            addr,
        })
    }

    /// The `AWS_*` variables that point `object_store`'s S3 client (and a CLI child
    /// inheriting them) at this server, with moto's test credentials.
    pub fn aws_env(&self) -> [(&'static str, String); 5] {
        [
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// Creates `bucket` (if new) and uploads `bytes` as `key`.
    ///
    /// # Panics
    ///
    /// If moto refuses either (a test cannot go on without the object).
    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        self.try_put(bucket, key, bytes)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Creates `bucket` (if new) and uploads `bytes` as `key`; `Err` says what moto
    /// answered.
    pub fn try_put(&self, bucket: &str, key: &str, bytes: &[u8]) -> Result<(), String> {
        self.create_bucket(bucket)?;
        let (code, answer) = self
            .request_signed(&format!("/{bucket}/{key}"), bytes)
            .map_err(|e| format!("upload {bucket}/{key} to moto: {e}"))?;
        if code == 200 {
            Ok(())
        } else {
            Err(format!(
                "upload {bucket}/{key} to moto: {code} {}",
                shortened(&answer)
            ))
        }
    }

    /// Creates `bucket`; one that exists already is no error.
    pub fn create_bucket(&self, bucket: &str) -> Result<(), String> {
        let (code, answer) = self
            .request_signed(&format!("/{bucket}"), b"")
            .map_err(|e| format!("create bucket {bucket} in moto: {e}"))?;
        if code == 200 || code == 409 {
            Ok(())
        } else {
            Err(format!(
                "create bucket {bucket} in moto: {code} {}",
                shortened(&answer)
            ))
        }
    }

    /// `PUT path` with an AWS-style `Authorization` header: moto routes a request to S3
    /// by the service in its credential scope and does not check the signature, so a
    /// fixed one does.
    fn request_signed(&self, path: &str, body: &[u8]) -> std::io::Result<(u16, String)> {
        let head = format!(
            "PUT {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
             x-amz-date: 20261201T120000Z\r\nx-amz-content-sha256: UNSIGNED-PAYLOAD\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/s3/aws4_request, \
             SignedHeaders=host, Signature=0000\r\n\r\n",
            self.addr,
            body.len()
        );
        exchange(&self.addr, ANSWER_TIMEOUT, &head, body)
    }
}

/// The start of an answer, for an error message.
fn shortened(answer: &str) -> String {
    answer.chars().take(300).collect()
}
