"""``VarArrayField`` (an ffcv-rs extension): per sample, an array of one dtype and one
inner shape with a leading dimension of its own (boxes ``(K, 4)`` float32, tokens ``(L,)``
int32), and ``VarArrayDecoder``, which decodes it to ``[B, K_max, *inner_shape]`` rows
padded with zeros.

The field is stored as FFCV's ``BytesField`` (type id 3, metadata ``{ptr, size}``, the
array's bytes in C order), with the dtype and inner shape in the argument block behind the
tag ``b"FFRSVARR"``, which FFCV ignores: FFCV 1.0.2 opens the file and reads the field as
bytes (docs/format.md, "VarArrayField")."""

import json
from dataclasses import replace
from typing import Any, Callable, Optional, Sequence, Tuple, Type

import numpy as np

from ..libffcv import memcpy
from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_decode import native_decoder
from .base import ARG_TYPE, Field

__all__ = ["VarArrayField", "VarArrayDecoder", "TAG", "pack"]

#: The first 8 bytes of a VarArrayField's argument block.
TAG = b"FFRSVARR"
_LAYOUT = 1
_MAX_INNER_DIMS = 31
_DIMS_AT = 24
_DESCR_AT = _DIMS_AT + 8 * _MAX_INNER_DIMS


def is_tagged(binary: Any) -> bool:
    """Whether a type id 3 argument block opens with :data:`TAG`."""
    return np.asarray(binary).view(np.uint8).reshape(-1)[:8].tobytes() == TAG


