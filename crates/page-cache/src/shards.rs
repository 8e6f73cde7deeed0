//! The page source of a shard set ([`beton_io::Reader::concat`]): [`ShardSource`] sends
//! each read of the virtual file to the shard whose bytes it names, at the shard's own
//! offset, so the process cache reads shards (local files or objects in a store, mixed)
//! exactly as it reads one file.

use std::io;
use std::sync::Arc;

use beton_io::ShardSpan;

use crate::source::{PageSource, SourceKind};

/// Several page sources laid end to end at the bases of a shard set's virtual file.
#[derive(Debug)]
pub struct ShardSource {
    name: String,
    len: u64,
    kind: SourceKind,
    /// `(span, source)` per shard, in base order.
    shards: Vec<(ShardSpan, Arc<dyn PageSource>)>,
}

impl ShardSource {
    /// The source of a virtual file of `len` bytes named `name` whose shard `i` is
    /// `sources[i]` at `spans[i]` (from [`beton_io::Reader::concat`]). Its kind is the
    /// first remote kind among the shards, else local.
    pub fn new(
        name: impl Into<String>,
        len: u64,
        spans: Vec<ShardSpan>,
        sources: Vec<Arc<dyn PageSource>>,
    ) -> io::Result<ShardSource> {
        if spans.len() != sources.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} shard spans for {} sources", spans.len(), sources.len()),
            ));
        }
        for (span, source) in spans.iter().zip(&sources) {
            if span.len != source.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}: the source has {} bytes, the shard {}",
                        source.name(),
                        source.len(),
                        span.len
                    ),
                ));
            }
        }
        let kind = sources
            .iter()
            .map(|s| s.kind())
            .find(|k| k.is_remote())
            .unwrap_or(SourceKind::Local);
        Ok(ShardSource {
            name: name.into(),
            len,
            kind,
            shards: spans.into_iter().zip(sources).collect(),
        })
    }

    /// The shards, in order.
    pub fn shards(&self) -> impl Iterator<Item = (&ShardSpan, &Arc<dyn PageSource>)> {
        self.shards.iter().map(|(span, source)| (span, source))
    }
}

impl PageSource for ShardSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> SourceKind {
        self.kind
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset.saturating_add(buf.len() as u64);
        // The last shard whose base is at or before `offset`.
        let at = self.shards.partition_point(|(span, _)| span.base <= offset);
        let shard = at.checked_sub(1).map(|i| &self.shards[i]);
        match shard {
            Some((span, source)) if span.contains(offset, end) => {
                let local = offset - span.base;
                source.read_at(local, buf).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "shard {} bytes {local}..{}: {e}",
                            source.name(),
                            local + buf.len() as u64
                        ),
                    )
                })
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "bytes {offset}..{end} of {} lie in no single shard",
                    self.name
                ),
            )),
        }
    }

    /// Every shard's name, place and pinned identity, so that a disk cache of the set's
    /// pages never serves a page of another set or of a replaced shard; `None` when any
    /// shard pins nothing (a local file), since its bytes could change unseen.
    fn pinned_identity(&self) -> Option<String> {
        let mut identity = String::new();
        for (span, source) in &self.shards {
            let pinned = source.pinned_identity()?;
            identity.push_str(&format!(
                "{}@{}+{}:{pinned};",
                source.name(),
                span.base,
                span.len
            ));
        }
        Some(identity)
    }

    fn preferred_concurrency(&self) -> usize {
        self.shards
            .iter()
            .map(|(_, s)| s.preferred_concurrency())
            .max()
            .unwrap_or(12)
    }
}
