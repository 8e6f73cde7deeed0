//! Listing the shards of a dataset in an S3-compatible store: every object whose key
//! starts with a prefix and ends with `.beton`, sorted (`s3://bucket/train-` names
//! `train-00000-of-00003.beton`, …).

use std::io;

use object_store::ObjectStore;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;

use super::{RemoteConfig, humantime};
use crate::source::SourceKind;

/// The `s3://BUCKET/KEY` URLs of the `.beton` objects whose key starts with the key of
/// `prefix_url` (a plain string prefix, not only a directory), sorted by key. Only the
/// prefix's own "directory" is listed (one `LIST` with a delimiter), so objects deeper
/// than it are not found. HTTP(S) servers have no listing: an error says so.
pub fn list_prefix(prefix_url: &str, config: &RemoteConfig) -> io::Result<Vec<String>> {
    list_prefix_ending(prefix_url, ".beton", config)
}

/// As [`list_prefix`], for the objects whose key ends with `suffix` (`.tar` for WebDataset
/// shards, `.parquet`, …).
pub fn list_prefix_ending(
    prefix_url: &str,
    suffix: &str,
    config: &RemoteConfig,
) -> io::Result<Vec<String>> {
    let invalid = |reason: String| io::Error::new(io::ErrorKind::InvalidInput, reason);
    if super::remote_kind(prefix_url) != Some(SourceKind::S3) {
        return Err(invalid(format!(
            "{prefix_url}: only s3:// prefixes can be listed; name HTTP shards one by one"
        )));
    }
    let (scheme, rest) = prefix_url.split_once("://").expect("an s3 URL");
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(invalid(format!(
            "{prefix_url}: no bucket: s3://BUCKET/PREFIX"
        )));
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let store = AmazonS3Builder::from_env()
        .with_url(format!("{scheme}://{bucket}"))
        .with_config(
            AmazonS3ConfigKey::Client(object_store::ClientConfigKey::Timeout),
            humantime(config.request_timeout),
        )
        .with_config(
            AmazonS3ConfigKey::Client(object_store::ClientConfigKey::ConnectTimeout),
            humantime(config.connect_timeout),
        )
        .with_retry(config.retry())
        .build()
        .map_err(|e| invalid(format!("{prefix_url}: {e}")))?;
    let dir = key.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("");
    let dir = (!dir.is_empty())
        .then(|| ObjectPath::from_url_path(dir))
        .transpose()
        .map_err(|e| invalid(format!("{prefix_url}: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let deadline = config.read_deadline();
    let listed = runtime
        .block_on(async {
            tokio::time::timeout(deadline, store.list_with_delimiter(dir.as_ref())).await
        })
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("LIST {prefix_url}: no answer within {deadline:?}"),
            )
        })?
        .map_err(|e| io::Error::other(format!("LIST {prefix_url}: {e}")))?;
    let mut keys: Vec<String> = listed
        .objects
        .into_iter()
        .map(|o| o.location.to_string())
        .filter(|k| k.starts_with(key) && k.ends_with(suffix))
        .collect();
    keys.sort();
    Ok(keys
        .into_iter()
        .map(|k| format!("{scheme}://{bucket}/{k}"))
        .collect())
}
