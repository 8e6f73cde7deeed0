"""FFCV's fixed-shape array fields (``ffcv.fields.ndarray``): ``NDArrayField`` (any NumPy
dtype and shape), ``TorchTensorField`` (stored the same way) and ``NDArrayDecoder``."""

import json
import warnings
from dataclasses import replace
from typing import Any, Callable, Optional, Tuple, Type

import numpy as np

from ..libffcv import memcpy
from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_decode import native_decoder
from .base import ARG_TYPE, Field

__all__ = [
    "NDArrayDecoder", "NDArrayField", "TorchTensorField", "NDArrayArgsType",
    "ARG_TYPE", "AllocationQuery", "Compiler", "Field", "Operation", "State", "memcpy",
]

#: The head of an NDArrayField's argument block: the shape (zero-padded to 32 axes) and
#: the length of the JSON dtype description that follows it.
NDArrayArgsType = np.dtype([("shape", "<u8", 32), ("type_length", "<u8")])


@native_decoder
class NDArrayDecoder(Operation):
    """An NDArrayField or TorchTensorField in its stored dtype and shape."""

    _native_name = "NDArrayDecoder"

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        shape, dtype = tuple(self.field.shape), self.field.dtype
        return (replace(previous_state, jit_mode=True, shape=shape, dtype=dtype),
                AllocationQuery(shape, dtype))

    def generate_code(self) -> Callable:
        mem_read = self.memory_read
        copy = Compiler.compile(memcpy)
        loop = Compiler.get_iterator()
        nbytes = int(self.field.element_size)

        def decode_arrays(indices, destination, metadata, storage_state):
            for i in loop(indices.shape[0]):
                data = mem_read(metadata[indices[i]], storage_state)[:nbytes]
                copy(data, destination[i].view(np.uint8))
            return destination[: indices.shape[0]]

        decode_arrays.is_parallel = True
        return decode_arrays

    def _stored_extents(self, rows: Any) -> Tuple[Any, Any]:
        return rows, np.full(len(rows), int(self.field.element_size), dtype=np.int64)


class NDArrayField(Field):
    """A fixed-shape NumPy array per sample."""

    _kind = "ndarray"

    def __init__(self, dtype: Any, shape: Tuple[int, ...]):
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        if self.dtype.hasobject:
            raise TypeError("NDArrayField cannot store Python objects")
        if len(self.shape) > 32:
            raise ValueError(f"NDArrayField: {len(self.shape)} axes, at most 32 are stored")
        self.element_size = int(self.dtype.itemsize * int(np.prod(self.shape, dtype=np.int64)))
        if self.dtype == np.uint16:
            warnings.warn("NDArrayField: torch has no uint16; consider int16 and a view")

    @property
    def metadata_type(self) -> np.dtype:
        return np.dtype("<u8")

    @staticmethod
    def from_binary(binary: Any) -> Field:
        raw = np.asarray(binary).view(np.uint8).reshape(-1)
        head = raw[: NDArrayArgsType.itemsize].view(NDArrayArgsType)[0]
        length = int(head["type_length"])
        text = raw[NDArrayArgsType.itemsize: NDArrayArgsType.itemsize + length].tobytes()
        descr = [tuple(x) for x in json.loads(text.decode("ascii"))]
        dtype = np.dtype(descr)["f0"] if len(descr) == 1 and descr[0][0] in ("", "f0") else np.dtype(descr)
        shape = [int(d) for d in head["shape"]]
        while shape and shape[-1] == 0:
            shape.pop()
        return NDArrayField(dtype, tuple(shape))

    def to_binary(self) -> Any:
        out = np.zeros(1, dtype=ARG_TYPE)[0]
        raw = out[0]
        head = np.zeros(1, dtype=NDArrayArgsType)
        head["shape"][0][: len(self.shape)] = self.shape
        text = json.dumps(self.dtype.descr).encode("ascii")
        head["type_length"][0] = len(text)
        block = np.concatenate([head.view(np.uint8), np.frombuffer(text, dtype=np.uint8)])
        if block.size > raw.size:
            raise ValueError(f"NDArrayField: the dtype description of {self.dtype} is too long")
        raw[: block.size] = block
        return out

    def encode(self, destination: Any, field: Any, malloc: Any) -> None:
        data = np.frombuffer(self._plain(field), dtype=np.uint8)
        destination[0], buffer = malloc(self.element_size)
        buffer[:] = data

    def get_decoder_class(self) -> Type[Operation]:
        return NDArrayDecoder

    def _writer_params(self):
        return {"descr": json.dumps(self.dtype.descr), "shape": list(self.shape)}

    def _plain(self, value: Any) -> bytes:
        arr = np.asarray(value)
        if arr.shape != self.shape:
            raise ValueError(f"NDArrayField: array of shape {arr.shape}, the field's is {self.shape}")
        return np.ascontiguousarray(arr, dtype=self.dtype).tobytes()


class TorchTensorField(NDArrayField):
    """A fixed-shape torch tensor per sample (stored like an NDArrayField)."""

    _kind = "torch"

    def __init__(self, dtype: Any, shape: Tuple[int, ...]):
        import torch  # the field is about torch tensors: asked for

        super().__init__(torch.zeros(0, dtype=dtype).numpy().dtype, shape)
        self.torch_dtype = dtype

    def _plain(self, value: Any) -> bytes:
        if hasattr(value, "detach"):
            value = value.detach().cpu().numpy()
        return super()._plain(value)
