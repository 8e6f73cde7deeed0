"""FFCV's ``ffcv.libffcv``: ``memcpy``, ``imdecode``, ``resize_crop`` and ``read`` with
FFCV's signatures, over native code in the extension module.

The functions are ``ctypes`` calls, as FFCV's are, for the same reason: code compiled by
numba can call them (FFCV's decoders do, and so may users' operations), and a ``ctypes``
call releases the GIL. The JPEG decode is the loader's own (bit-identical to
libjpeg-turbo's fast IDCT, FFCV's decode) and the resize OpenCV's ``INTER_AREA``, bit for
bit. A negative return code means failure: ``-1`` a bad argument, ``-2`` an undecodable
JPEG, ``-3`` an option this build does not implement (a DCT scale factor other than 1).
"""

import ctypes
from ctypes import c_bool, c_int32, c_int64, c_uint32, c_uint64, c_void_p

import numpy as np

from . import _native

__all__ = ["memcpy", "imdecode", "resize_crop", "read"]

lib = ctypes.CDLL(_native.__file__)

ctypes_memcopy = lib.ffcv_rs_memcpy
ctypes_memcopy.argtypes = [c_void_p, c_void_p, c_uint64]
ctypes_memcopy.restype = c_int32

ctypes_imdecode = lib.ffcv_rs_imdecode
ctypes_imdecode.argtypes = [
    c_void_p, c_uint64, c_uint32, c_uint32, c_void_p, c_uint32, c_uint32,
    c_uint32, c_uint32, c_uint32, c_uint32, c_bool, c_bool,
]
ctypes_imdecode.restype = c_int32

ctypes_resize = lib.ffcv_rs_resize
ctypes_resize.argtypes = 11 * [c_int64]
ctypes_resize.restype = c_int32


def memcpy(source: np.ndarray, dest: np.ndarray):
    """Copies ``source``'s bytes into ``dest`` (which must hold at least as many)."""
    return ctypes_memcopy(source.ctypes.data, dest.ctypes.data, source.size * source.itemsize)


def imdecode(source: np.ndarray, dst: np.ndarray, source_height: int, source_width: int,
             crop_height=None, crop_width=None, offset_x=0, offset_y=0,
             scale_factor_num=1, scale_factor_denom=1, enable_crop=False, do_flip=False):
    """Decodes the JPEG bytes ``source`` (an image of ``source_height x source_width``)
    into ``dst`` as packed RGB: the whole image, or with ``enable_crop`` the ``crop_height
    x crop_width`` region at (``offset_y``, ``offset_x``); ``do_flip`` mirrors it. Returns
    0, or a negative code (see the module docs)."""
    return ctypes_imdecode(source.ctypes.data, source.size, source_height, source_width,
                           dst.ctypes.data, crop_height, crop_width, offset_x, offset_y,
                           scale_factor_num, scale_factor_denom, enable_crop, do_flip)


def resize_crop(source, start_row, end_row, start_col, end_col, destination):
    """Resizes ``source[start_row:end_row, start_col:end_col]`` (packed RGB ``uint8``)
    into ``destination`` with ``INTER_AREA``. Returns 0, or a negative code."""
    return ctypes_resize(0, source.ctypes.data, source.shape[0], source.shape[1],
                         start_row, end_row, start_col, end_col,
                         destination.ctypes.data, destination.shape[0], destination.shape[1])


# pread from the C library, as a ctypes function (callable from numba-compiled code).
_libc = ctypes.CDLL(None, use_errno=True)
read_c = _libc.pread
read_c.argtypes = [c_int32, c_void_p, c_uint64, c_int64]
read_c.restype = c_int64


def read(fileno: int, destination: np.ndarray, offset: int):
    """Reads up to ``destination.size`` bytes of file descriptor ``fileno`` at ``offset``
    into ``destination`` (``pread``); returns the count read, or -1."""
    return read_c(fileno, destination.ctypes.data, destination.size, offset)
