//! `_native.write_dataset`: beton-io's `DatasetWriter` fed by a Python callable.
//!
//! The user's dataset is never called concurrently: the thread that calls `write_dataset`
//! calls `get(0)`, `get(1)`, … in order, with the GIL, and turns each sample into plain
//! values (`ffcv_rs/writer.py` has already made them ints, floats, bytes, JSON text, raw
//! pixels, or a custom field's encoded metadata and payload). The samples wait in a bounded
//! [`Feed`] until a writer thread takes them; the writer threads encode images (resize,
//! JPEG) and fill pages without the GIL, and never call Python. A dataset whose
//! `__getitem__` uses global state (`np.random.seed(index)` then draws) therefore writes
//! the same values as with one worker; with threads calling it at once, samples could get
//! each other's draws. One reading thread was chosen over FFCV's worker processes by
//! measurement (docs/python.md, "How the dataset is read"): one thread's reading kept ahead
//! of the writer threads in every measured case, and processes pickle every sample back.
//!
//! A custom field (kind `custom`: a `Field` subclass that is not a built-in class) is
//! encoded by its own Python `encode` on the reading thread and written through a
//! [`CustomHandler`] with type id 255; the pointers its `malloc` handed out are
//! placeholders, replaced here by the payload's file address ([`PyCustom`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use ffcv::ExtensionError;
use ffcv::format::{
    CustomHandler, DatasetWriter, FieldSpec, FieldType, FieldValue, JsonValue, NdArrayArgs,
    NumpyDtype, RgbImage, SampleSource, SourceError, VarArrayArgs,
};
use ffcv::image::{ImageMode, RgbImageEncoder, WriteMode};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors;

/// How one field's plain value becomes a [`FieldValue`].
enum Column {
    Int,
    Float,
    Bytes,
    /// NDArray or TorchTensor: exactly this many bytes.
    Array(usize),
    /// VarArrayField: a whole number of rows of this many bytes.
    VarArray(u64),
    Json,
    Image(RgbImageEncoder),
    /// ImageField: a file's bytes or a raw sample (`crate::image::stored_image`).
    Pixels(ffcv::format::ImageArgs),
    /// A custom field: `(metadata, payload or None, placeholder base)` from its `encode`.
    Custom(Arc<PyCustom>),
}

/// At most this many bytes of read samples wait for the writer threads (beyond one sample):
/// enough for every thread's chunk of small samples, a bound for large images.
const MAX_WAITING_BYTES: usize = 256 << 20;

/// How often a wait with the GIL released looks for Ctrl-C and progress.
const POLL: Duration = Duration::from_millis(50);

/// Samples read by the calling thread, waiting for a writer thread to take them.
///
/// The writer threads take chunks of consecutive samples in order and write each chunk's
/// samples in order, and the reader reads in order, so the lowest sample not yet taken is
/// always wanted by a thread or about to be: the bound cannot deadlock. It holds a whole
/// chunk per thread (the writer's `chunksize`) so that no thread waits for the reader while
/// another's chunk is being read, unless the samples are large ([`MAX_WAITING_BYTES`]).
///
/// Wake-ups are targeted: a writer thread waiting for a sample sleeps on a condvar of its
/// own, woken only when that sample arrives, and the reader is woken only while it waits
/// for room (each wake-up of a thread that goes back to sleep cost about as much as
/// reading a scalar sample).
struct Feed {
    state: Mutex<FeedState>,
    /// The reading thread waits here: for room, for progress, for the end of the write.
    reader: Condvar,
    max_samples: usize,
}

#[derive(Default)]
struct FeedState {
    /// Read samples no writer thread has taken yet.
    ready: HashMap<u64, Vec<FieldValue>>,
    /// Their approximate size.
    bytes: usize,
    /// The samples writer threads wait for, with the condvar each one sleeps on.
    waiting: HashMap<u64, Arc<Condvar>>,
    /// Whether the reading thread waits for room.
    reader_waits: bool,
    /// Why reading stopped before the end: a thread that wants a sample not read fails.
    stopped: Option<String>,
    /// The write returned (finished or failed): reading stops.
    writer_done: bool,
    /// Samples written so far, as the writer reports them after each chunk.
    done: u64,
}

