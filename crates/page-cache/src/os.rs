//! The OS cache ([`crate::CachePolicy::Os`], FFCV's `os_cache = true`): reads are slices of the reader's read-only map;
//! the kernel's page cache does the caching, steered by `madvise` hints.

use std::sync::Arc;

use beton_io::Reader;

use crate::advice::{Advice, advise};
use crate::error::{Error, Result};
use crate::stats::CacheStats;
use crate::{OsAdvice, OsConfig};

/// The OS cache over a reader's map.
#[derive(Clone)]
pub struct OsCache {
    reader: Arc<Reader>,
    advice: OsAdvice,
}

impl OsCache {
    /// Wraps `reader`; `config.advice` chooses the `madvise` policy.
    pub fn new(reader: Arc<Reader>, config: &OsConfig) -> OsCache {
        OsCache {
            reader,
            advice: config.advice,
        }
    }

    /// The reader this cache serves.
    pub fn reader(&self) -> &Arc<Reader> {
        &self.reader
    }

    /// The hint [`OsCache::schedule_epoch`] would give for these batches.
    pub fn advice_for(&self, batches: &[Vec<u64>]) -> Option<Advice> {
        match self.advice {
            OsAdvice::Off => None,
            OsAdvice::Fixed(a) => Some(a),
            OsAdvice::Auto => Some(auto_advice(&self.reader, batches)),
        }
    }

    /// Starts an epoch: checks the sample ids and applies the `madvise` hint chosen for
    /// the order (a failed hint is logged, never an error).
    pub fn schedule_epoch(&self, batches: &[Vec<u64>]) -> Result<OsEpoch> {
        let num_samples = self.reader.num_samples();
        for (b, batch) in batches.iter().enumerate() {
            if let Some(&s) = batch.iter().find(|&&s| s >= num_samples) {
                return Err(Error::SampleOutOfRange {
                    path: self.reader.path().to_owned(),
                    batch: b,
                    sample: s,
                    num_samples,
                });
            }
        }
        let advice = self.advice_for(batches);
        if let Some(a) = advice {
            let start = self.reader.layout().data_region_start as usize;
            let advised = match self.reader.bytes() {
                Ok(bytes) => advise(bytes, start, a),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = advised {
                tracing::debug!(advice = ?a, error = %e, "madvise refused");
            } else {
                tracing::debug!(advice = ?a, "madvise applied to the data region");
            }
        }
        Ok(OsEpoch {
            reader: Arc::clone(&self.reader),
            num_batches: batches.len(),
            next_batch: 0,
            advice,
        })
    }
}

/// The hint for an epoch, from measurements on a virtio disk (bench rows
/// `page-cache/os-cold/*`): `MADV_SEQUENTIAL` made sequential epochs slower, not faster,
/// than the default readahead (128 KiB samples: 4.3 k vs 7.5 k samples/s cold), and
/// `MADV_RANDOM` made random epochs over 3 KiB samples read 4.3× fewer bytes but take
/// 2–3× longer while the file fits in memory (readahead then only loads early what the
/// epoch reads anyway). So: no hint (`Normal`) unless the access is random, the samples
/// are small and the file is larger than half the available memory, where the bytes
/// readahead wastes would evict pages still needed: then `Random`.
fn auto_advice(reader: &Reader, batches: &[Vec<u64>]) -> Advice {
    // The cheap test first: a file that fits gets `Normal` whatever the order, and the
    // walk below (a page lookup per sample) is serial time at every epoch start.
    let fits = crate::memory::available_memory().is_none_or(|m| reader.file_size() <= m / 2);
    if fits {
        return Advice::Normal;
    }
    let page_map = reader.page_map();
    let mut steps = 0usize;
    let mut forward = 0usize;
    let mut prev: Option<u64> = None;
    for &s in batches.iter().flatten() {
        let Some(&page) = page_map.pages_of_sample(s).first() else {
            continue;
        };
        if let Some(p) = prev {
            steps += 1;
            if page == p || page == p + 1 {
                forward += 1;
            }
        }
        prev = Some(page);
    }
    if steps == 0 || forward * 10 >= steps * 9 {
        return Advice::Normal;
    }
    let (count, total) = reader
        .alloc_rows()
        .fold((0u64, 0u64), |(c, t), r| (c + 1, t.saturating_add(r.size)));
    let mean = total.checked_div(count).unwrap_or(0);
    if mean < 32 * 1024 {
        Advice::Random
    } else {
        Advice::Normal
    }
}

/// One epoch of the OS cache.
pub struct OsEpoch {
    reader: Arc<Reader>,
    num_batches: usize,
    next_batch: usize,
    advice: Option<Advice>,
}

impl OsEpoch {
    /// Number of batches of the epoch.
    pub fn num_batches(&self) -> usize {
        self.num_batches
    }

    /// The hint applied for this epoch.
    pub fn advice(&self) -> Option<Advice> {
        self.advice
    }

    /// Checks the batch order; the OS cache has nothing to load.
    pub fn start_batch(&mut self, b: usize) -> Result<()> {
        if b != self.next_batch || b >= self.num_batches {
            return Err(Error::BatchOutOfOrder {
                expected: self.next_batch,
                got: b,
                num_batches: self.num_batches,
            });
        }
        self.next_batch = b + 1;
        Ok(())
    }

    /// The bytes of the allocation at `ptr`: a slice of the map.
    pub fn read(&self, ptr: u64) -> Result<&[u8]> {
        Ok(self.reader.data_at(ptr)?)
    }

    /// `len` bytes at file offset `ptr`, a slice of the map (bounds checked, no
    /// allocation lookup).
    pub fn read_extent(&self, ptr: u64, len: u64) -> Result<&[u8]> {
        usize::try_from(ptr)
            .ok()
            .zip(usize::try_from(len).ok())
            .and_then(|(p, l)| self.reader.bytes().ok()?.get(p..p.checked_add(l)?))
            .ok_or_else(|| Error::ExtentOutsideFile {
                path: self.reader.path().to_owned(),
                ptr,
                len,
            })
    }

    /// Counters: the OS cache loads no pages itself, so only the epoch facts are set.
    pub fn stats(&self) -> CacheStats {
        CacheStats::default()
    }
}

impl Drop for OsEpoch {
    fn drop(&mut self) {
        // Leave the map as we found it for other users of the same reader.
        if matches!(self.advice, Some(a) if a != Advice::Normal) {
            let start = self.reader.layout().data_region_start as usize;
            if let Ok(bytes) = self.reader.bytes() {
                let _ = advise(bytes, start, Advice::Normal);
            }
        }
    }
}
