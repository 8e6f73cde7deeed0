//! DLPack export (the legacy `"dltensor"` capsule every consumer accepts): the C structs of
//! `dlpack.h` and the capsule's life cycle. With [`crate::cuda`], the crate's only `unsafe`
//! modules.
//!
//! A capsule owns one boxed `Export`: the tensor description plus an owner value (an
//! `Arc` of the batch) that keeps the slot alive. The consumer (`torch.from_dlpack`,
//! `numpy.from_dlpack`) renames the capsule to `"used_dltensor"` and calls the deleter when
//! its tensor dies; a capsule never consumed is freed by its own destructor instead.

use std::any::Any;
use std::ffi::{CStr, c_void};

use pyo3::ffi;
use pyo3::prelude::*;

/// The capsule name DLPack consumers look for.
const NAME: &CStr = c"dltensor";

/// `DLDevice`.
#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

/// `DLDataType`.
#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `DLTensor`.
#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// `DLManagedTensor`.
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// What one capsule owns. `repr(C)` with the managed tensor first, so a pointer to the
/// `Export` is a pointer to its `DlManagedTensor`.
#[repr(C)]
struct Export {
    managed: DlManagedTensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
    _owner: Box<dyn Any + Send>,
}

/// DLPack's type codes.
pub const CODE_INT: u8 = 0;
/// Unsigned integers.
pub const CODE_UINT: u8 = 1;
/// IEEE floats.
pub const CODE_FLOAT: u8 = 2;
/// bfloat16.
pub const CODE_BFLOAT: u8 = 4;
/// Booleans.
pub const CODE_BOOL: u8 = 6;
/// `kDLCPU`.
pub const DEVICE_CPU: i32 = 1;
/// `kDLCUDA`.
pub const DEVICE_CUDA: i32 = 2;

/// A tensor to export: `data` stays valid and unchanged while `owner` lives.
pub struct Tensor {
    /// First element (a host address, or a device address for a CUDA tensor).
    pub data: *const u8,
    /// `(device type, device id)`: `(DEVICE_CPU, 0)` or `(DEVICE_CUDA, ordinal)`.
    pub device: (i32, i32),
    /// Elements per axis.
    pub shape: Vec<usize>,
    /// DLPack type code ([`CODE_INT`], ...).
    pub code: u8,
    /// Bits per element.
    pub bits: u8,
    /// Keeps the memory alive until the consumer is done.
    pub owner: Box<dyn Any + Send>,
}

/// Frees an `Export`: the consumer's call when its tensor dies.
unsafe extern "C" fn delete_export(managed: *mut DlManagedTensor) {
    if managed.is_null() {
        return;
    }
    // SAFETY: every `DlManagedTensor` handed out is the first field of an `Export` boxed by
    // `capsule`, and `manager_ctx` is that box's pointer; DLPack calls the deleter once.
    unsafe {
        let ctx = (*managed).manager_ctx.cast::<Export>();
        drop(Box::from_raw(ctx));
    }
}

/// The capsule's destructor: frees the export only if no consumer took it (a consumer
/// renames the capsule and becomes responsible for calling the deleter).
unsafe extern "C" fn destroy_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: CPython calls this with the capsule being destroyed; `PyCapsule_IsValid` sets
    // no exception, and a valid `"dltensor"` capsule holds the pointer `capsule` stored.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let managed =
                ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()).cast::<DlManagedTensor>();
            delete_export(managed);
        }
    }
}

/// A `"dltensor"` capsule for `tensor` (row-major, on its device).
pub fn capsule(py: Python<'_>, tensor: Tensor) -> PyResult<Bound<'_, PyAny>> {
    let shape: Vec<i64> = tensor.shape.iter().map(|&d| d as i64).collect();
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(1);
    }
    let mut export = Box::new(Export {
        managed: DlManagedTensor {
            dl_tensor: DlTensor {
                data: tensor.data.cast_mut().cast::<c_void>(),
                device: DlDevice {
                    device_type: tensor.device.0,
                    device_id: tensor.device.1,
                },
                ndim: shape.len() as i32,
                dtype: DlDataType {
                    code: tensor.code,
                    bits: tensor.bits,
                    lanes: 1,
                },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_export),
        },
        shape,
        strides,
        _owner: tensor.owner,
    });
    // The vectors' heap buffers do not move when the box is built or moved.
    export.managed.dl_tensor.shape = export.shape.as_mut_ptr();
    export.managed.dl_tensor.strides = export.strides.as_mut_ptr();
    let raw = Box::into_raw(export);
    // SAFETY: `raw` is a live box; its address is the managed tensor's (`repr(C)`, first
    // field), stored as the context the deleter frees.
    unsafe {
        (*raw).managed.manager_ctx = raw.cast::<c_void>();
    }
    // SAFETY: `raw` stays valid until the deleter runs; the destructor only frees it if no
    // consumer took ownership. On failure nothing else holds `raw`, so it is freed here.
    unsafe {
        let cap = ffi::PyCapsule_New(raw.cast::<c_void>(), NAME.as_ptr(), Some(destroy_capsule));
        if cap.is_null() {
            drop(Box::from_raw(raw));
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, cap))
    }
}