impl Feed {
    fn lock(&self) -> MutexGuard<'_, FeedState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the reader must wait before adding a sample.
    fn full(&self, st: &FeedState) -> bool {
        !st.writer_done
            && (st.ready.len() >= self.max_samples
                || (st.bytes >= MAX_WAITING_BYTES && !st.ready.is_empty()))
    }

    /// Sample `index`, once the reader has it (called by the writer threads).
    fn take(&self, index: u64) -> Result<Vec<FieldValue>, SourceError> {
        let mut st = self.lock();
        loop {
            if let Some(values) = st.ready.remove(&index) {
                st.bytes -= approximate_size(&values);
                st.waiting.remove(&index);
                if st.reader_waits {
                    self.reader.notify_one();
                }
                return Ok(values);
            }
            if let Some(why) = &st.stopped {
                return Err(why.clone().into());
            }
            let wake = Arc::clone(st.waiting.entry(index).or_default());
            st = wake.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn put(&self, index: u64, values: Vec<FieldValue>) {
        let mut st = self.lock();
        st.bytes += approximate_size(&values);
        st.ready.insert(index, values);
        if let Some(wake) = st.waiting.get(&index) {
            wake.notify_one();
        }
    }

    /// Wakes the reading thread (the write's progress or end).
    fn tell_reader(&self, update: impl FnOnce(&mut FeedState)) {
        update(&mut self.lock());
        self.reader.notify_one();
    }

    fn stop(&self, why: String) {
        let mut st = self.lock();
        st.stopped.get_or_insert(why);
        for wake in st.waiting.values() {
            wake.notify_one();
        }
    }
}

fn approximate_size(values: &[FieldValue]) -> usize {
    values
        .iter()
        .map(|v| match v {
            FieldValue::Bytes(b) | FieldValue::NdArray(b) | FieldValue::Custom(b) => b.len(),
            FieldValue::RgbImage(RgbImage::Raw { pixels, .. }) => pixels.len(),
            FieldValue::RgbImage(RgbImage::Jpeg { bytes, .. }) => bytes.len(),
            _ => 8,
        })
        .sum()
}

/// The writer's side of the samples: taken from the [`Feed`], images encoded here.
struct FedSource {
    feed: Arc<Feed>,
    len: u64,
    columns: Vec<Column>,
    names: Vec<String>,
}

impl SampleSource for FedSource {
    fn num_samples(&self) -> u64 {
        self.len
    }

    fn sample(&self, index: u64) -> Result<Vec<FieldValue>, SourceError> {
        let plain = self.feed.take(index)?;
        // Image encoding (resize, JPEG) runs here, on the writer thread, without the GIL.
        plain
            .into_iter()
            .zip(&self.columns)
            .enumerate()
            .map(|(f, (value, column))| match column {
                Column::Image(encoder) => encode_image(encoder, index, &self.names[f], value),
                _ => Ok(value),
            })
            .collect()
    }
}

/// Why reading a sample failed.
enum ReadError {
    /// The dataset (or the plain conversion in Python) raised: re-raised as it is.
    Python(PyErr),
    /// The value does not fit its field: the write fails with the writer's error.
    Value(String),
}

/// Calls `get(index)` and converts its values (with the GIL, on the calling thread).
fn read_sample(
    get: &Bound<'_, PyAny>,
    index: u64,
    columns: &[Column],
    names: &[String],
) -> Result<Vec<FieldValue>, ReadError> {
    let got = get.call1((index,)).map_err(ReadError::Python)?;
    let items: Vec<Bound<'_, PyAny>> = got
        .extract()
        .map_err(|_| ReadError::Value(format!("sample {index}: expected one value per field")))?;
    if items.len() != columns.len() {
        return Err(ReadError::Value(format!(
            "sample {index}: {} values for {} fields",
            items.len(),
            columns.len()
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(f, v)| convert(&columns[f], &names[f], index, v))
        .collect::<Result<_, String>>()
        .map_err(ReadError::Value)
}

fn convert(
    column: &Column,
    name: &str,
    index: u64,
    v: &Bound<'_, PyAny>,
) -> Result<FieldValue, String> {
    let bad = |what: &str| format!("sample {index}, field {name:?}: {what}");
    let bytes = |what: &str| -> Result<Vec<u8>, String> {
        Ok(v.cast::<PyBytes>()
            .map_err(|_| bad(what))?
            .as_bytes()
            .to_vec())
    };
    Ok(match column {
        Column::Int => FieldValue::Int(v.extract::<i64>().map_err(|_| bad("expected an int"))?),
        Column::Float => {
            FieldValue::Float(v.extract::<f64>().map_err(|_| bad("expected a float"))?)
        }
        Column::Bytes => FieldValue::Bytes(bytes("expected bytes")?),
        Column::Array(n) => {
            let b = bytes("expected array bytes")?;
            if b.len() != *n {
                return Err(bad(&format!(
                    "array has {} bytes, the field's dtype and shape need {n}",
                    b.len()
                )));
            }
            FieldValue::NdArray(b)
        }
        Column::VarArray(row) => {
            let b = bytes("expected array bytes")?;
            if !(b.len() as u64).is_multiple_of(*row) {
                return Err(bad(&format!(
                    "array has {} bytes, not a whole number of the field's {row}-byte rows",
                    b.len()
                )));
            }
            FieldValue::NdArray(b)
        }
        Column::Json => {
            let text: String = v.extract().map_err(|_| bad("expected JSON text"))?;
            FieldValue::Json(JsonValue::parse(&text).map_err(|e| bad(&e))?)
        }
        Column::Image(_) => {
            let (h, w, pixels): (u32, u32, Vec<u8>) = v
                .extract()
                .map_err(|_| bad("expected (height, width, RGB bytes)"))?;
            // Encoded by a writer thread, without the GIL; carried as a raw image until then.
            let (Ok(width), Ok(height)) = (u16::try_from(w), u16::try_from(h)) else {
                return Ok(FieldValue::Bytes(encode_marker(h, w, pixels)));
            };
            FieldValue::RgbImage(RgbImage::Raw {
                width,
                height,
                pixels,
            })
        }
        Column::Pixels(a) => {
            crate::image::stored_image(&bytes("expected bytes")?, *a).map_err(|e| bad(&e))?
        }
        Column::Custom(handler) => {
            let (metadata, payload, base): (Vec<u8>, Option<Vec<u8>>, u64) = v
                .extract()
                .map_err(|_| bad("expected (metadata bytes, payload bytes or None, base)"))?;
            FieldValue::Custom(
                handler
                    .pack(&metadata, payload.as_deref(), base)
                    .map_err(|e| bad(&e))?,
            )
        }
    })
}

/// An image larger than u16 sides still goes to the encoder (which may downscale it with
/// `max_resolution`): its size travels in front of the pixels.
fn encode_marker(h: u32, w: u32, pixels: Vec<u8>) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + pixels.len());
    v.extend_from_slice(&h.to_le_bytes());
    v.extend_from_slice(&w.to_le_bytes());
    v.extend_from_slice(&pixels);
    v
}

/// A custom field written through its Python `encode`: the [`CustomHandler`] that stores
/// the metadata bytes `encode` left in its one-row `destination` and the bytes it wrote
/// into the buffers its `malloc` returned, with type id 255 and the field's `to_binary()`.
///
/// `malloc(size)` cannot know where the bytes will land (the writer threads place samples
/// in pages later), so it hands out placeholder pointers: `base + offset`, where `base` is
/// a random multiple of 2^32 below 2^63 chosen per write and `offset` is where that
/// allocation starts in the field's payload (all of a sample's allocations for the field,
/// concatenated). Once the payload is placed at `ptr`, every 8-byte little-endian value in
/// the metadata between `base` and `base + payload length` becomes `ptr + offset`. So a
/// field may call `malloc` any number of times and must store the pointers it got as
/// 8-byte integers (`<u8` or `<i8`, as FFCV's own fields do), unchanged or offset within
/// the payload; a placeholder stored any other way cannot be found, and is an error.
#[derive(Debug)]
pub struct PyCustom {
    class_name: String,
    itemsize: u64,
    alignment: u64,
    arguments: [u8; ffcv::format::ARGS_SIZE],
}

/// A custom value's parts: the placeholder base, `encode`'s metadata, the payload.
struct Packed<'v> {
    base: u64,
    metadata: &'v [u8],
    payload: Option<&'v [u8]>,
}

/// The packed value: `base`, the metadata length, the metadata, a payload flag, the payload.
const HEAD: usize = 16;

impl PyCustom {
    fn pack(&self, metadata: &[u8], payload: Option<&[u8]>, base: u64) -> Result<Vec<u8>, String> {
        if metadata.len() as u64 != self.itemsize {
            return Err(format!(
                "encode left {} metadata bytes, the field's metadata_type has {}",
                metadata.len(),
                self.itemsize
            ));
        }
        let mut v = Vec::with_capacity(HEAD + metadata.len() + 1 + payload.map_or(0, <[u8]>::len));
        v.extend_from_slice(&base.to_le_bytes());
        v.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
        v.extend_from_slice(metadata);
        v.push(u8::from(payload.is_some()));
        if let Some(p) = payload {
            v.extend_from_slice(p);
        }
        Ok(v)
    }

    /// The parts of a value made by [`PyCustom::pack`].
    fn unpack<'v>(&self, value: &'v [u8]) -> Result<Packed<'v>, String> {
        let word = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(value.get(at..at + 8)?.try_into().ok()?))
        };
        let broken = || format!("a {} value not made by ffcv_rs's writer", self.class_name);
        let (Some(base), Some(meta_len)) = (word(0), word(8)) else {
            return Err(broken());
        };
        let meta_end = usize::try_from(meta_len)
            .ok()
            .and_then(|n| n.checked_add(HEAD))
            .filter(|&end| end < value.len())
            .ok_or_else(broken)?;
        let payload = (value[meta_end] != 0).then(|| &value[meta_end + 1..]);
        Ok(Packed {
            base,
            metadata: &value[HEAD..meta_end],
            payload,
        })
    }
}

