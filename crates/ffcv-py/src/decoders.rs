//! `_native.BatchDecoder`: a built-in decoder as the native batch function its
//! `generate_code()` returns (FFCV's protocol: sample ids, the field's metadata, the
//! memory manager's state), for code that drives a decoder itself.
//!
//! `ffcv_rs/fields/_native_decode.py` locates each sample's bytes inside the file's
//! read-only map (the state of the built-in memory managers) and packs one record per
//! sample; [`BatchDecoder::run`] checks every record against the map's length and runs
//! the facade's [`ffcv::decode::BatchDecoder`] over them with the GIL released. The map,
//! the records and the output come as raw pointers from NumPy arrays (`Py_buffer` is
//! outside the 3.9 stable ABI this wheel targets), which is why this is one of the
//! crate's `unsafe` modules: the Python caller keeps the arrays alive and C-contiguous for
//! the call, and `run` reads nothing outside the lengths it is given.

use ffcv::decode::StoredSample;
use pyo3::prelude::*;

use crate::errors::{self, Kind};
use crate::fork::{ForkSafe, Origin};
use crate::spec::{self, Op};

/// Bytes of one record: sample id, offset in the map, length, then 16 metadata bytes
/// (`_native_decode.RECORD`).
const RECORD_BYTES: usize = 40;
const METADATA: std::ops::Range<usize> = 24..40;

fn word(record: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(record[at..at + 8].try_into().expect("8 bytes"))
}

/// A built-in decoder over batches located by the caller (see the module documentation).
#[pyclass(frozen, module = "ffcv_rs._native", name = "BatchDecoder")]
pub struct BatchDecoder {
    /// Its rayon pool's threads are this process's: a forked child neither runs nor
    /// drops it ([`crate::fork`]).
    inner: ForkSafe<ffcv::decode::BatchDecoder>,
    origin: Origin,
    name: String,
}

#[pymethods]
impl BatchDecoder {
    /// The decoder `op` (`(name, params)`, as the loader's pipelines name it) writing rows
    /// of `row_bytes`, on `num_workers` threads (the caller's own for 1), refusing images
    /// over `max_image_pixels`.
    #[new]
    fn new(
        py: Python<'_>,
        op: Op<'_>,
        row_bytes: usize,
        num_workers: usize,
        max_image_pixels: u64,
    ) -> PyResult<BatchDecoder> {
        let (name, params) = op;
        let decoder = spec::decoder(&name, &params)?;
        let inner = ffcv::decode::BatchDecoder::from_arc(decoder, row_bytes, num_workers)
            .map_err(|e| errors::config(py, format!("{name}: {e}")))?
            .max_image_pixels(max_image_pixels);
        Ok(BatchDecoder {
            inner: ForkSafe::new(inner),
            origin: Origin::here(),
            name,
        })
    }

    /// Decodes the samples of the `records_len / 40` records at `records_ptr`, whose
    /// bytes lie in the `map_len` bytes at `map_ptr`, into the `output_len` bytes at
    /// `output_ptr` (one row per record), with the generator of (`seed`, `epoch`); each
    /// buffer is an `(address, length)` pair. The GIL is released. A record whose bytes
    /// lie outside the map, or a sample that does not decode, raises `DecodeError` naming
    /// the sample.
    fn run(
        &self,
        py: Python<'_>,
        map: (usize, usize),
        records: (usize, usize),
        output: (usize, usize),
        seed: u64,
        epoch: u64,
    ) -> PyResult<()> {
        let ((map_ptr, map_len), (records_ptr, records_len)) = (map, records);
        let (output_ptr, output_len) = output;
        self.origin.check(py, "decoder's BatchDecoder")?;
        if !records_len.is_multiple_of(RECORD_BYTES) {
            return Err(errors::config(
                py,
                format!("{}: records of {records_len} bytes", self.name),
            ));
        }
        let n = records_len / RECORD_BYTES;
        if n == 0 {
            return Ok(());
        }
        let row_bytes = self.inner.row_bytes();
        if records_ptr == 0 || (output_len > 0 && output_ptr == 0) || (map_len > 0 && map_ptr == 0)
        {
            return Err(errors::config(py, format!("{}: null buffer", self.name)));
        }
        if Some(output_len) != n.checked_mul(row_bytes) {
            return Err(errors::config(
                py,
                format!(
                    "{}: {n} samples need {} output bytes, got {output_len}",
                    self.name,
                    n.saturating_mul(row_bytes)
                ),
            ));
        }
        // SAFETY: the caller (`_native_decode.py`) passes the address and byte length of a
        // C-contiguous NumPy array of records it holds for the whole call; only read.
        let records = unsafe { std::slice::from_raw_parts(records_ptr as *const u8, records_len) };
        let map: &[u8] = if map_len == 0 {
            &[]
        } else {
            // SAFETY: as above, for the file's read-only map (a NumPy view of it), only read.
            unsafe { std::slice::from_raw_parts(map_ptr as *const u8, map_len) }
        };
        let mut samples = Vec::with_capacity(n);
        for record in records.chunks_exact(RECORD_BYTES) {
            let (sample, offset, len) = (word(record, 0), word(record, 8), word(record, 16));
            let data = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(len).ok())
                .and_then(|(start, len)| map.get(start..start.checked_add(len)?));
            let Some(data) = data else {
                return Err(errors::make(
                    py,
                    Kind::Decode,
                    format!(
                        "sample {sample}: {}: its {len} bytes at offset {offset} lie outside \
                         the file's {map_len} bytes",
                        self.name
                    ),
                    None,
                    Some(sample),
                ));
            };
            samples.push(StoredSample {
                sample,
                data,
                metadata: &record[METADATA],
            });
        }
        if output_len == 0 {
            return py
                .detach(|| self.inner.run(&samples, &mut [], seed, epoch))
                .map_err(|e| decode_error(py, e));
        }
        if (output_ptr..output_ptr + output_len).contains(&records_ptr)
            || (records_ptr..records_ptr + records_len).contains(&output_ptr)
        {
            return Err(errors::config(
                py,
                format!("{}: overlapping buffers", self.name),
            ));
        }
        // SAFETY: as above, for the output array, which only this call writes while it
        // runs; it overlaps neither the records (checked above) nor the read-only map.
        let output = unsafe { std::slice::from_raw_parts_mut(output_ptr as *mut u8, output_len) };
        py.detach(|| self.inner.run(&samples, output, seed, epoch))
            .map_err(|e| decode_error(py, e))
    }

    fn __repr__(&self) -> String {
        format!("BatchDecoder({})", self.name)
    }
}

fn decode_error(py: Python<'_>, e: ffcv::decode::SampleDecodeError) -> PyErr {
    let sample = e.sample;
    errors::make(py, Kind::Decode, e.to_string(), None, Some(sample))
}
