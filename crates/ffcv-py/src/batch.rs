//! One output of a batch as a Python object that exports the slot's memory without a copy
//! (`__array_interface__` for NumPy, `__dlpack__` for PyTorch and NumPy) and keeps the
//! batch, hence its slot, alive for as long as any view of it lives.

use std::sync::Arc;

use ffcv::format::{ByteOrder, NumpyDtype, NumpyKind};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::dlpack;

/// Which memory of the batch a view shows.
#[derive(Debug, Clone, Copy)]
enum Part {
    /// Output `i`'s rows.
    Rows(usize),
    /// Output `i`'s per-sample lengths (`u64`).
    Lengths(usize),
    /// The sample id of each row (`u64`).
    SampleIds,
}

/// A read-only view of one output of a batch (or of its lengths or sample ids).
///
/// NumPy sees it through `__array_interface__` (`numpy.asarray(view)` shares the memory
/// and keeps the view as its base); PyTorch and `numpy.from_dlpack` through `__dlpack__`.
/// The batch's slot goes back to the loader only when the last view, array or tensor
/// made from it is garbage-collected.
#[pyclass(frozen, module = "ffcv_rs._native", name = "BatchOutput")]
pub struct OutputView {
    batch: Arc<ffcv::Batch>,
    /// Address of the first element (kept as a number: the memory is the batch's).
    ptr: usize,
    shape: Vec<usize>,
    dtype: NumpyDtype,
    name: String,
}

/// The views of one batch: one per output, in the loader's output order.
pub fn views(batch: ffcv::Batch) -> Vec<OutputView> {
    let batch = Arc::new(batch);
    (0..batch.outputs().len())
        .filter_map(|i| OutputView::new(&batch, Part::Rows(i)))
        .collect()
}

impl OutputView {
    fn new(batch: &Arc<ffcv::Batch>, part: Part) -> Option<OutputView> {
        let n = batch.len();
        let (ptr, shape, dtype, name) = match part {
            Part::Rows(i) => {
                let info = batch.outputs().get(i)?;
                let out = batch.output(&info.name).ok()?;
                (
                    out.bytes().as_ptr() as usize,
                    out.shape(),
                    info.dtype.clone(),
                    info.name.clone(),
                )
            }
            Part::Lengths(i) => {
                let info = batch.outputs().get(i)?;
                let lengths = batch.output(&info.name).ok()?.lengths()?;
                (
                    lengths.as_ptr() as usize,
                    vec![n],
                    u64_dtype(),
                    format!("{}.lengths", info.name),
                )
            }
            Part::SampleIds => (
                batch.sample_ids().as_ptr() as usize,
                vec![n],
                u64_dtype(),
                "sample_ids".to_owned(),
            ),
        };
        Some(OutputView {
            batch: Arc::clone(batch),
            ptr,
            shape,
            dtype,
            name,
        })
    }

    fn dlpack_type(&self) -> PyResult<(u8, u8)> {
        let code = match self.dtype.kind() {
            NumpyKind::Int => dlpack::CODE_INT,
            NumpyKind::UInt => dlpack::CODE_UINT,
            NumpyKind::Float => dlpack::CODE_FLOAT,
            NumpyKind::Bool => dlpack::CODE_BOOL,
            _ => {
                return Err(PyBufferError::new_err(format!(
                    "output {:?}: dtype {} has no DLPack type",
                    self.name,
                    self.dtype.descr()
                )));
            }
        };
        let native = match self.dtype.byte_order() {
            ByteOrder::Big => cfg!(target_endian = "big"),
            ByteOrder::Little => cfg!(target_endian = "little"),
            ByteOrder::NotApplicable => true,
        };
        if !native {
            return Err(PyBufferError::new_err(format!(
                "output {:?}: dtype {} is not in this machine's byte order (DLPack has no \
                 byte order); use numpy.asarray",
                self.name,
                self.dtype.descr()
            )));
        }
        Ok((code, (self.dtype.item_size() * 8) as u8))
    }
}

fn u64_dtype() -> NumpyDtype {
    NumpyDtype::numeric(NumpyKind::UInt, 8, ByteOrder::Little).expect("u64 is a numeric dtype")
}

#[pymethods]
impl OutputView {
    /// The output's name (the field's name).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// `[batch, ...row shape]`.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// NumPy's type string (`"<i8"`, `"|u1"`, ...).
    #[getter]
    fn typestr(&self) -> String {
        self.dtype.descr()
    }

    /// Address of the first element: the slot's memory, which every export shares.
    #[getter]
    fn data_ptr(&self) -> usize {
        self.ptr
    }

    /// Which of the loader's slots holds the batch.
    #[getter]
    fn slot(&self) -> usize {
        self.batch.slot_index()
    }

    /// The epoch the batch belongs to.
    #[getter]
    fn epoch(&self) -> u64 {
        self.batch.epoch()
    }

    /// Per-sample lengths of a bytes or JSON output (a `u64` view), else `None`.
    fn lengths(&self) -> Option<OutputView> {
        let i = self
            .batch
            .outputs()
            .iter()
            .position(|o| o.name == self.name)?;
        OutputView::new(&self.batch, Part::Lengths(i))
    }

    /// The sample id of each row of the batch (a `u64` view).
    fn sample_ids(&self) -> Option<OutputView> {
        OutputView::new(&self.batch, Part::SampleIds)
    }

    /// NumPy's array interface (version 3), read-only: the data is the slot's.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", self.dtype.descr())?;
        d.set_item("data", (self.ptr, true))?;
        d.set_item("strides", py.None())?;
        Ok(d)
    }

    /// A DLPack capsule of this output (CPU memory, row-major). `stream` must be `None` or
    /// -1 for CPU data; `max_version`, `dl_device` and `copy` follow the array API
    /// standard (a copy is never made, so `copy=True` is refused).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<Bound<'py, PyAny>>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = max_version; // The legacy capsule is what every version accepts.
        if let Some(s) = stream
            && !s.is_none()
            && s.extract::<i64>().ok() != Some(-1)
        {
            return Err(PyValueError::new_err(
                "a CPU batch output takes no stream (None or -1)",
            ));
        }
        if let Some((t, _)) = dl_device
            && t != dlpack::DEVICE_CPU
        {
            return Err(PyBufferError::new_err(
                "batch outputs live in CPU memory; use ToDevice or .to(device)",
            ));
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "batch outputs are exported without a copy; copy the result instead",
            ));
        }
        let (code, bits) = self.dlpack_type()?;
        dlpack::capsule(
            py,
            dlpack::Tensor {
                data: self.ptr as *const u8,
                shape: self.shape.clone(),
                code,
                bits,
                owner: Box::new(Arc::clone(&self.batch)),
            },
        )
    }

    /// `(kDLCPU, 0)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (dlpack::DEVICE_CPU, 0)
    }

    fn __repr__(&self) -> String {
        format!(
            "BatchOutput(name={:?}, shape={:?}, typestr={:?}, slot={})",
            self.name,
            self.shape,
            self.dtype.descr(),
            self.batch.slot_index()
        )
    }
}