impl CustomHandler for PyCustom {
    fn class_name(&self) -> &str {
        &self.class_name
    }

    fn metadata_layout(&self) -> (u64, u64) {
        (self.itemsize, self.alignment)
    }

    fn arguments(&self) -> [u8; ffcv::format::ARGS_SIZE] {
        self.arguments
    }

    fn payload<'v>(&self, value: &'v [u8]) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        Ok(self.unpack(value)?.payload.map(Cow::Borrowed))
    }

    fn write_metadata(
        &self,
        value: &[u8],
        ptr: u64,
        len: u64,
        out: &mut [u8],
    ) -> Result<(), ExtensionError> {
        let Packed {
            base,
            metadata,
            payload,
        } = self.unpack(value)?;
        out.copy_from_slice(metadata);
        if payload.is_none() {
            return Ok(());
        }
        let mut patched = 0;
        let mut at = 0;
        while at + 8 <= out.len() {
            let word = u64::from_le_bytes(out[at..at + 8].try_into().expect("8 bytes"));
            match word.checked_sub(base) {
                Some(offset) if offset <= len => {
                    out[at..at + 8].copy_from_slice(&(ptr + offset).to_le_bytes());
                    patched += 1;
                    at += 8;
                }
                _ => at += 1,
            }
        }
        if patched == 0 {
            return Err(format!(
                "{}.encode called malloc but stored none of the pointers it returned in its \
                 metadata as an 8-byte integer; ffcv_rs replaces those by file addresses",
                self.class_name
            )
            .into());
        }
        Ok(())
    }
}

