//! The native half of the `ffcv_rs` Python package (`ffcv_rs._native`): the loader, the
//! zero-copy batch views and the writer, over the `ffcv` facade.
//!
//! # Overview
//!
//! - [`loader::NativeLoader`] (`_native.Loader`) owns an [`ffcv::Loader`] and at most one
//!   running epoch; `next_batch` waits with the GIL released and returns one
//!   [`batch::OutputView`] per output.
//! - [`batch::OutputView`] (`_native.BatchOutput`) exports a batch output's slot memory
//!   through `__array_interface__` and `__dlpack__` ([`dlpack`]; [`cuda`] does DLPack's
//!   stream handshake for batches staged on a GPU; the two `unsafe` modules) and keeps
//!   the batch alive, so a slot returns to the loader only when the last
//!   array or tensor viewing it is garbage-collected.
//! - [`writer::write_dataset`] runs beton-io's `DatasetWriter` over a Python callable;
//!   [`ingest::ingest`] runs `ffcv_ingest`'s conversions (WebDataset, Parquet, Arrow,
//!   TFRecord), as `ffcv write` does.
//! - [`file::check_file`] validates a file for `ffcv_rs.reader.Reader`; [`image`] has
//!   the writer's JPEG encoder and resize for `ffcv_rs.fields.rgb_image`.
//! - [`kernels::BatchTransforms`] runs built-in transforms on a batch the Python part of
//!   a pipeline holds (after a user's operation), natively and without the GIL.
//! - [`decoders::BatchDecoder`] is a built-in decoder's batch function for code that
//!   drives the decoder itself (FFCV's protocol), natively and without the GIL.
//! - [`capi`] exports `ffcv_rs.libffcv`'s C functions (FFCV's `memcpy`, `imdecode`,
//!   `resize_crop`), called through `ctypes` and from numba-compiled code.
//! - [`errors`] maps facade errors onto `ffcv_rs.errors` classes with the same messages.
//! - [`fork`] keeps objects that own threads from being used, or dropped, in a process
//!   forked from the one that built them.
//! - [`mixture`] opens a weighted mixture of datasets (`Loader([...], weights=[...])`)
//!   for the loader.
//!
//! FFCV's API itself (`Loader`, `OrderOption`, fields, decoders, transforms,
//! `DatasetWriter`) is Python code in `python/ffcv_rs/`, which also converts outputs to
//! NumPy arrays or torch tensors.

pub mod batch;
pub mod capi;
pub mod cuda;
pub mod decoders;
pub mod dlpack;
pub mod draws;
pub mod errors;
pub mod file;
pub mod fork;
pub mod image;
pub mod ingest;
pub mod kernels;
pub mod loader;
pub mod mixture;
pub mod mixup;
pub mod sample_ids;
pub mod spec;
pub mod writer;

use pyo3::prelude::*;

/// The `ffcv_rs._native` module.
///
/// Declared free of the GIL (pyo3's default since 0.28, stated here because it was
/// checked): every class is `frozen` and `Sync` (pyo3 refuses a class that is not), the
/// loader's state is behind its own mutexes, none taken while waiting for the GIL, the
/// JPEG codecs of [`capi`] are per thread, and no Rust type of the package implements
/// `Send` or `Sync` by hand. `docs/python.md` says which free-threaded builds were tried.
#[pymodule(name = "_native", gil_used = false)]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<loader::NativeLoader>()?;
    m.add_class::<loader::EpochHandle>()?;
    m.add_class::<batch::OutputView>()?;
    m.add_class::<kernels::BatchTransforms>()?;
    m.add_class::<decoders::BatchDecoder>()?;
    m.add_function(wrap_pyfunction!(writer::write_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(ingest::ingest, m)?)?;
    m.add_function(wrap_pyfunction!(file::check_file, m)?)?;
    m.add_function(wrap_pyfunction!(image::encode_jpeg, m)?)?;
    m.add_function(wrap_pyfunction!(image::downscale, m)?)?;
    m.add_function(wrap_pyfunction!(mixup::mixup_lambdas, m)?)?;
    m.add_function(wrap_pyfunction!(mixup::image_mixup, m)?)?;
    m.add_function(wrap_pyfunction!(mixup::label_mixup, m)?)?;
    m.add_function(wrap_pyfunction!(mixup::mixup_to_one_hot, m)?)?;
    m.add_function(wrap_pyfunction!(draws::colour_factors, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
