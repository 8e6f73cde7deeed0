"""The batch function a built-in transform's ``generate_code()`` returns: its native
kernel (pipeline-jit's, through ``_native.BatchTransforms``) over the batch, the GIL
released, for code that drives the operation through FFCV's protocol itself.

FFCV's transforms draw from NumPy's generator; these draw from (seed, epoch, sample)
with the seed taken from NumPy's generator at each call, so ``np.random.seed`` makes a
run repeat as it does with FFCV. A batch the native kernel does not take (a torch
tensor, an element type or a shape it refuses) runs the operation's NumPy code instead
(numba-compiled when numba is installed), which gives FFCV's results.
"""

from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..pipeline.compiler import Compiler
from ..pipeline.generate_code import wrap_generate_code

#: Element types pipeline-jit has, by NumPy name.
_NATIVE = ("uint8", "uint16", "int32", "int64", "float16", "float32", "float64")


def native_protocol(cls: type) -> type:
    """Class decorator: ``cls.generate_code`` returns :func:`native_batch_code` over the
    NumPy code the class defines."""
    return wrap_generate_code(
        cls, lambda self, python_code: native_batch_code(self, python_code(self)),
        f"{cls.__name__}'s batch function: the native kernel, or FFCV's NumPy code for "
        "batches it does not take.")


def native_batch_code(op: Any, python_code: Callable) -> Callable:
    """``op``'s native kernel as ``code(images, dst, indices=None)`` (see the module
    docs); ``python_code`` runs the batches it does not take."""
    from .. import _native

    spec = [(op._native_name, op._native_params())]
    runs: Dict[Tuple[Any, ...], Optional[Any]] = {}
    fallback: Dict[str, Callable] = {}

    def run_python(images: Any, dst: Any, indices: Any) -> Any:
        if "code" not in fallback:
            fallback["code"] = Compiler.compile(python_code)
        if getattr(python_code, "with_indices", False):
            return fallback["code"](images, dst, indices)
        return fallback["code"](images, dst)

    def builtin(images: Any, dst: Any, indices: Any = None) -> Any:
        native = None
        if isinstance(images, np.ndarray) and images.ndim >= 2 and images.dtype.name in _NATIVE:
            key = (images.shape[1:], images.dtype.str, Compiler.is_enabled)
            if key not in runs:
                try:
                    runs[key] = _native.BatchTransforms(
                        list(images.shape[1:]), images.dtype.name, spec,
                        max(1, Compiler.num_threads), Compiler.is_enabled)
                except Exception:  # a state the kernel refuses: FFCV's code decides
                    runs[key] = None
            native = runs[key]
        if native is None:
            return run_python(images, dst, indices)
        n = len(images)
        ids = list(range(n)) if indices is None else [int(i) for i in indices]
        shape, dtype = (n, *native.output_shape), np.dtype(native.output_dtype)
        src = np.ascontiguousarray(images)
        out = dst[:n] if isinstance(dst, np.ndarray) else None
        into_dst = out is not None and out.shape == shape and out.dtype == dtype \
            and out.flags.c_contiguous and not np.shares_memory(out, src)
        if not into_dst:
            out = np.empty(shape, dtype)
        native.run(src.ctypes.data, src.nbytes, out.ctypes.data, out.nbytes, ids,
                   int(np.random.randint(0, 2**62)), 0)
        if not into_dst and out.shape == images.shape and out.dtype == images.dtype \
                and images.flags.writeable:
            # FFCV's in-place operations (no buffer, or a scratch one) return their input.
            images[...] = out
            return images
        return out

    builtin.with_indices = True  # the draws follow the samples' ids
    builtin._ffcv_rs_python = True  # native already: not compiled again
    return builtin
