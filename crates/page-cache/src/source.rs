//! Where page bytes come from: the [`PageSource`] trait, with a local file
//! ([`LocalSource`], positional reads) and, with the `remote` feature, an object in a store
//! ([`crate::remote::ObjectSource`], range requests).
//!
//! A source only answers "these bytes at this offset"; it knows nothing of pages or
//! schedules, so several sources can later be laid end to end (shards) behind one more
//! implementation of the same trait.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// What kind of storage a source reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A local file.
    Local,
    /// An object in an S3-compatible store (`s3://`).
    S3,
    /// A file served over HTTP(S) with range requests (`http://`, `https://`).
    Http,
    /// An object in Google Cloud Storage (`gs://`).
    Gcs,
    /// A blob in Azure Blob Storage or Data Lake (`az://`, `abfs[s]://`,
    /// `https://ACCOUNT.blob.core.windows.net/…`).
    Azure,
}

impl SourceKind {
    /// A short lowercase name (`local`, `s3`, `http`, `gcs`, `azure`) for logs and reports.
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Local => "local",
            SourceKind::S3 => "s3",
            SourceKind::Http => "http",
            SourceKind::Gcs => "gcs",
            SourceKind::Azure => "azure",
        }
    }

    /// Whether the source is reached over the network (it cannot be memory-mapped).
    pub fn is_remote(self) -> bool {
        self != SourceKind::Local
    }
}

/// A byte-addressable dataset file, read by the process cache's page readers.
///
/// Implementations are called from many threads at once; each call reads one whole
/// range (a page up to its last allocation) and either fills `buf` exactly or fails.
pub trait PageSource: Send + Sync + fmt::Debug {
    /// The path or URL, as errors name it.
    fn name(&self) -> &str;

    /// The storage kind.
    fn kind(&self) -> SourceKind;

    /// The file's size in bytes (pinned when the source was opened).
    fn len(&self) -> u64;

    /// Whether the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` with the bytes at `offset..offset + buf.len()`; a range past the end,
    /// a short answer or a changed file is an error, never a partly filled buffer
    /// reported as success.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Reads `start..end` into a new buffer (how a reader's structure is read at open).
    fn read_range(&self, start: u64, end: u64) -> io::Result<Vec<u8>> {
        let len = end
            .checked_sub(start)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad range"))?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(len)
            .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e.to_string()))?;
        buf.resize(len, 0);
        self.read_at(start, &mut buf)?;
        Ok(buf)
    }

    /// What pins the bytes this source reads (an object's ETag or version id, fixed at
    /// open), so that a cache of its pages never serves another version's; `None` when
    /// nothing does (a local file, a server without ETags).
    fn pinned_identity(&self) -> Option<String> {
        None
    }

    /// How many reads in flight at once serve this source well: one per core's worth
    /// for a local disk, many for a store whose latency dominates.
    fn preferred_concurrency(&self) -> usize {
        12
    }
}

/// A local file read with positional reads (`pread`).
#[derive(Debug)]
pub struct LocalSource {
    file: File,
    path: PathBuf,
    name: String,
    len: u64,
}

impl LocalSource {
    /// Opens `path`; its size now is the source's length.
    pub fn open(path: impl AsRef<Path>) -> io::Result<LocalSource> {
        let path = path.as_ref().to_owned();
        let file = File::open(&path)?;
        let len = file.metadata()?.len();
        Ok(LocalSource {
            file,
            name: path.display().to_string(),
            path,
            len,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl PageSource for LocalSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> SourceKind {
        SourceKind::Local
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|e| e > self.len) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "bytes {offset}..{} are past the end of the {}-byte file",
                    offset.saturating_add(buf.len() as u64),
                    self.len
                ),
            ));
        }
        self.file.read_exact_at(buf, offset)
    }
}