fn custom(name: &str, params: &Bound<'_, PyDict>) -> PyResult<PyCustom> {
    let need = |key: &str| PyValueError::new_err(format!("field {name:?}: no {key}"));
    let itemsize: u64 = get(name, params, "itemsize")?.ok_or_else(|| need("itemsize"))?;
    let alignment: u64 = get(name, params, "alignment")?.ok_or_else(|| need("alignment"))?;
    let given: Vec<u8> = get(name, params, "arguments")?.unwrap_or_default();
    let mut arguments = [0u8; ffcv::format::ARGS_SIZE];
    if given.len() > arguments.len() {
        return Err(PyValueError::new_err(format!(
            "field {name:?}: to_binary() gave {} bytes, a field's arguments hold {}",
            given.len(),
            arguments.len()
        )));
    }
    arguments[..given.len()].copy_from_slice(&given);
    Ok(PyCustom {
        class_name: get(name, params, "class_name")?.unwrap_or_else(|| "CustomField".into()),
        itemsize,
        alignment,
        arguments,
    })
}

/// The seed of `write_mode="proportion"`'s draws ([`ffcv::image::sample_generator`]):
/// FFCV's `RGBImageField` takes none, and 0 is `ffcv write image-folder`'s default.
const PROPORTION_SEED: u64 = 0;

