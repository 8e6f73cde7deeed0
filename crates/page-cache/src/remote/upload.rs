//! Writing objects (feature `remote`): [`upload_file`] and [`upload_from`] put bytes at an
//! `s3://`, `gs://` or `az://` URL as a multipart upload that is committed only once every
//! part arrived. Until the commit the store shows no object under the key (S3's
//! `CompleteMultipartUpload`, GCS's and Azure's block commit), so an upload that fails or
//! is interrupted leaves nothing that looks like a finished file; a failed upload is
//! aborted, which frees its parts. [`delete`] removes an object (the shards a failed
//! sharded write had already committed).

use std::io::{self, Read};
use std::path::Path;
use std::time::{Duration, Instant};

use object_store::{ObjectStoreExt, WriteMultipart};

use super::{RemoteConfig, connect, remote_kind};
use crate::source::SourceKind;

/// Bytes per uploaded part: above S3's 5 MiB minimum for every part but the last.
pub const UPLOAD_PART_BYTES: usize = 8 << 20;

/// Parts in flight at once per upload.
const UPLOAD_CONCURRENCY: usize = 4;

/// What an upload sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadStats {
    /// Bytes of the object.
    pub bytes: u64,
    /// Parts sent.
    pub parts: u64,
    /// Time from the first request to the commit.
    pub elapsed: Duration,
}

/// Uploads the local file `path` to `url` (see the module docs).
pub fn upload_file(path: &Path, url: &str, config: &RemoteConfig) -> io::Result<UploadStats> {
    let mut file = std::fs::File::open(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("open {} to upload it: {e}", path.display()),
        )
    })?;
    upload_from(&mut file, url, config)
}

/// Uploads what `reader` gives up to its end to `url` (see the module docs). An error of
/// the reader aborts the upload.
pub fn upload_from(
    reader: &mut dyn Read,
    url: &str,
    config: &RemoteConfig,
) -> io::Result<UploadStats> {
    let kind = remote_kind(url).filter(|k| *k != SourceKind::Http);
    let Some(kind) = kind else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{url}: uploads go to s3://, gs:// or az:// URLs"),
        ));
    };
    // reqwest is built without a default TLS provider; see `ObjectSource::open`.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (store, location) = connect(url, kind, config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("ffcv-object-upload")
        .enable_all()
        .build()?;
    let started = Instant::now();
    let failed =
        |what: &str, e: object_store::Error| io::Error::other(format!("{what} {url}: {e}"));
    let result = runtime.block_on(async {
        let upload = store
            .put_multipart(&location)
            .await
            .map_err(|e| failed("start the upload of", e))?;
        let mut parts = WriteMultipart::new_with_chunk_size(upload, UPLOAD_PART_BYTES);
        let mut buf = vec![0u8; UPLOAD_PART_BYTES];
        let mut bytes = 0u64;
        loop {
            // Reading a local file blocks this worker briefly; the other drives the parts.
            let n = match read_full(reader, &mut buf) {
                Ok(n) => n,
                Err(e) => {
                    let _ = parts.abort().await;
                    return Err(io::Error::new(
                        e.kind(),
                        format!("upload to {url} stopped, nothing committed: {e}"),
                    ));
                }
            };
            if n == 0 {
                break;
            }
            if let Err(e) = parts.wait_for_capacity(UPLOAD_CONCURRENCY).await {
                let _ = parts.abort().await;
                return Err(failed("upload a part of", e));
            }
            parts.write(&buf[..n]);
            bytes += n as u64;
        }
        parts
            .finish()
            .await
            .map_err(|e| failed("commit the upload of", e))?;
        Ok(bytes)
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    let bytes = result?;
    let stats = UploadStats {
        bytes,
        parts: bytes.div_ceil(UPLOAD_PART_BYTES as u64).max(1),
        elapsed: started.elapsed(),
    };
    tracing::debug!(url, bytes, parts = stats.parts, ?stats.elapsed, "uploaded object");
    Ok(stats)
}

/// Deletes the object at `url` (a shard a failed write had already committed, so that the
/// failure leaves no part of the set behind). Deleting an object that is not there is no
/// error (S3's rule).
pub fn delete(url: &str, config: &RemoteConfig) -> io::Result<()> {
    let Some(kind) = remote_kind(url).filter(|k| *k != SourceKind::Http) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{url}: deletes go to s3://, gs:// or az:// URLs"),
        ));
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (store, location) = connect(url, kind, config)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(store.delete(&location));
    runtime.shutdown_timeout(Duration::from_secs(5));
    match result {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(io::Error::other(format!("delete {url}: {e}"))),
    }
}

/// Fills `buf` from `reader` as far as it goes; fewer bytes only at its end.
fn read_full(reader: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
