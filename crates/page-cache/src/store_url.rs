//! Which store a dataset URL names and where the object's key starts in it: `s3://`,
//! `gs://`, Azure's `az://`, `azure://`, `adl://`, `abfs[s]://` and
//! `https://ACCOUNT.blob.core.windows.net/CONTAINER/…`, and plain `http(s)://`.
//!
//! The store itself (bucket, account, container) is parsed by `object_store`'s builders
//! from the same URL; this only classifies and finds the key, without a network call.

use crate::source::SourceKind;

/// Azure hosts whose `https://` URLs are blob containers, not plain web servers.
const AZURE_HOST_SUFFIXES: [&str; 2] = [".blob.core.windows.net", ".dfs.core.windows.net"];

/// The kind of store `url` names, or `None` for anything that is not a store URL.
pub(crate) fn kind(url: &str) -> Option<SourceKind> {
    let (scheme, rest) = url.split_once("://")?;
    match scheme.to_ascii_lowercase().as_str() {
        "s3" | "s3a" => Some(SourceKind::S3),
        "gs" => Some(SourceKind::Gcs),
        "az" | "azure" | "adl" | "abfs" | "abfss" => Some(SourceKind::Azure),
        "https" if is_azure_host(host(rest)) => Some(SourceKind::Azure),
        "http" | "https" => Some(SourceKind::Http),
        _ => None,
    }
}

/// The host of `rest` (what follows `SCHEME://`), without user or port.
fn host(rest: &str) -> &str {
    let authority = rest.split('/').next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host.split(':').next().unwrap_or("")
}

fn is_azure_host(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    AZURE_HOST_SUFFIXES
        .iter()
        .any(|s| host.len() > s.len() && host.ends_with(s))
}

/// The object's key in a store URL of `kind` (S3, GCS or Azure): the path after the
/// bucket or container, which is the URL's host, or for Azure's `https://` form its
/// first path segment. `Err` says what form was expected.
pub(crate) fn key(url: &str, kind: SourceKind) -> Result<&str, String> {
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let https = url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    let skip = if https { 2 } else { 1 };
    let mut parts = rest.splitn(skip + 1, '/');
    let heads: Vec<&str> = parts.by_ref().take(skip).collect();
    let key = parts.next().unwrap_or("");
    if heads.len() < skip || heads.iter().any(|h| h.is_empty()) || key.is_empty() {
        let form = match kind {
            SourceKind::Gcs => "gs://BUCKET/KEY",
            SourceKind::Azure => {
                "az://CONTAINER/KEY, abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/KEY or \
                 https://ACCOUNT.blob.core.windows.net/CONTAINER/KEY"
            }
            _ => "s3://BUCKET/KEY",
        };
        return Err(format!("{url}: a store URL names an object: {form}"));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_classified_by_scheme_and_azure_host() {
        let cases = [
            ("s3://b/k", Some(SourceKind::S3)),
            ("S3A://b/k", Some(SourceKind::S3)),
            ("gs://b/k.beton", Some(SourceKind::Gcs)),
            ("az://c/k", Some(SourceKind::Azure)),
            ("azure://c/k", Some(SourceKind::Azure)),
            (
                "abfss://c@acct.dfs.core.windows.net/k",
                Some(SourceKind::Azure),
            ),
            (
                "https://acct.blob.core.windows.net/c/k",
                Some(SourceKind::Azure),
            ),
            (
                "https://ACCT.BLOB.CORE.WINDOWS.NET:443/c/k",
                Some(SourceKind::Azure),
            ),
            // Plain HTTP to the same host is not Azure's API (object_store needs https).
            (
                "http://acct.blob.core.windows.net/c/k",
                Some(SourceKind::Http),
            ),
            (
                "https://blob.core.windows.net.example.com/k",
                Some(SourceKind::Http),
            ),
            ("https://example.com/data/k", Some(SourceKind::Http)),
            ("file:///x", None),
            ("ftp://h/k", None),
            ("train.beton", None),
        ];
        for (url, want) in cases {
            assert_eq!(kind(url), want, "{url}");
        }
    }

    #[test]
    fn the_key_follows_the_bucket_or_container() {
        assert_eq!(key("s3://b/dir/k.beton", SourceKind::S3), Ok("dir/k.beton"));
        assert_eq!(key("gs://b/k", SourceKind::Gcs), Ok("k"));
        assert_eq!(key("az://c/a/b", SourceKind::Azure), Ok("a/b"));
        assert_eq!(
            key("abfss://c@acct.dfs.core.windows.net/a/b", SourceKind::Azure),
            Ok("a/b")
        );
        assert_eq!(
            key(
                "https://acct.blob.core.windows.net/c/a/b",
                SourceKind::Azure
            ),
            Ok("a/b")
        );
        for bad in ["gs://b", "gs://b/", "gs:///k"] {
            let e = key(bad, SourceKind::Gcs).unwrap_err();
            assert!(e.contains("gs://BUCKET/KEY") && e.starts_with(bad), "{e}");
        }
        let e = key("https://acct.blob.core.windows.net/c", SourceKind::Azure).unwrap_err();
        assert!(
            e.contains("https://ACCOUNT.blob.core.windows.net/CONTAINER/KEY"),
            "{e}"
        );
        assert!(
            key("s3://b", SourceKind::S3)
                .unwrap_err()
                .contains("s3://BUCKET/KEY")
        );
    }
}