fn encode_image(
    encoder: &RgbImageEncoder,
    index: u64,
    name: &str,
    value: FieldValue,
) -> Result<FieldValue, SourceError> {
    let bad = |e: String| SourceError::from(format!("sample {index}, field {name:?}: {e}"));
    let (w, h, pixels) = match value {
        FieldValue::RgbImage(RgbImage::Raw {
            width,
            height,
            pixels,
        }) => (u32::from(width), u32::from(height), pixels),
        FieldValue::Bytes(marked) if marked.len() >= 8 => {
            let h = u32::from_le_bytes(marked[0..4].try_into().expect("4 bytes"));
            let w = u32::from_le_bytes(marked[4..8].try_into().expect("4 bytes"));
            (w, h, marked[8..].to_vec())
        }
        _ => return Err(bad("not an image".into())),
    };
    let image = ffcv::image::RgbImage::new(w, h, pixels).map_err(|e| bad(e.to_string()))?;
    // Only `write_mode="proportion"` draws, from the writers' one seeding rule with seed 0
    // (`ffcv write image-folder`'s default `--seed`): the same images give the CLI's file.
    let encoded = encoder
        .encode_sample(&image, PROPORTION_SEED, index)
        .map_err(|e| bad(e.to_string()))?;
    Ok(FieldValue::RgbImage(match encoded.mode {
        ImageMode::Raw => RgbImage::Raw {
            width: encoded.width,
            height: encoded.height,
            pixels: encoded.data,
        },
        ImageMode::Jpeg => RgbImage::Jpeg {
            width: encoded.width,
            height: encoded.height,
            bytes: encoded.data,
        },
    }))
}

fn get<'py, T: FromPyObjectOwned<'py>>(
    field: &str,
    params: &Bound<'py, PyDict>,
    key: &str,
) -> PyResult<Option<T>> {
    match params.get_item(key)? {
        Some(v) if !v.is_none() => v.extract::<T>().map(Some).map_err(|e| {
            PyValueError::new_err(format!(
                "field {field:?}: {key}: {}",
                Into::<PyErr>::into(e)
            ))
        }),
        _ => Ok(None),
    }
}

