//! The dataset a read command (`inspect`, `dump`, `order`, `bench`, `doctor`) names: one
//! FILE, or several FILE arguments, glob patterns (`'data/train-*.beton'`) and `s3://`
//! prefixes read as one dataset of shards (`ffcv::Dataset::open_shards`).

use std::path::{Path, PathBuf};

use ffcv::{Dataset, Loader, LoaderBuilder};

/// The names `file` and `more` give, as shard names.
fn names(file: &Path, more: &[PathBuf]) -> Vec<String> {
    std::iter::once(file)
        .chain(more.iter().map(PathBuf::as_path))
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

/// Whether the arguments name a shard set rather than one file: several names, a glob
/// pattern, or a remote prefix (a URL not ending with `.beton`).
pub fn is_shard_set(file: &Path, more: &[PathBuf]) -> bool {
    if !more.is_empty() {
        return true;
    }
    let Some(name) = file.to_str() else {
        return false;
    };
    match ffcv::Location::parse(name) {
        ffcv::Location::Local(path) => ffcv::shards::is_pattern(path),
        ffcv::Location::Remote(url) => ffcv::shards::is_pattern(url) || !url.ends_with(".beton"),
    }
}

/// Whether `file` names a remote object (as [`Dataset::open`] classifies it).
pub fn is_remote(file: &Path) -> bool {
    file.to_str()
        .is_some_and(|name| matches!(ffcv::Location::parse(name), ffcv::Location::Remote(_)))
}

/// Opens the dataset: [`Dataset::open`] for one file, else the shards.
pub fn open(file: &Path, more: &[PathBuf]) -> ffcv::Result<Dataset> {
    if is_shard_set(file, more) {
        Dataset::open_shards(names(file, more))
    } else {
        Dataset::open(file)
    }
}

/// A loader builder over the dataset: [`Loader::builder`] for one file, else
/// [`Loader::builder_shards`].
pub fn builder(file: &Path, more: &[PathBuf]) -> LoaderBuilder {
    if is_shard_set(file, more) {
        Loader::builder_shards(names(file, more))
    } else {
        Loader::builder(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_object_stores_are_remote_and_paths_local() {
        for url in [
            "http://127.0.0.1:1/f.beton",
            "s3://bucket/f.beton",
            "gs://bucket/f.beton",
            "az://container/f.beton",
            "abfss://container@acct.dfs.core.windows.net/f.beton",
            "https://acct.blob.core.windows.net/container/f.beton",
        ] {
            assert!(is_remote(Path::new(url)), "{url}");
        }
        assert!(!is_remote(Path::new("file:///data/f.beton")));
        assert!(!is_remote(Path::new("/data/f.beton")));
    }
}
