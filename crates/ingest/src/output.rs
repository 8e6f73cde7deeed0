//! The output of a conversion as one file, N shards written in parallel, or shard I of N
//! alone ([`Shards`]), uploaded shard by shard when OUT is an object URL.

use std::ops::Range;
use std::path::{Path, PathBuf};

use beton_io::{
    DatasetWriter, FieldValue, SampleSource, ShardWritten, SourceError, shard_path, shard_ranges,
};

use crate::error::{Error, Result};

/// All N shards of a write, or only shard I of them (`--shards N`, `--shard-index I`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shards {
    /// N: 1 writes OUT itself; N > 1 writes `OUT-0000k-of-0000N` for each k.
    pub count: u64,
    /// I: write only shard I (from 0) of the N, under its name in the set.
    pub index: Option<u64>,
}

impl Default for Shards {
    /// One file.
    fn default() -> Self {
        Self {
            count: 1,
            index: None,
        }
    }
}

impl Shards {
    /// Refuses no shards, a shard index not below the count, and more shards than
    /// samples (usage errors: every shard holds a sample); `unit` names the samples.
    pub fn check(self, samples: u64, unit: &str) -> Result<()> {
        if self.count == 0 {
            return Err(Error::Usage("--shards must be at least 1".into()));
        }
        if let Some(index) = self.index
            && index >= self.count
        {
            return Err(Error::Usage(format!(
                "--shard-index {index} is not below --shards {} (shards are numbered from 0)",
                self.count
            )));
        }
        if self.count > 1 && self.count > samples {
            return Err(Error::Usage(format!(
                "--shards {} is more than the {samples} {unit} to write (every shard holds at \
                 least one)",
                self.count
            )));
        }
        Ok(())
    }

    /// The file a writer is made for: shard I's name with a shard index (when N > 1),
    /// OUT otherwise ([`Shards::write`] then names the shards after it).
    pub fn writer_path(self, out: &Path) -> PathBuf {
        match self.index {
            Some(index) if self.count > 1 => shard_path(out, index, self.count),
            _ => out.to_path_buf(),
        }
    }

    /// The source's samples this run writes: all of them, or shard I's block.
    pub fn samples(self, num_samples: u64) -> Range<u64> {
        match self.index {
            Some(index) if self.count > 1 => shard_ranges(num_samples, self.count)
                .get(index as usize)
                .cloned()
                .unwrap_or(0..0),
            _ => 0..num_samples,
        }
    }

    /// Writes `source` with `writer` (made for [`Shards::writer_path`]): all N shards, or
    /// with a shard index only shard I, the I-th contiguous block of
    /// [`beton_io::shard_ranges`], exactly the samples of shard I of the all-N write.
    /// When OUT is an object URL each shard is uploaded as soon as it is written, while
    /// later shards are still being written ([`crate::object_io::write_and_upload`]), and
    /// named by its URL.
    pub fn write<S: SampleSource + ?Sized>(
        self,
        writer: &DatasetWriter,
        source: &S,
    ) -> Result<Vec<ShardWritten>> {
        let name_of = |k: u64| match self.index {
            None if self.count > 1 => shard_path(writer.path(), k, self.count),
            _ => writer.path().to_path_buf(),
        };
        match crate::object_io::upload_base(writer.path()) {
            None => Ok(self.write_local(writer, source, &|_, _| {})?),
            Some(base) => crate::object_io::write_and_upload(&base, &name_of, |finished| {
                self.write_local(writer, source, finished)
            }),
        }
    }

    fn write_local<S: SampleSource + ?Sized>(
        self,
        writer: &DatasetWriter,
        source: &S,
        finished: &(dyn Fn(u64, &Path) + Sync),
    ) -> beton_io::Result<Vec<ShardWritten>> {
        match self.index {
            Some(_) if self.count > 1 => {
                let samples = self.samples(source.num_samples());
                let part = Part {
                    inner: source,
                    samples: samples.clone(),
                };
                let summary = writer.write(&part)?;
                finished(0, writer.path());
                Ok(vec![ShardWritten {
                    path: writer.path().to_path_buf(),
                    samples,
                    summary,
                }])
            }
            _ => writer.write_shards_each(source, self.count, finished),
        }
    }
}

/// A block of a source's samples as a source of their own.
struct Part<'a, S: ?Sized> {
    inner: &'a S,
    samples: Range<u64>,
}

impl<S: SampleSource + ?Sized> SampleSource for Part<'_, S> {
    fn num_samples(&self) -> u64 {
        self.samples.end - self.samples.start
    }

    fn sample(&self, index: u64) -> std::result::Result<Vec<FieldValue>, SourceError> {
        self.inner.sample(self.samples.start + index)
    }
}
