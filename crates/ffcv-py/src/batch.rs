//! One output of a batch as a Python object that exports the slot's memory without a copy
//! (`__array_interface__` for NumPy, `__dlpack__` for PyTorch and NumPy) and keeps the
//! batch, hence its slot, alive for as long as any view of it lives.
//!
//! A batch staged on a CUDA device by the loader's `ToDevice` (gpu-stage, attached to the
//! batch as an [`ffcv::gpu::GpuBatch`]) gives views of the device tensors instead: they
//! export through `__dlpack__` only (`kDLCUDA`), with DLPack's stream handshake
//! ([`crate::cuda`]).

use std::sync::Arc;

use ffcv::format::{ByteOrder, NumpyDtype, NumpyKind};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::{cuda, dlpack};

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
    /// For a view of a device tensor: its CUDA ordinal and DLPack type.
    cuda: Option<CudaView>,
}

/// Where a device view's elements live and what they are.
#[derive(Debug, Clone, Copy)]
struct CudaView {
    ordinal: i32,
    code: u8,
    bits: u8,
}

/// DLPack's type of a gpu-stage element type.
fn gpu_dlpack_type(dtype: ffcv::gpu::DeviceDtype) -> (u8, u8) {
    use ffcv::gpu::DeviceDtype as G;
    match dtype {
        G::U8 => (dlpack::CODE_UINT, 8),
        G::I32 => (dlpack::CODE_INT, 32),
        G::I64 => (dlpack::CODE_INT, 64),
        G::F16 => (dlpack::CODE_FLOAT, 16),
        G::Bf16 => (dlpack::CODE_BFLOAT, 16),
        G::F32 => (dlpack::CODE_FLOAT, 32),
        G::F64 => (dlpack::CODE_FLOAT, 64),
    }
}

/// The views of one batch: one per output, in the loader's output order.
pub fn views(batch: ffcv::Batch) -> Vec<OutputView> {
    let batch = Arc::new(batch);
    (0..batch.outputs().len())
        .filter_map(|i| OutputView::new(&batch, Part::Rows(i)))
        .collect()
}

/// [`hand_over`]: pass output `index` to its converter as a DLPack capsule.
pub const HAND_CAPSULE: u8 = 0;
/// [`hand_over`]: pass output `index` to its converter as a `BatchOutput` view.
pub const HAND_VIEW: u8 = 1;

