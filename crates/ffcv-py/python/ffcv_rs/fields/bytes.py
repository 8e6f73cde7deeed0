"""FFCV's ``BytesField`` and ``BytesDecoder`` (``ffcv.fields.bytes``): variable-length
bytes per sample, decoded as ``uint8 [B, longest sample]`` rows (zero past each
sample's end)."""

from dataclasses import replace
from typing import Any, Callable, Optional, Tuple, Type

import numpy as np

from ..libffcv import memcpy
from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_decode import native_decoder
from .base import ARG_TYPE, Field, zero_arguments

__all__ = [
    "BytesDecoder", "BytesField",
    "ARG_TYPE", "AllocationQuery", "Compiler", "Field", "Operation", "State", "memcpy",
]


@native_decoder
class BytesDecoder(Operation):
    """A BytesField (or JSONField) as ``uint8 [B, longest sample]``."""

    _native_name = "BytesDecoder"

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        longest = int(self.metadata["size"].max()) if len(self.metadata) else 0
        shape = (longest,)
        return (replace(previous_state, jit_mode=True, shape=shape, dtype=np.dtype("<u1")),
                AllocationQuery(shape, dtype=np.dtype("<u1")))

    def generate_code(self) -> Callable:
        mem_read = self.memory_read
        copy = Compiler.compile(memcpy)
        loop = Compiler.get_iterator()

        def decode_bytes(indices, destination, metadata, storage_state):
            for i in loop(indices.shape[0]):
                entry = metadata[indices[i]]
                data = mem_read(entry["ptr"], storage_state)[: entry["size"]]
                copy(data, destination[i])
                destination[i, data.shape[0]:] = 0
            return destination[: indices.shape[0]]

        decode_bytes.is_parallel = True
        return decode_bytes

    def _stored_extents(self, rows: Any) -> Tuple[Any, Any]:
        return rows["ptr"], rows["size"].astype(np.int64)


class BytesField(Field):
    """Variable-length bytes (a uint8 array, ``bytes`` or ``bytearray``) per sample."""

    _kind = "bytes"

    @property
    def metadata_type(self) -> np.dtype:
        return np.dtype([("ptr", "<u8"), ("size", "<u8")])

    @staticmethod
    def from_binary(binary: Any) -> Field:
        # FFCV writes zeros here; a block opening with the VarArrayField tag is ffcv-rs's
        # variable-length array, which FFCV itself reads as bytes.
        from .var_array import VarArrayField, is_tagged

        if is_tagged(binary):
            return VarArrayField.from_binary(binary)
        from .image import ImageField, is_tagged as is_image

        if is_image(binary):
            return ImageField.from_binary(binary)
        return BytesField()

    def to_binary(self) -> Any:
        return zero_arguments()

    def encode(self, destination: Any, field: Any, malloc: Any) -> None:
        data = np.frombuffer(self._plain(field), dtype=np.uint8)
        ptr, buffer = malloc(data.size)
        buffer[:] = data
        destination["ptr"] = ptr
        destination["size"] = data.size

    def get_decoder_class(self) -> Type[Operation]:
        return BytesDecoder

    def _plain(self, value: Any) -> bytes:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        arr = np.asarray(value)
        if arr.dtype == np.uint8:
            return arr.tobytes()
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"BytesField takes bytes or a numeric array, not {arr.dtype}")
        # FFCV stores `field.size` bytes, each element converted to uint8 as NumPy's
        # assignment into a uint8 buffer converts it.
        out = np.empty(arr.size, dtype=np.uint8)
        out[:] = arr.reshape(-1)
        return out.tobytes()
