//! A `.beton` named by a path or a URL, opened: its reader and, for an object in a store,
//! the page source its sample data comes from. `Loader::builder` and the CLI open their
//! file through [`Dataset::open`], so every front end accepts the same names.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use beton_io::{Reader, ReaderOptions};
use page_cache::PageSource;

use crate::error::{Error, Result};

#[cfg(feature = "remote")]
pub use page_cache::remote::RemoteConfig;

/// Timeouts and retries of remote reads (this build has no remote support, so this is
/// empty and never used).
#[cfg(not(feature = "remote"))]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RemoteConfig {}

/// What a name given to [`Dataset::open`] means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location<'a> {
    /// A local file (a plain path, or a `file://` URL with the scheme removed).
    Local(&'a str),
    /// An object in a store: `s3://`, `gs://`, `az://`, `abfs[s]://`, `http(s)://`, ….
    Remote(&'a str),
}

impl<'a> Location<'a> {
    /// Classifies `name`: `file://PATH` and plain paths are local; `s3://`, `s3a://`,
    /// `gs://`, Azure's `az://`, `azure://`, `adl://`, `abfs://`, `abfss://`, and
    /// `http://` and `https://` are remote; any other `SCHEME://` is still a path (a
    /// directory may be called that), which then fails to open with its own error.
    pub fn parse(name: &'a str) -> Location<'a> {
        if let Some(path) = name.strip_prefix("file://") {
            return Location::Local(path);
        }
        let scheme = name.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some(
                "s3" | "s3a" | "gs" | "az" | "azure" | "adl" | "abfs" | "abfss" | "http" | "https",
            ) => Location::Remote(name),
            _ => Location::Local(name),
        }
    }
}

/// An opened `.beton`: the validated reader and, for a remote object, where its pages
/// are read from.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The reader (for a remote object, opened from byte ranges: structure only).
    pub reader: Arc<Reader>,
    /// The page source of a remote object or of shards; `None` for a local file, read
    /// through the reader's map.
    pub source: Option<Arc<dyn PageSource>>,
    /// For shards read as one ([`Dataset::open_shards`]): where each sits in the virtual
    /// file and its first global sample id; empty for a single file.
    pub shards: Vec<beton_io::ShardSpan>,
}

impl Dataset {
    /// Opens `path` (a path, `file://…`, `s3://bucket/key`, `http(s)://host/path`) with
    /// default timeouts and retries.
    pub fn open(path: impl AsRef<Path>) -> Result<Dataset> {
        Dataset::open_with(path, &ReaderOptions::default(), &RemoteConfig::default())
    }

    /// Opens `path` with reader options and remote timeouts and retries.
    ///
    /// S3 configuration comes from the standard environment variables
    /// (`AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, `AWS_ACCESS_KEY_ID`, …), see `docs/remote.md`.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: &ReaderOptions,
        remote: &RemoteConfig,
    ) -> Result<Dataset> {
        let path = path.as_ref();
        let Some(name) = path.to_str() else {
            return Ok(Dataset::local(Reader::open_with(path, options)?));
        };
        match Location::parse(name) {
            Location::Local(p) => Ok(Dataset::local(Reader::open_with(p, options)?)),
            Location::Remote(url) => open_remote(url, options, remote),
        }
    }

    fn local(reader: Reader) -> Dataset {
        Dataset {
            reader: Arc::new(reader),
            source: None,
            shards: Vec::new(),
        }
    }

    /// Whether the data is read from a remote source (an object in a store, or shards of
    /// which one is).
    pub fn is_remote(&self) -> bool {
        self.source.as_ref().is_some_and(|s| s.kind().is_remote())
    }

    /// The whole file as a reader of bytes in memory, for tools that read every sample
    /// one by one (`ffcv dump`): a local reader is returned as it is; a remote object is
    /// read in one request, refused above `max_bytes`.
    pub fn into_whole(self, max_bytes: u64) -> Result<Arc<Reader>> {
        let Some(source) = self.source.filter(|_| !self.reader.holds_data()) else {
            return Ok(self.reader);
        };
        if !self.shards.is_empty() {
            return whole_shards(&self.reader, &self.shards, &source, max_bytes);
        }
        let path = self.reader.path().to_owned();
        let len = source.len();
        if len > max_bytes {
            return Err(Error::Config {
                path,
                reason: format!(
                    "the {len}-byte remote object is larger than the {max_bytes} bytes this \
                     command reads into memory; copy it to a local file first"
                ),
                cause: None,
            });
        }
        let bytes = source.read_range(0, len).map_err(|e| Error::Setup {
            path: path.clone(),
            what: "whole-object read",
            source: e,
        })?;
        Ok(Arc::new(Reader::from_vec(
            path,
            bytes,
            &ReaderOptions::default(),
        )?))
    }
}