/// One batch as the tuple the consumer gets, built in one call: for each `(index, how,
/// convert)` of `plan`, `convert(x)` where `x` is a DLPack capsule of output `index`
/// ([`HAND_CAPSULE`]; `torch._C._from_dlpack` takes it as it is) or its view
/// ([`HAND_VIEW`]; for `numpy.asarray`). Every capsule and view owns the batch, so its slot
/// is reused only once nothing the consumer holds refers to it.
///
/// This replaces, per batch, a list of views and, per output, a `__dlpack__` call from
/// Python with its keyword parsing and device tuple. Host batches only: a batch staged on
/// a device needs the stream handshake of [`OutputView::__dlpack__`].
pub fn hand_over<'py>(
    py: Python<'py>,
    batch: ffcv::Batch,
    plan: &Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyTuple>> {
    if batch.attachment::<ffcv::gpu::GpuBatch>().is_some() {
        return Err(PyValueError::new_err(
            "this batch is staged on a device; its outputs are handed over through \
             BatchOutput.__dlpack__ (next_batch), not next_outputs",
        ));
    }
    let batch = Arc::new(batch);
    let mut items = Vec::with_capacity(plan.len());
    for entry in plan.iter() {
        let (index, how, convert): (usize, u8, Bound<'py, PyAny>) = entry.extract()?;
        let arg = match how {
            HAND_CAPSULE => host_capsule(py, &batch, index)?,
            HAND_VIEW => OutputView::new(&batch, Part::Rows(index))
                .ok_or_else(|| no_output(&batch, index))?
                .into_pyobject(py)?
                .into_any(),
            other => {
                return Err(PyValueError::new_err(format!(
                    "next_outputs: hand-over kind {other} is not {HAND_CAPSULE} (capsule) or \
                     {HAND_VIEW} (view)"
                )));
            }
        };
        items.push(convert.call1((arg,))?);
    }
    PyTuple::new(py, items)
}

fn no_output(batch: &ffcv::Batch, index: usize) -> PyErr {
    pyo3::exceptions::PyIndexError::new_err(format!(
        "next_outputs: output {index} does not exist (the batch has {})",
        batch.outputs().len()
    ))
}

/// A DLPack capsule of host output `index`, made without a view in between.
fn host_capsule<'py>(
    py: Python<'py>,
    batch: &Arc<ffcv::Batch>,
    index: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let info = batch
        .outputs()
        .get(index)
        .ok_or_else(|| no_output(batch, index))?;
    let (code, bits) = dlpack_type(&info.dtype, &info.name)?;
    let out = batch
        .output(&info.name)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    dlpack::capsule(
        py,
        dlpack::Tensor {
            data: out.bytes().as_ptr(),
            device: (dlpack::DEVICE_CPU, 0),
            shape: out.shape(),
            code,
            bits,
            owner: Box::new(Arc::clone(batch)),
        },
    )
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
        let mut view = OutputView {
            batch: Arc::clone(batch),
            ptr,
            shape,
            dtype,
            name,
            cuda: None,
        };
        if let (Part::Rows(_), Some(gpu)) = (part, batch.attachment::<ffcv::gpu::GpuBatch>()) {
            view.on_device(gpu);
        }
        Some(view)
    }

    /// Points the view at the device copy of its output.
    fn on_device(&mut self, gpu: &ffcv::gpu::GpuBatch) {
        let Some(t) = gpu.tensor(&self.name) else {
            return;
        };
        let ordinal = gpu.stage().spec().cuda_ordinal().unwrap_or(0) as i32;
        let item = self.dtype.item_size() as usize;
        let host_bytes = self.shape.iter().product::<usize>() * item;
        let (code, bits) = gpu_dlpack_type(t.dtype);
        // gpu-stage names outputs it has no type for `U8` (the bytes copied as they are);
        // the host's type and shape then still describe them.
        let host_typed =
            t.dtype == ffcv::gpu::DeviceDtype::U8 && item != 1 && t.bytes == host_bytes;
        let (code, bits) = match (host_typed, self.dlpack_type()) {
            (true, Ok(host)) => host,
            _ => {
                self.shape = t.shape.clone();
                (code, bits)
            }
        };
        self.ptr = t.ptr as usize;
        self.cuda = Some(CudaView {
            ordinal,
            code,
            bits,
        });
    }

    fn dlpack_type(&self) -> PyResult<(u8, u8)> {
        dlpack_type(&self.dtype, &self.name)
    }
}

