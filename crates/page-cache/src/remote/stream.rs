//! Reading one object front to back (feature `remote`): [`ObjectReader`], a
//! [`std::io::Read`] over an [`ObjectSource`] for formats read in sequence (tar shards,
//! Arrow IPC streams, TFRecord files). A thread fetches the next chunks by range requests
//! (each cut into parts in flight at once, as [`ObjectSource`] reads) while the caller
//! parses the current one, so reading and parsing overlap.

use std::io::{self, Read};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use super::{ObjectSource, RemoteConfig};
use crate::source::PageSource;

/// Bytes fetched per chunk.
pub const STREAM_CHUNK_BYTES: u64 = 16 << 20;

/// Chunks fetched ahead of the one being read.
const CHUNKS_AHEAD: usize = 2;

/// An object read front to back (see the module docs). Dropping it stops and joins the
/// fetching thread.
pub struct ObjectReader {
    url: String,
    len: u64,
    chunks: Option<Receiver<io::Result<Vec<u8>>>>,
    fetcher: Option<JoinHandle<()>>,
    current: Vec<u8>,
    at: usize,
    done: bool,
}

impl std::fmt::Debug for ObjectReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectReader")
            .field("url", &self.url)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl ObjectReader {
    /// Opens the object at `url` (pinned at open: [`ObjectSource::open`]) and starts
    /// fetching its first chunks.
    pub fn open(url: &str, config: &RemoteConfig) -> io::Result<ObjectReader> {
        let source = ObjectSource::open(url, config)?;
        let len = source.len();
        let (send, chunks) = sync_channel(CHUNKS_AHEAD);
        let fetcher = std::thread::Builder::new()
            .name("ffcv-object-stream".into())
            .spawn(move || fetch(&source, &send))?;
        Ok(ObjectReader {
            url: url.to_owned(),
            len,
            chunks: Some(chunks),
            fetcher: Some(fetcher),
            current: Vec::new(),
            at: 0,
            done: len == 0,
        })
    }

    /// The object's size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The object's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// Fetches the object's chunks in order into `send` until the end, an error, or the
/// reader hanging up.
fn fetch(source: &ObjectSource, send: &SyncSender<io::Result<Vec<u8>>>) {
    let len = source.len();
    let mut at = 0;
    while at < len {
        let end = (at + STREAM_CHUNK_BYTES).min(len);
        let chunk = source.read_range(at, end);
        let failed = chunk.is_err();
        if send.send(chunk).is_err() || failed {
            return;
        }
        at = end;
    }
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.current.len() {
            if self.done {
                return Ok(0);
            }
            let next = self.chunks.as_ref().and_then(|c| c.recv().ok());
            match next {
                Some(Ok(chunk)) => {
                    self.current = chunk;
                    self.at = 0;
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                // The fetcher ended: after the last chunk.
                None => self.done = true,
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Drop for ObjectReader {
    fn drop(&mut self) {
        // Hanging up makes the fetcher's next send fail; it ends after its current chunk.
        drop(self.chunks.take());
        if let Some(fetcher) = self.fetcher.take() {
            let _ = fetcher.join();
        }
    }
}