@native_decoder
class VarArrayDecoder(Operation):
    """A VarArrayField as ``[B, K_max, *inner_shape]`` rows, zeros past each sample's
    ``K`` rows. ``K_max`` is ``cap`` or, without one, the file's largest ``K`` (at least
    1). A sample with more than ``cap`` rows raises when the loader is built, or is cut to
    its first ``cap`` rows with ``truncate=True``."""

    _native_name = "VarArrayDecoder"

    def __init__(self, cap: Optional[int] = None, truncate: bool = False):
        super().__init__()
        if cap is not None and (isinstance(cap, bool) or int(cap) < 1):
            raise ValueError(f"VarArrayDecoder: cap {cap!r} must be a positive int")
        self.cap = None if cap is None else int(cap)
        self.truncate = bool(truncate)

    def _native_params(self):
        return {"cap": self.cap, "truncate": self.truncate}

    def _rows(self) -> np.ndarray:
        return (self.metadata["size"] // self.field.row_bytes).astype(np.int64)

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        rows = self._rows()
        largest = int(rows.max()) if len(rows) else 0
        if self.cap is not None and not self.truncate and largest > self.cap:
            first = int(np.argmax(rows > self.cap))
            raise ValueError(f"VarArrayDecoder: sample {first} has {int(rows[first])} rows, "
                             f"more than the cap of {self.cap}")
        width = self.cap if self.cap is not None else max(largest, 1)
        shape = (width, *self.field.inner_shape)
        return (replace(previous_state, jit_mode=True, shape=shape, dtype=self.field.dtype),
                AllocationQuery(shape, self.field.dtype))

    def generate_code(self) -> Callable:
        mem_read = self.memory_read
        copy = Compiler.compile(memcpy)
        loop = Compiler.get_iterator()
        rows = self.cap if self.cap is not None else max(int(self._rows().max(initial=0)), 1)
        row = int(self.field.row_bytes)
        row_bytes = rows * row

        def decode_var_arrays(indices, destination, metadata, storage_state):
            # Each sample's stored rows (cut to the cap), then zero rows.
            for i in loop(indices.shape[0]):
                entry = metadata[indices[i]]
                n = min(entry["size"], row_bytes)
                data = mem_read(entry["ptr"], storage_state)[:n]
                copy(data, destination[i])
                destination[i, n // row:] = 0
            return destination[: indices.shape[0]]

        decode_var_arrays.is_parallel = True
        return decode_var_arrays

    def _stored_extents(self, rows: Any) -> Tuple[Any, Any]:
        return rows["ptr"], rows["size"].astype(np.int64)


class VarArrayField(Field):
    """An array per sample with a variable leading dimension: ``dtype`` (bool, integer or
    float) and ``inner_shape`` (the shape of one row; ``()`` for 1-D arrays) are the
    field's, ``K`` is each sample's."""

    _kind = "var_array"

    def __init__(self, dtype: Any, inner_shape: Sequence[int] = ()):
        self.dtype = np.dtype(dtype)
        if self.dtype.kind not in "biuf" or self.dtype.fields is not None:
            raise TypeError(f"VarArrayField: dtype {self.dtype} is not a bool, integer or float type")
        self.inner_shape = tuple(int(d) for d in inner_shape)
        if len(self.inner_shape) > _MAX_INNER_DIMS:
            raise ValueError(f"VarArrayField: {len(self.inner_shape)} inner axes, "
                             f"at most {_MAX_INNER_DIMS}")
        if any(d < 1 for d in self.inner_shape):
            raise ValueError(f"VarArrayField: inner shape {self.inner_shape} has an axis below 1")
        self.row_bytes = int(self.dtype.itemsize * int(np.prod(self.inner_shape, dtype=np.int64)))

    @property
    def metadata_type(self) -> np.dtype:
        return np.dtype([("ptr", "<u8"), ("size", "<u8")])

    @staticmethod
    def from_binary(binary: Any) -> Field:
        raw = np.asarray(binary).view(np.uint8).reshape(-1)
        if raw[:8].tobytes() != TAG:
            raise ValueError("VarArrayField: the argument block does not open with its tag")
        layout, ndim = (int(x) for x in raw[8:16].view("<u4"))
        if layout != _LAYOUT:
            raise ValueError(f"VarArrayField: layout version {layout}")
        if ndim > _MAX_INNER_DIMS:
            raise ValueError(f"VarArrayField: {ndim} inner dimensions")
        length = int(raw[16:24].view("<u8")[0])
        if not 0 < length <= raw.size - _DESCR_AT:
            raise ValueError(f"VarArrayField: dtype description length {length}")
        dims = raw[_DIMS_AT:_DIMS_AT + 8 * ndim].view("<u8")
        descr = json.loads(raw[_DESCR_AT:_DESCR_AT + length].tobytes().decode("ascii"))
        return VarArrayField(np.dtype(descr[0][1]), tuple(int(d) for d in dims))

    def to_binary(self) -> Any:
        out = np.zeros(1, dtype=ARG_TYPE)[0]
        raw = out[0]
        text = json.dumps(self.dtype.descr).encode("ascii")
        if len(text) > raw.size - _DESCR_AT:
            raise ValueError(f"VarArrayField: the dtype description of {self.dtype} is too long")
        raw[:8] = np.frombuffer(TAG, dtype=np.uint8)
        raw[8:16] = np.array([_LAYOUT, len(self.inner_shape)], dtype="<u4").view(np.uint8)
        raw[16:24] = np.array([len(text)], dtype="<u8").view(np.uint8)
        dims = np.array(self.inner_shape, dtype="<u8").view(np.uint8)
        raw[_DIMS_AT:_DIMS_AT + dims.size] = dims
        raw[_DESCR_AT:_DESCR_AT + len(text)] = np.frombuffer(text, dtype=np.uint8)
        return out

    def encode(self, destination: Any, field: Any, malloc: Any) -> None:
        data = np.frombuffer(self._plain(field), dtype=np.uint8)
        ptr, buffer = malloc(data.size)
        buffer[:] = data
        destination["ptr"] = ptr
        destination["size"] = data.size

    def get_decoder_class(self) -> Type[Operation]:
        return VarArrayDecoder

    def _writer_params(self):
        return {"descr": json.dumps(self.dtype.descr), "inner_shape": list(self.inner_shape)}

    def _plain(self, value: Any) -> bytes:
        arr = np.asarray(value)
        if arr.ndim == 0 or arr.shape[1:] != self.inner_shape:
            if arr.size == 0 and arr.ndim <= 1:
                return b""  # an empty list or array: K = 0
            raise ValueError(f"VarArrayField: array of shape {arr.shape}, the field's rows "
                             f"are {self.inner_shape} (the shape must be (K, *inner_shape))")
        return np.ascontiguousarray(arr, dtype=self.dtype).tobytes()


def pack(padded: np.ndarray, lengths: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
    """The packed form of a padded batch: ``values`` of shape ``(sum K, *inner_shape)``
    (every sample's rows, one sample after the other) and ``offsets`` of shape ``(B + 1,)``,
    sample ``i``'s rows being ``values[offsets[i]:offsets[i + 1]]``."""
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = np.concatenate([padded[i, :k] for i, k in enumerate(lengths)]) if len(lengths) \
        else np.zeros((0, *padded.shape[2:]), dtype=padded.dtype)
    return values, offsets
