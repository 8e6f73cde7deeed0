//! `_native.BatchTransforms`: the built-in transforms run natively on a batch the Python
//! part of a pipeline holds.
//!
//! A pipeline's built-in transforms normally run inside the loader. After an operation of
//! the user's they stand in the Python part (`ffcv_rs/loader/plan.py`); a run of them is
//! then a pipeline-jit [`Executor`] over the state they start from: the same operations,
//! the same JIT (or interpreter), draws from (seed, epoch, sample, position) as in the
//! loader, on a pool of its own threads, without the GIL. The batch comes as raw
//! pointers from NumPy arrays (`Py_buffer` is outside the 3.9 stable ABI this wheel
//! targets), which is why this is one of the crate's `unsafe` modules: `run` checks the
//! lengths against the plan, and the Python caller keeps both arrays alive and
//! C-contiguous for the call.

use ffcv::jit::{BatchBuffers, Executor, Options, Pipeline, State};
use pyo3::prelude::*;

use crate::errors;
use crate::fork::{ForkSafe, Origin};
use crate::spec::{self, Op};

/// Built-in transforms over batches of one state (see the module documentation).
#[pyclass(frozen, module = "ffcv_rs._native", name = "BatchTransforms")]
pub struct BatchTransforms {
    /// Its rayon pool's threads are this process's: a forked child neither runs nor
    /// drops it ([`crate::fork`]).
    executor: ForkSafe<Executor>,
    origin: Origin,
    names: Vec<String>,
}

#[pymethods]
impl BatchTransforms {
    /// `ops` (`[(name, params)]`, as the loader's pipelines name them) over samples of
    /// `shape` and `dtype` (a NumPy name), on `num_workers` threads, compiled or
    /// interpreted. A transform that does not fit the state raises `ConfigError`.
    #[new]
    fn new(
        py: Python<'_>,
        shape: Vec<usize>,
        dtype: &str,
        ops: Vec<Op<'_>>,
        num_workers: usize,
        compile: bool,
    ) -> PyResult<BatchTransforms> {
        let elem = spec::dtype("BatchTransforms", dtype)?;
        let mut pipeline = Pipeline::new(State::cpu(shape, elem));
        let mut names = Vec::with_capacity(ops.len());
        for (name, params) in &ops {
            pipeline.push(spec::operation(name, params)?);
            names.push(name.clone());
        }
        let options = Options {
            num_workers: num_workers.max(1),
            compile,
        };
        let executor = py
            .detach(|| Executor::new(&pipeline, &options))
            .map_err(|e| errors::config(py, format!("{}: {e}", names.join(", "))))?;
        Ok(BatchTransforms {
            executor: ForkSafe::new(executor),
            origin: Origin::here(),
            names,
        })
    }

    /// One sample's output shape.
    #[getter]
    fn output_shape(&self) -> Vec<usize> {
        self.executor.plan().output().shape.clone()
    }

    /// The output's NumPy type string (`<f4`, `|u1`, ...).
    #[getter]
    fn output_dtype(&self) -> String {
        ffcv::decode::numpy_dtype(self.executor.plan().output().dtype).descr()
    }

    /// Runs the transforms on `sample_ids.len()` samples: `input_len` bytes at
    /// `input_ptr` into `output_len` bytes at `output_ptr` (C-contiguous NumPy arrays the
    /// caller holds), with the loader's `seed` and the `epoch`. The GIL is released.
    #[allow(clippy::too_many_arguments)] // two raw buffers, their lengths, ids, seed, epoch
    fn run(
        &self,
        py: Python<'_>,
        input_ptr: usize,
        input_len: usize,
        output_ptr: usize,
        output_len: usize,
        sample_ids: Vec<u64>,
        seed: u64,
        epoch: u64,
    ) -> PyResult<()> {
        self.origin.check(py, "loader's BatchTransforms")?;
        let plan = self.executor.plan();
        let n = sample_ids.len();
        if input_len != n * plan.input_bytes() || output_len != n * plan.output_bytes() {
            return Err(errors::config(
                py,
                format!(
                    "{}: {n} samples need {} input and {} output bytes, got {input_len} and \
                     {output_len}",
                    self.names.join(", "),
                    n * plan.input_bytes(),
                    n * plan.output_bytes()
                ),
            ));
        }
        if n == 0 {
            return Ok(());
        }
        if input_ptr == 0 || output_ptr == 0 || input_ptr == output_ptr {
            return Err(errors::config(py, "BatchTransforms.run: bad buffers"));
        }
        // SAFETY: the caller (`ffcv_rs/loader/plan.py`) passes the address and byte length
        // of a C-contiguous NumPy array it holds for the whole call, checked above against
        // the plan; it is only read.
        let input = unsafe { std::slice::from_raw_parts(input_ptr as *const u8, input_len) };
        // SAFETY: as above, for another array (distinct addresses, checked above) that only
        // this call writes while it runs.
        let output = unsafe { std::slice::from_raw_parts_mut(output_ptr as *mut u8, output_len) };
        py.detach(|| {
            self.executor.run(BatchBuffers {
                sample_ids: &sample_ids,
                input,
                output,
                seed,
                epoch,
            })
        })
        .map_err(|e| errors::config(py, format!("{}: {e}", self.names.join(", "))))
    }

    fn __repr__(&self) -> String {
        format!("BatchTransforms([{}])", self.names.join(", "))
    }
}
