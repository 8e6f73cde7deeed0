"""FFCV's scalar fields and their decoders (``ffcv.fields.basics``): ``IntField`` (int64)
and ``FloatField`` (float64), kept in the metadata; decoded as ``[B, 1]`` arrays."""

from dataclasses import replace
from typing import Any, Callable, Optional, Tuple, Type

import numpy as np

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_decode import native_decoder
from .base import ARG_TYPE, Field, zero_arguments

__all__ = [
    "BasicDecoder", "IntDecoder", "FloatDecoder", "IntField", "FloatField",
    "ARG_TYPE", "AllocationQuery", "Field", "Operation", "State",
]


@native_decoder
class BasicDecoder(Operation):
    """Decodes a scalar field of dtype ``dtype`` kept in the metadata, as ``[B, 1]``."""

    dtype: Any = None

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        shape = (1,)
        return (replace(previous_state, jit_mode=True, shape=shape, dtype=self.dtype),
                AllocationQuery(shape, dtype=self.dtype))

    def generate_code(self) -> Callable:
        def decode_scalars(indices, destination, metadata, storage_state):
            for i in range(indices.shape[0]):
                destination[i, 0] = metadata[indices[i]]
            return destination[: indices.shape[0]]

        return decode_scalars

    def _stored_extents(self, rows: Any) -> None:
        return None  # the value is the metadata


class IntDecoder(BasicDecoder):
    """An IntField as ``int64 [B, 1]``."""

    dtype = np.dtype("<i8")
    _native_name = "IntDecoder"


class FloatDecoder(BasicDecoder):
    """A FloatField as ``float64 [B, 1]``."""

    dtype = np.dtype("<f8")
    _native_name = "FloatDecoder"


class FloatField(Field):
    """A float64 per sample, kept in the metadata."""

    _kind = "float"

    @property
    def metadata_type(self) -> np.dtype:
        return np.dtype("<f8")

    @staticmethod
    def from_binary(binary: Any) -> Field:
        return FloatField()

    def to_binary(self) -> Any:
        return zero_arguments()

    def encode(self, destination: Any, field: Any, malloc: Any) -> None:
        destination[0] = field

    def get_decoder_class(self) -> Type[Operation]:
        return FloatDecoder

    def _plain(self, value: Any) -> float:
        return float(value)


class IntField(Field):
    """An int64 per sample, kept in the metadata."""

    _kind = "int"

    @property
    def metadata_type(self) -> np.dtype:
        return np.dtype("<i8")

    @staticmethod
    def from_binary(binary: Any) -> Field:
        return IntField()

    def to_binary(self) -> Any:
        return zero_arguments()

    def encode(self, destination: Any, field: Any, malloc: Any) -> None:
        destination[0] = field

    def get_decoder_class(self) -> Type[Operation]:
        return IntDecoder

    def _plain(self, value: Any) -> int:
        return int(value)