/// Shards of which some are remote, read whole into memory (at most `max_bytes` in all)
/// and joined again: [`Dataset::into_whole`] for a shard set.
fn whole_shards(
    reader: &Reader,
    spans: &[beton_io::ShardSpan],
    source: &Arc<dyn PageSource>,
    max_bytes: u64,
) -> Result<Arc<Reader>> {
    let total: u64 = spans.iter().map(|s| s.len).sum();
    if total > max_bytes {
        return Err(Error::Config {
            path: reader.path().to_owned(),
            reason: format!(
                "the shards' {total} bytes are more than the {max_bytes} bytes this command \
                 reads into memory; copy them to local files first"
            ),
            cause: None,
        });
    }
    let mut whole = Vec::with_capacity(spans.len());
    for span in spans {
        let bytes = source
            .read_range(span.base, span.base + span.len)
            .map_err(|e| Error::Setup {
                path: span.path.clone(),
                what: "whole-object read",
                source: e,
            })?;
        whole.push(Reader::from_vec(
            span.path.clone(),
            bytes,
            &ReaderOptions::default(),
        )?);
    }
    let (joined, _) = Reader::concat(reader.path(), &whole, &ReaderOptions::default())?;
    Ok(Arc::new(joined))
}

/// The default cap of the disk cache of pages (`LoaderBuilder::page_cache_size`).
pub const DEFAULT_PAGE_CACHE_SIZE: u64 = 10 << 30;

/// A loader's disk cache knobs: the directory (none: no disk cache) and its cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiskCacheKnobs {
    pub(crate) dir: Option<PathBuf>,
    pub(crate) max_bytes: u64,
}

impl Default for DiskCacheKnobs {
    fn default() -> Self {
        DiskCacheKnobs {
            dir: None,
            max_bytes: DEFAULT_PAGE_CACHE_SIZE,
        }
    }
}

/// Puts a remote dataset's page source behind the disk cache when a directory is given;
/// a local file is read through its map as always (the OS page cache already keeps it).
pub(crate) fn with_disk_cache(
    reader: &Reader,
    source: Option<Arc<dyn PageSource>>,
    knobs: &DiskCacheKnobs,
) -> Result<Option<Arc<dyn PageSource>>> {
    let (Some(dir), Some(inner)) = (&knobs.dir, &source) else {
        if let Some(dir) = &knobs.dir {
            tracing::info!(
                "{}: a local file; the page cache directory {} is not used",
                reader.path().display(),
                dir.display()
            );
        }
        return Ok(source);
    };
    let config = page_cache::DiskCacheConfig {
        dir: dir.clone(),
        max_bytes: knobs.max_bytes,
    };
    let cache =
        page_cache::DiskCache::new(Arc::clone(inner), &config).map_err(|e| Error::Setup {
            path: reader.path().to_owned(),
            what: "the disk cache of pages",
            source: e,
        })?;
    Ok(Some(Arc::new(cache)))
}

#[cfg(feature = "remote")]
fn open_remote(url: &str, options: &ReaderOptions, remote: &RemoteConfig) -> Result<Dataset> {
    let (reader, source) = page_cache::remote::open_url(url, options, remote)?;
    Ok(Dataset {
        reader: Arc::new(reader),
        source: Some(source),
        shards: Vec::new(),
    })
}

#[cfg(not(feature = "remote"))]
fn open_remote(url: &str, _: &ReaderOptions, _: &RemoteConfig) -> Result<Dataset> {
    Err(Error::Config {
        path: url.into(),
        reason: "this build has no remote support (the `remote` feature of ffcv is off)".into(),
        cause: None,
    })
}
