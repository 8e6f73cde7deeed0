//! A decoder run over a batch of stored samples that the caller located itself, outside a
//! loader: [`BatchDecoder`].
//!
//! FFCV's decoders are also driven directly, by code that reads the file through a memory
//! manager and calls the decoder's batch function with sample ids, the field's metadata
//! and an output buffer (`ffcv_rs`'s decoders' `generate_code()` returns such a function).
//! This is that batch function's native half: the same [`Decoder`] the loader runs, the
//! same per-sample seeds (operation 0 of the pipeline, [`pipeline_jit::rng::sample_seed`]),
//! on a pool of its own threads. With the same seed and epoch, a sample's row is the row a
//! one-view loader over the file decodes for it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use rayon::prelude::*;

use super::{Decoder, SampleInput};

/// One sample as the caller located it: its id, its stored bytes exactly as the loader
/// would hand them to the decoder ([`SampleInput::data`]), and its metadata row (the
/// file's bytes for this field, at most 16 of them matter to the built-in decoders).
#[derive(Debug, Clone, Copy)]
pub struct StoredSample<'a> {
    /// The sample id (decides the sample's generator).
    pub sample: u64,
    /// The field's stored bytes for the sample.
    pub data: &'a [u8],
    /// The field's metadata bytes for the sample.
    pub metadata: &'a [u8],
}

/// A sample [`BatchDecoder::run`] could not decode.
#[derive(Debug, thiserror::Error)]
#[error("sample {sample}: {decoder} failed: {message}")]
pub struct SampleDecodeError {
    /// The sample id.
    pub sample: u64,
    /// The decoder's name.
    pub decoder: String,
    /// What went wrong.
    pub message: String,
    /// The decoder's error, when it carried a cause.
    #[source]
    pub cause: Option<Box<crate::ExtensionError>>,
}

/// A [`Decoder`] over batches of [`StoredSample`]s (see the module documentation).
///
/// # Example
///
/// ```
/// use ffcv::decode::{BatchDecoder, IntDecoder, StoredSample};
///
/// let decoder = BatchDecoder::new(IntDecoder, 8, 1)?;
/// let (seven, nine) = (7i64.to_le_bytes(), 9i64.to_le_bytes());
/// let samples = [
///     StoredSample { sample: 3, data: &[], metadata: &seven },
///     StoredSample { sample: 5, data: &[], metadata: &nine },
/// ];
/// let mut rows = [0u8; 16];
/// decoder.run(&samples, &mut rows, 0, 0)?;
/// assert_eq!(i64::from_le_bytes(rows[8..].try_into()?), 9);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BatchDecoder {
    decoder: Arc<dyn Decoder>,
    row_bytes: usize,
    max_image_pixels: u64,
    /// `None` with one thread: the caller's thread decodes, and no thread is started.
    pool: Option<rayon::ThreadPool>,
}

impl std::fmt::Debug for BatchDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchDecoder")
            .field("decoder", &self.decoder.name())
            .field("row_bytes", &self.row_bytes)
            .field("threads", &self.threads())
            .finish()
    }
}

impl BatchDecoder {
    /// `decoder` writing rows of `row_bytes` (what its [`Decoder::declare`] gave for the
    /// field), on `threads` threads (the caller's own for 1). Images are capped at
    /// [`super::DEFAULT_MAX_IMAGE_PIXELS`] ([`BatchDecoder::max_image_pixels`]).
    pub fn new(
        decoder: impl Decoder,
        row_bytes: usize,
        threads: usize,
    ) -> Result<BatchDecoder, std::io::Error> {
        BatchDecoder::from_arc(Arc::new(decoder), row_bytes, threads)
    }

    /// As [`BatchDecoder::new`], for a shared decoder.
    pub fn from_arc(
        decoder: Arc<dyn Decoder>,
        row_bytes: usize,
        threads: usize,
    ) -> Result<BatchDecoder, std::io::Error> {
        let pool = if threads > 1 {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("ffcv-decode-{i}"))
                .build()
                .map_err(std::io::Error::other)?;
            Some(pool)
        } else {
            None
        };
        Ok(BatchDecoder {
            decoder,
            row_bytes,
            max_image_pixels: super::DEFAULT_MAX_IMAGE_PIXELS,
            pool,
        })
    }

    /// Sets the cap on a decoded image's area (see [`crate::LoaderBuilder::max_image_pixels`]).
    pub fn max_image_pixels(mut self, pixels: u64) -> BatchDecoder {
        self.max_image_pixels = pixels;
        self
    }

    /// The bytes of one output row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// The number of threads that decode.
    pub fn threads(&self) -> usize {
        self.pool
            .as_ref()
            .map_or(1, rayon::ThreadPool::current_num_threads)
    }

    /// Decodes `samples` into `output`, row `k` for `samples[k]`, drawing from the loader's
    /// per-sample generator for (`seed`, `epoch`, sample, operation 0). `output` must hold
    /// exactly one row per sample. The first failing sample (in batch order) is returned;
    /// rows of other samples may have been written.
    pub fn run(
        &self,
        samples: &[StoredSample<'_>],
        output: &mut [u8],
        seed: u64,
        epoch: u64,
    ) -> Result<(), SampleDecodeError> {
        let wanted = samples.len().checked_mul(self.row_bytes);
        if wanted != Some(output.len()) {
            return Err(SampleDecodeError {
                sample: samples.first().map_or(0, |s| s.sample),
                decoder: self.decoder.name(),
                message: format!(
                    "{} samples of {}-byte rows do not fill an output of {} bytes",
                    samples.len(),
                    self.row_bytes,
                    output.len()
                ),
                cause: None,
            });
        }
        if self.row_bytes == 0 {
            // Zero-byte rows (an empty field): nothing to write, but every sample is still
            // decoded so that its errors are reported.
            return samples
                .iter()
                .try_for_each(|s| self.decode_one(s, &mut [], seed, epoch));
        }
        let rows = output.chunks_exact_mut(self.row_bytes);
        match &self.pool {
            None => rows
                .zip(samples)
                .try_for_each(|(row, s)| self.decode_one(s, row, seed, epoch)),
            Some(pool) => pool.install(|| {
                let results: Vec<Result<(), SampleDecodeError>> = output
                    .par_chunks_exact_mut(self.row_bytes)
                    .zip(samples.par_iter())
                    .map(|(row, s)| self.decode_one(s, row, seed, epoch))
                    .collect();
                // The first failure in batch order, whichever thread met it first.
                results.into_iter().find(Result::is_err).unwrap_or(Ok(()))
            }),
        }
    }

    fn decode_one(
        &self,
        s: &StoredSample<'_>,
        row: &mut [u8],
        seed: u64,
        epoch: u64,
    ) -> Result<(), SampleDecodeError> {
        let input = SampleInput {
            sample: s.sample,
            data: s.data,
            metadata: s.metadata,
            seed: pipeline_jit::rng::sample_seed(seed, epoch, s.sample, 0),
            max_image_pixels: self.max_image_pixels,
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            self.decoder.decode(&input, row, &mut [])
        }))
        .unwrap_or_else(|_| Err("decoder panicked".into()));
        result.map_err(|e| {
            let (message, cause) = crate::error::extension_parts(e);
            SampleDecodeError {
                sample: s.sample,
                decoder: self.decoder.name(),
                message,
                cause,
            }
        })
    }
}