/// DLPack's `(type code, bits)` of a host output's element type; output `name` is named in
/// the error for a type DLPack has no code or byte order for.
fn dlpack_type(dtype: &NumpyDtype, name: &str) -> PyResult<(u8, u8)> {
    let code = match dtype.kind() {
        NumpyKind::Int => dlpack::CODE_INT,
        NumpyKind::UInt => dlpack::CODE_UINT,
        NumpyKind::Float => dlpack::CODE_FLOAT,
        NumpyKind::Bool => dlpack::CODE_BOOL,
        _ => {
            return Err(PyBufferError::new_err(format!(
                "output {name:?}: dtype {} has no DLPack type",
                dtype.descr()
            )));
        }
    };
    let native = match dtype.byte_order() {
        ByteOrder::Big => cfg!(target_endian = "big"),
        ByteOrder::Little => cfg!(target_endian = "little"),
        ByteOrder::NotApplicable => true,
    };
    if !native {
        return Err(PyBufferError::new_err(format!(
            "output {name:?}: dtype {} is not in this machine's byte order (DLPack has \
             no byte order); use numpy.asarray",
            dtype.descr()
        )));
    }
    Ok((code, (dtype.item_size() * 8) as u8))
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

    /// Address of the first element: the slot's memory, which every export shares (the
    /// device address for an output staged on a GPU).
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

    /// Whether the output holds variable-length arrays padded to `K_max` rows (a
    /// `VarArrayDecoder`'s), whose `lengths` are each sample's rows.
    #[getter]
    fn padded_rows(&self) -> bool {
        self.batch
            .outputs()
            .iter()
            .any(|o| o.name == self.name && o.kind == ffcv::OutputKind::Rows)
    }

    /// Per-sample lengths of a bytes or JSON output, or the rows of a padded-rows output
    /// (a `u64` view), else `None`.
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
        if let Some(c) = self.cuda {
            // A TypeError, which NumPy passes on (an AttributeError would make
            // `numpy.asarray` quietly build a 0-d object array instead).
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "output {:?} is on cuda:{}; read it with torch.from_dlpack",
                self.name, c.ordinal
            )));
        }
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", self.dtype.descr())?;
        d.set_item("data", (self.ptr, true))?;
        d.set_item("strides", py.None())?;
        Ok(d)
    }

    /// A DLPack capsule of this output (row-major). `max_version`, `dl_device` and `copy`
    /// follow the array API standard (a copy is never made, so `copy=True` is refused).
    ///
    /// `stream`: for CPU data `None` or -1. For a CUDA output it is the consumer's stream,
    /// as DLPack defines it (`None` or 1: the legacy default stream, 2: the per-thread
    /// default stream, another integer: a `cudaStream_t`, -1: no synchronisation, 0:
    /// refused): that stream is made to wait for the loader's copy before this returns, and
    /// the slot is reused only after the work enqueued on it by the time the consumer's
    /// tensor dies.
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
        let stream = match stream {
            Some(s) if !s.is_none() => Some(s.extract::<i64>().map_err(|_| {
                PyValueError::new_err("stream must be None or an integer (DLPack)")
            })?),
            _ => None,
        };
        let here = self.__dlpack_device__();
        if let Some(asked) = dl_device
            && asked != here
        {
            return Err(PyBufferError::new_err(format!(
                "output {:?} lives on device {here:?} (DLPack type, id), not {asked:?}; \
                 copy it with .to(device)",
                self.name
            )));
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "batch outputs are exported without a copy; copy the result instead",
            ));
        }
        let Some(c) = self.cuda else {
            if stream.is_some_and(|s| s != -1) {
                return Err(PyValueError::new_err(
                    "a CPU batch output takes no stream (None or -1)",
                ));
            }
            let (code, bits) = self.dlpack_type()?;
            return dlpack::capsule(
                py,
                dlpack::Tensor {
                    data: self.ptr as *const u8,
                    device: here,
                    shape: self.shape.clone(),
                    code,
                    bits,
                    owner: Box::new(Arc::clone(&self.batch)),
                },
            );
        };
        let consumer = cuda::consumer_stream(stream)?;
        if let (Some(s), Some(gpu)) = (consumer, self.batch.attachment::<ffcv::gpu::GpuBatch>()) {
            cuda::consumer_waits(gpu, s)?;
        }
        dlpack::capsule(
            py,
            dlpack::Tensor {
                data: self.ptr as *const u8,
                device: here,
                shape: self.shape.clone(),
                code: c.code,
                bits: c.bits,
                owner: Box::new(cuda::CudaOwner {
                    batch: Some(Arc::clone(&self.batch)),
                    consumer,
                }),
            },
        )
    }

    /// `(kDLCPU, 0)`, or `(kDLCUDA, ordinal)` for an output the loader staged on a GPU.
    fn __dlpack_device__(&self) -> (i32, i32) {
        match self.cuda {
            Some(c) => (dlpack::DEVICE_CUDA, c.ordinal),
            None => (dlpack::DEVICE_CPU, 0),
        }
    }

    /// `"cpu"` or `"cuda:N"`: where the exported memory is.
    #[getter]
    fn device(&self) -> String {
        match self.cuda {
            Some(c) => format!("cuda:{}", c.ordinal),
            None => "cpu".to_owned(),
        }
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
