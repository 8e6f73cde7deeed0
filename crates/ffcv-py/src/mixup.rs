//! FFCV's mixup on batches the Python part of a pipeline holds: `_native.mixup_lambdas`,
//! `image_mixup`, `label_mixup` and `mixup_to_one_hot`, over
//! [`ffcv::transforms::mixup`].
//!
//! The batches come as raw addresses and byte lengths of C-contiguous NumPy arrays
//! (`Py_buffer` is outside the 3.9 stable ABI this wheel targets), which is why this is
//! one of the crate's `unsafe` modules: every function checks that the addresses are not
//! null, that the buffers do not overlap (except `image_mixup`'s input and output at the
//! same address, which mixes in place) and that `f32` buffers are aligned; the lengths
//! are checked by the facade's functions. The Python caller keeps the arrays alive and
//! unmodified for the call. The work runs without the GIL.

use ffcv::jit::ElemType;
use ffcv::transforms::{BadParameter, mixup};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::spec;

/// `ValueError` with the facade's message.
fn value_error(e: BadParameter) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Refuses a null address for a non-empty buffer.
fn check_ptr(name: &str, what: &str, ptr: usize, len: usize) -> PyResult<()> {
    if ptr == 0 && len != 0 {
        return Err(PyValueError::new_err(format!(
            "{name}: the {what} address is null"
        )));
    }
    Ok(())
}

/// Refuses two buffers that share a byte.
fn check_apart(name: &str, a: (usize, usize), b: (usize, usize)) -> PyResult<()> {
    let (a_end, b_end) = (a.0.saturating_add(a.1), b.0.saturating_add(b.1));
    if a.1 != 0 && b.1 != 0 && a.0 < b_end && b.0 < a_end {
        return Err(PyValueError::new_err(format!(
            "{name}: the input and output buffers overlap"
        )));
    }
    Ok(())
}

/// Refuses an `f32` buffer that is not a whole number of aligned `f32`s.
fn check_f32(name: &str, what: &str, ptr: usize, len: usize) -> PyResult<()> {
    if !ptr.is_multiple_of(align_of::<f32>()) || !len.is_multiple_of(size_of::<f32>()) {
        return Err(PyValueError::new_err(format!(
            "{name}: the {what} ({len} bytes at {ptr:#x}) is not an aligned float32 array"
        )));
    }
    Ok(())
}

/// `ptr..ptr + len` as bytes (empty for a zero length, whatever the address).
///
/// # Safety
/// For a non-zero `len`, `ptr` is the address of `len` readable bytes that nothing writes
/// while the slice lives.
unsafe fn bytes<'a>(ptr: usize, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's contract: `len` readable bytes at `ptr`, not written meanwhile.
    unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
}

/// `ptr..ptr + len` as mutable bytes (empty for a zero length).
///
/// # Safety
/// For a non-zero `len`, `ptr` is the address of `len` writable bytes that nothing else
/// reads or writes while the slice lives.
unsafe fn bytes_mut<'a>(ptr: usize, len: usize) -> &'a mut [u8] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: the caller's contract: `len` writable bytes at `ptr`, used only through this.
    unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) }
}

/// `ptr..ptr + len` bytes as `f32`s (empty for a zero length).
///
/// # Safety
/// As [`bytes`], and `ptr` and `len` passed [`check_f32`].
unsafe fn floats<'a>(ptr: usize, len: usize) -> &'a [f32] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's contract; aligned and a whole number of f32s (`check_f32`),
    // and every bit pattern is an f32.
    unsafe { std::slice::from_raw_parts(ptr as *const f32, len / size_of::<f32>()) }
}

/// `ptr..ptr + len` bytes as mutable `f32`s (empty for a zero length).
///
/// # Safety
/// As [`bytes_mut`], and `ptr` and `len` passed [`check_f32`].
unsafe fn floats_mut<'a>(ptr: usize, len: usize) -> &'a mut [f32] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: the caller's contract; aligned and a whole number of f32s (`check_f32`).
    unsafe { std::slice::from_raw_parts_mut(ptr as *mut f32, len / size_of::<f32>()) }
}

/// The mixup weight of each of `sample_ids` in `epoch` of a loader seeded with `seed`:
/// `Beta(alpha, alpha)` per sample id, or with `same_lambda` the last id's for all. The
/// image's and the label's mixup call it with the same arguments and get the same values.
#[pyfunction]
pub fn mixup_lambdas(
    py: Python<'_>,
    seed: u64,
    epoch: u64,
    sample_ids: Vec<u64>,
    alpha: f64,
    same_lambda: bool,
) -> PyResult<Vec<f64>> {
    py.detach(|| mixup::lambdas(seed, epoch, &sample_ids, alpha, same_lambda))
        .map_err(value_error)
}

