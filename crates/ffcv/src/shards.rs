//! A dataset of several `.beton` files (shards) read as one: [`Dataset::open_shards`]
//! expands the names given (paths, URLs, glob patterns, `s3://` prefixes), opens and
//! validates every shard as a single file would be, and joins them with
//! [`beton_io::Reader::concat`] (global sample ids in the order given) and a
//! [`page_cache::ShardSource`] that sends each page read to its shard.

use std::path::Path;
use std::sync::Arc;

use beton_io::{Reader, ReaderOptions};
use page_cache::{LocalSource, PageSource, ShardSource};

use crate::dataset::{Dataset, Location, RemoteConfig};
use crate::error::{Error, Result};

/// Whether `name` is a glob pattern (it has `*`, `?` or `[`); an existing file of
/// that name is still read as itself.
pub fn is_pattern(name: &str) -> bool {
    name.contains(['*', '?', '['])
}

/// The shard names `names` stand for, in order: a local glob pattern
/// (`data/train-*.beton`) becomes its matches, sorted; a remote name that does not end
/// with `.beton` is an `s3://` prefix (`s3://bucket/train-`), the `.beton` objects under
/// it, sorted by key (an `s3://…*…` pattern is read the same way, up to its first `*`);
/// any other name stays as it is. A pattern or prefix that matches nothing is an error
/// naming it, and so is an empty list.
pub fn expand_shard_names<S: AsRef<str>>(
    names: impl IntoIterator<Item = S>,
    remote: &RemoteConfig,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for name in names {
        let name = name.as_ref();
        let err = |reason: String| Error::Config {
            path: name.into(),
            reason,
            cause: None,
        };
        match Location::parse(name) {
            // A file whose own name has `*`, `?` or `[` is that file, not a pattern.
            Location::Local(path) if is_pattern(path) && !Path::new(path).exists() => {
                let matches = glob::glob(path).map_err(|e| err(format!("bad pattern: {e}")))?;
                let mut found = Vec::new();
                for m in matches {
                    let m = m.map_err(|e| err(format!("cannot read a match: {e}")))?;
                    found.push(m.to_string_lossy().into_owned());
                }
                found.sort();
                if found.is_empty() {
                    return Err(err("the pattern matches no file".into()));
                }
                out.extend(found);
            }
            Location::Remote(url) if is_pattern(url) || !url.ends_with(".beton") => {
                let prefix = url.split(['*', '?', '[']).next().unwrap_or(url);
                let found = list_remote(prefix, remote).map_err(|e| err(e.to_string()))?;
                if found.is_empty() {
                    return Err(err(format!("no .beton object has the prefix {prefix}")));
                }
                out.extend(found);
            }
            _ => out.push(name.to_owned()),
        }
    }
    if out.is_empty() {
        return Err(Error::Config {
            path: "".into(),
            reason: "no dataset files given".into(),
            cause: None,
        });
    }
    Ok(out)
}

#[cfg(feature = "remote")]
fn list_remote(prefix: &str, remote: &RemoteConfig) -> std::io::Result<Vec<String>> {
    page_cache::remote::listing::list_prefix(prefix, remote)
}

#[cfg(not(feature = "remote"))]
fn list_remote(prefix: &str, _: &RemoteConfig) -> std::io::Result<Vec<String>> {
    Err(std::io::Error::other(format!(
        "{prefix}: this build has no remote support (the `remote` feature of ffcv is off)"
    )))
}

impl Dataset {
    /// Opens the shards `names` stand for ([`expand_shard_names`]) as one dataset, with
    /// default options. One name that is neither a pattern nor a prefix opens as
    /// [`Dataset::open`] does.
    pub fn open_shards<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Result<Dataset> {
        Dataset::open_shards_with(names, &ReaderOptions::default(), &RemoteConfig::default())
    }

    /// As [`Dataset::open_shards`], with reader options and remote timeouts.
    ///
    /// Each shard is opened and validated as [`Dataset::open_with`] opens one file; then
    /// their fields must agree ([`beton_io::Error::ShardMismatch`] names both files and
    /// the field). The dataset's reader is named after its first shard and the count.
    pub fn open_shards_with<S: AsRef<str>>(
        names: impl IntoIterator<Item = S>,
        options: &ReaderOptions,
        remote: &RemoteConfig,
    ) -> Result<Dataset> {
        let names = expand_shard_names(names, remote)?;
        if let [one] = &names[..] {
            return Dataset::open_with(one, options, remote);
        }
        let mut readers = Vec::with_capacity(names.len());
        let mut sources: Vec<Arc<dyn PageSource>> = Vec::with_capacity(names.len());
        for name in &names {
            let d = Dataset::open_with(name, options, remote)?;
            let source = match d.source {
                Some(s) => s,
                None => {
                    let path = d.reader.path();
                    let local = LocalSource::open(path).map_err(|source| Error::Setup {
                        path: path.to_owned(),
                        what: "open for page reads",
                        source,
                    })?;
                    Arc::new(local)
                }
            };
            // The reader is ours alone (just opened): take it out of its Arc.
            let reader = Arc::try_unwrap(d.reader).map_err(|_| Error::Config {
                path: name.into(),
                reason: "the shard's reader is shared".into(),
                cause: None,
            })?;
            readers.push(reader);
            sources.push(source);
        }
        let set_name = format!("{} (+{} more shards)", names[0], names.len() - 1);
        let (reader, spans) = Reader::concat(&set_name, &readers, options)?;
        drop(readers);
        let source = ShardSource::new(&set_name, reader.file_size(), spans.clone(), sources)
            .map_err(|source| Error::Setup {
                path: set_name.clone().into(),
                what: "shard page source",
                source,
            })?;
        Ok(Dataset {
            reader: Arc::new(reader),
            source: Some(Arc::new(source)),
            shards: spans,
        })
    }
}

/// Whether a dataset's pages must go through the process cache: it has a page source
/// and its reader does not hold every byte in a map (a remote object, or shards not all
/// local). Local shards are stitched into one map and keep the OS cache.
pub(crate) fn needs_process_cache(reader: &Reader, source: Option<&Arc<dyn PageSource>>) -> bool {
    source.is_some_and(|s| s.kind().is_remote() || !reader.holds_data())
}