fn column(
    py: Python<'_>,
    name: &str,
    kind: &str,
    params: &Bound<'_, PyDict>,
) -> PyResult<(FieldSpec, Column)> {
    if kind == "custom" {
        let handler = Arc::new(custom(name, params)?);
        return Ok((
            FieldSpec::custom(name, handler.clone()),
            Column::Custom(handler),
        ));
    }
    let array = |torch: bool| -> PyResult<(FieldType, Column)> {
        let descr: String = get(name, params, "descr")?
            .ok_or_else(|| PyValueError::new_err(format!("field {name:?}: no dtype")))?;
        let shape: Vec<u64> = get(name, params, "shape")?.unwrap_or_default();
        let dtype = NumpyDtype::from_descr_json(descr.as_bytes())
            .map_err(|e| errors::config(py, format!("field {name:?}: dtype: {e}")))?;
        let n = shape
            .iter()
            .try_fold(dtype.item_size(), |a, &d| a.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| errors::config(py, format!("field {name:?}: shape too large")))?;
        let args = NdArrayArgs::new(dtype, shape);
        let t = if torch {
            FieldType::TorchTensor(args)
        } else {
            FieldType::NdArray(args)
        };
        Ok((t, Column::Array(n)))
    };
    let (t, c) = match kind {
        "int" => (FieldType::Int, Column::Int),
        "float" => (FieldType::Float, Column::Float),
        "bytes" => (FieldType::Bytes, Column::Bytes),
        "json" => (FieldType::Json, Column::Json),
        "var_array" => {
            let descr: String = get(name, params, "descr")?
                .ok_or_else(|| PyValueError::new_err(format!("field {name:?}: no dtype")))?;
            let inner: Vec<u64> = get(name, params, "inner_shape")?.unwrap_or_default();
            let args = NumpyDtype::from_descr_json(descr.as_bytes())
                .and_then(|dtype| VarArrayArgs::new(dtype, inner))
                .map_err(|e| errors::config(py, format!("field {name:?}: {e}")))?;
            let row = args.row_bytes().unwrap_or(1);
            (FieldType::VarArray(args), Column::VarArray(row))
        }
        "image" => {
            let a = crate::image::image_kind(
                get(name, params, "channels")?,
                get(name, params, "bits")?,
            )
            .map_err(|e| errors::config(py, format!("field {name:?}: {e}")))?;
            (FieldType::Image(a), Column::Pixels(a))
        }
        "ndarray" => array(false)?,
        "torch" => array(true)?,
        "rgb" => {
            let mode: String = get(name, params, "write_mode")?.unwrap_or_else(|| "raw".into());
            let write_mode = match mode.as_str() {
                "raw" => WriteMode::Raw,
                "jpg" => WriteMode::Jpg,
                "smart" => WriteMode::Smart {
                    threshold: get(name, params, "smart_threshold")?,
                },
                "proportion" => WriteMode::Proportion {
                    compress_probability: get(name, params, "compress_probability")?.unwrap_or(0.5),
                },
                other => {
                    return Err(errors::config(
                        py,
                        format!(
                            "field {name:?}: write_mode {other:?} is not raw, jpg, smart or \
                             proportion"
                        ),
                    ));
                }
            };
            let jpeg_quality: u8 = get(name, params, "jpeg_quality")?.unwrap_or(90);
            if !(1..=100).contains(&jpeg_quality) {
                return Err(errors::config(
                    py,
                    format!("field {name:?}: jpeg_quality {jpeg_quality} is not in 1..=100"),
                ));
            }
            let encoder = RgbImageEncoder {
                write_mode,
                max_resolution: get(name, params, "max_resolution")?,
                jpeg_quality,
            };
            (FieldType::RgbImage, Column::Image(encoder))
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "field {name:?}: unknown field kind {other:?}"
            )));
        }
    };
    Ok((FieldSpec::new(name, t), c))
}

/// Runs its closure when dropped, unwinding included.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// The progress callback, called from the reading thread when the writer threads report.
struct Bar<'py> {
    progress: Option<Bound<'py, PyAny>>,
    shown: u64,
}

impl Bar<'_> {
    fn show(&mut self, done: u64) {
        if done != self.shown {
            self.shown = done;
            if let Some(p) = &self.progress {
                // A failing progress bar must not fail the write.
                let _ = p.call1((done,));
            }
        }
    }
}

