//! `_native.check_file`: beton-io's validation of a whole `.beton` file, for
//! `ffcv_rs.reader.Reader`, which then reads the tables with NumPy as FFCV's does.

use std::collections::HashMap;

use pyo3::prelude::*;

use crate::errors;
use crate::loader::reader_options;

/// Opens `path` with beton-io, which checks the header, field descriptors, metadata and
/// allocation table against each other and the file size, and returns `(num_samples,
/// page_size)`. `custom_fields` gives the metadata layout `{name: (itemsize, alignment)}`
/// of fields a Python `Field` class reads (FFCV's `custom_handlers`). A missing, truncated
/// or corrupt file raises `BadFileError` naming what is wrong.
#[pyfunction]
#[pyo3(signature = (path, custom_fields=None))]
pub fn check_file(
    py: Python<'_>,
    path: String,
    custom_fields: Option<HashMap<String, (u64, u64)>>,
) -> PyResult<(u64, u64)> {
    let options = reader_options(custom_fields);
    let reader = py
        .detach(|| ffcv::format::Reader::open_with(&path, &options))
        .map_err(|e| errors::from_format(py, e))?;
    Ok((reader.num_samples(), reader.page_size()))
}