/// FFCV's `ImageMixup` on `len(lambdas)` samples of `dtype` (a NumPy name): row `i` of
/// the output is `lam_i * input[i] + (1 - lam_i) * input[i - 1]`. `input_ptr ==
/// output_ptr` mixes in place; other overlapping buffers are refused.
#[pyfunction]
pub fn image_mixup(
    py: Python<'_>,
    input_ptr: usize,
    input_len: usize,
    output_ptr: usize,
    output_len: usize,
    dtype: &str,
    lambdas: Vec<f64>,
) -> PyResult<()> {
    const NAME: &str = "image_mixup";
    let elem = spec::dtype("ImageMixup", dtype)?;
    check_ptr(NAME, "input", input_ptr, input_len)?;
    check_ptr(NAME, "output", output_ptr, output_len)?;
    if input_ptr == output_ptr && input_len == output_len {
        // SAFETY: the caller passes a C-contiguous NumPy array of `input_len` bytes it
        // holds for the call, and only this call uses it meanwhile.
        let batch = unsafe { bytes_mut(input_ptr, input_len) };
        return py
            .detach(|| mixup::image_mixup_in_place(batch, elem, &lambdas))
            .map_err(value_error);
    }
    check_apart(NAME, (input_ptr, input_len), (output_ptr, output_len))?;
    // SAFETY: a NumPy array the caller holds for the call; it is only read.
    let input = unsafe { bytes(input_ptr, input_len) };
    // SAFETY: another array the caller holds (disjoint from the input, checked above)
    // that only this call writes.
    let output = unsafe { bytes_mut(output_ptr, output_len) };
    py.detach(|| mixup::image_mixup(input, output, elem, &lambdas))
        .map_err(value_error)
}

/// FFCV's `LabelMixup`: from a `[n, k]` label array of `dtype` (column 0 is the label,
/// `n = len(lambdas)`), the `[n, 3]` float32 rows `(label_i, label_{i-1}, lam_i)`.
#[pyfunction]
pub fn label_mixup(
    py: Python<'_>,
    labels_ptr: usize,
    labels_len: usize,
    dtype: &str,
    output_ptr: usize,
    output_len: usize,
    lambdas: Vec<f64>,
) -> PyResult<()> {
    const NAME: &str = "label_mixup";
    let elem: ElemType = spec::dtype("LabelMixup", dtype)?;
    check_ptr(NAME, "labels", labels_ptr, labels_len)?;
    check_ptr(NAME, "output", output_ptr, output_len)?;
    check_f32(NAME, "output", output_ptr, output_len)?;
    check_apart(NAME, (labels_ptr, labels_len), (output_ptr, output_len))?;
    // SAFETY: a NumPy array the caller holds for the call; it is only read.
    let labels = unsafe { bytes(labels_ptr, labels_len) };
    // SAFETY: a float32 array the caller holds (aligned and disjoint from the labels,
    // checked above) that only this call writes.
    let output = unsafe { floats_mut(output_ptr, output_len) };
    py.detach(|| mixup::label_mixup(labels, elem, &lambdas, output))
        .map_err(value_error)
}

/// FFCV's `MixupToOneHot(num_classes)`: `[n, 3]` float32 mixed rows into `[n,
/// num_classes]` float32 rows with `lam` at the label and `1 - lam` at the other label
/// (the second write wins for one class twice). A label that is not a class is a
/// `ValueError` naming its row; the mixed rows are not modified.
#[pyfunction]
pub fn mixup_to_one_hot(
    py: Python<'_>,
    mixed_ptr: usize,
    mixed_len: usize,
    num_classes: usize,
    output_ptr: usize,
    output_len: usize,
) -> PyResult<()> {
    const NAME: &str = "mixup_to_one_hot";
    check_ptr(NAME, "mixed", mixed_ptr, mixed_len)?;
    check_ptr(NAME, "output", output_ptr, output_len)?;
    check_f32(NAME, "mixed array", mixed_ptr, mixed_len)?;
    check_f32(NAME, "output", output_ptr, output_len)?;
    check_apart(NAME, (mixed_ptr, mixed_len), (output_ptr, output_len))?;
    // SAFETY: an aligned float32 array (checked above) the caller holds; only read.
    let mixed = unsafe { floats(mixed_ptr, mixed_len) };
    // SAFETY: another aligned float32 array (disjoint, checked above) that only this call
    // writes.
    let output = unsafe { floats_mut(output_ptr, output_len) };
    py.detach(|| mixup::mixup_to_one_hot(mixed, num_classes, output))
        .map_err(value_error)
}