/// Reads every sample in order into the feed. Stops early when the write failed, or when
/// reading failed: a Python exception is returned (the write then fails too), a value that
/// does not fit its field makes the writer fail with its own error.
fn read_all(
    py: Python<'_>,
    get: &Bound<'_, PyAny>,
    source: &FedSource,
    bar: &mut Bar<'_>,
) -> PyResult<()> {
    let feed = &source.feed;
    for index in 0..source.len {
        loop {
            let (writer_done, full, done) = {
                let st = feed.lock();
                (st.writer_done, feed.full(&st), st.done)
            };
            bar.show(done);
            if writer_done {
                return Ok(());
            }
            if !full {
                break;
            }
            py.detach(|| {
                let mut st = feed.lock();
                st.reader_waits = true;
                let (mut st, _) = feed
                    .reader
                    .wait_timeout_while(st, POLL, |st| feed.full(st))
                    .unwrap_or_else(|p| p.into_inner());
                st.reader_waits = false;
            });
            if let Err(interrupt) = py.check_signals() {
                feed.stop("the write was interrupted".into());
                return Err(interrupt);
            }
        }
        match read_sample(get, index, &source.columns, &source.names) {
            Ok(values) => feed.put(index, values),
            Err(ReadError::Python(e)) => {
                feed.stop(format!("sample {index}: the dataset raised {e}"));
                return Err(e);
            }
            Err(ReadError::Value(why)) => {
                feed.stop(why);
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Waits with the GIL released until the writer threads return, showing progress. A
/// Ctrl-C meanwhile is returned once they have (the samples are all read by then, so
/// what is left is bounded by the feed).
fn wait_for_writer(py: Python<'_>, feed: &Feed, bar: &mut Bar<'_>) -> Option<PyErr> {
    let mut interrupt = None;
    loop {
        let (writer_done, done) = {
            let st = feed.lock();
            (st.writer_done, st.done)
        };
        bar.show(done);
        if writer_done {
            return interrupt;
        }
        py.detach(|| {
            let st = feed.lock();
            let _ = feed
                .reader
                .wait_timeout_while(st, POLL, |st| !st.writer_done && st.done == done)
                .unwrap_or_else(|p| p.into_inner());
        });
        if interrupt.is_none() {
            interrupt = py.check_signals().err();
        }
    }
}

/// Writes `num_samples` samples, sample `i` being `get(i)`, to `path`. `get` is called on
/// this thread only, for `0, 1, …` in order; so is `progress(samples_done)`, after each
/// chunk the writer threads finish. Returns `(samples, pages, file size)`.
#[pyfunction]
#[pyo3(signature = (path, fields, get, num_samples, page_size, num_workers, chunksize, progress=None))]
// PyO3 maps Python arguments to parameters one for one: these are what `ffcv_rs.writer`
// passes from FFCV's `DatasetWriter(fname, fields, page_size, num_workers)` and
// `from_indexed_dataset(dataset, chunksize, ...)`.
#[allow(clippy::too_many_arguments)]
pub fn write_dataset(
    py: Python<'_>,
    path: String,
    fields: Vec<(String, String, Bound<'_, PyDict>)>,
    get: Bound<'_, PyAny>,
    num_samples: u64,
    page_size: u64,
    num_workers: usize,
    chunksize: usize,
    progress: Option<Bound<'_, PyAny>>,
) -> PyResult<(u64, u64, u64)> {
    let mut specs = Vec::new();
    let mut columns = Vec::new();
    let mut names = Vec::new();
    for (name, kind, params) in &fields {
        let (spec, c) = column(py, name, kind, params)?;
        specs.push(spec);
        columns.push(c);
        names.push(name.clone());
    }
    let workers = match num_workers {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };
    let feed = Arc::new(Feed {
        state: Mutex::new(FeedState::default()),
        reader: Condvar::new(),
        max_samples: workers
            .saturating_mul(chunksize.max(1))
            .saturating_add(workers),
    });
    let reported = Arc::clone(&feed);
    let writer = DatasetWriter::new(&path, specs)
        .and_then(|w| w.with_page_size(page_size))
        .map_err(|e| errors::from_format(py, e))?
        .with_num_workers(workers)
        .with_chunk_size(chunksize)
        .with_progress(move |done| reported.tell_reader(|st| st.done = done));
    let source = FedSource {
        feed: Arc::clone(&feed),
        len: num_samples,
        columns,
        names,
    };
    let mut bar = Bar { progress, shown: 0 };
    let (read, interrupt, written) = std::thread::scope(|scope| {
        let handle = scope.spawn(|| {
            // Also on a panic, or the reader would wait for room forever.
            let _done = OnDrop(|| feed.tell_reader(|st| st.writer_done = true));
            writer.write(&source)
        });
        // Also on a panic, or the writer threads would wait for samples forever.
        let stop = OnDrop(|| feed.stop("the reading thread stopped before this sample".into()));
        let read = read_all(py, &get, &source, &mut bar);
        drop(stop);
        let interrupt = wait_for_writer(py, &feed, &mut bar);
        let written = py
            .detach(|| handle.join())
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (read, interrupt, written)
    });
    // The dataset's own exception (or a Ctrl-C while reading) comes first, as with FFCV.
    read?;
    match written {
        Ok(s) => match interrupt {
            Some(interrupt) => {
                // Interrupted after the last sample was read: the write is not kept.
                let _ = std::fs::remove_file(&path);
                Err(interrupt)
            }
            None => Ok((s.num_samples, s.num_pages, s.file_size)),
        },
        Err(e) => Err(errors::from_format(py, e)),
    }
}
