"""FFCV's ``Field`` base class (``ffcv.fields.base``): what a column of a ``.beton`` file
holds, how a value is written (``encode``) and read back (``get_decoder_class``).

A user's ``Field`` subclass works as in FFCV: ``DatasetWriter`` calls its ``encode`` and
stores its ``to_binary()`` arguments (type id 255 for a class that is not one of the
built-ins), and ``Loader(custom_fields={name: Class})`` reads it with
``Class.from_binary`` and the decoder the pipeline names.
"""

from abc import ABC, abstractmethod
from typing import Any, Dict, Type

import numpy as np

from ..pipeline.operation import Operation

__all__ = ["Field", "ARG_TYPE"]

#: The 1024-byte argument block every field descriptor carries.
ARG_TYPE = np.dtype([("", "<u1", 1024)])


class Field(ABC):
    """A field type (see the module docs)."""

    #: ffcv_rs: the native writer's name of a built-in field type ("" for custom ones).
    _kind = ""

    @property
    @abstractmethod
    def metadata_type(self) -> np.dtype:
        """The dtype of the field's entry in each metadata row."""
        raise NotImplementedError

    @staticmethod
    @abstractmethod
    def from_binary(binary: Any) -> "Field":
        """The field described by its 1024-byte argument block."""
        raise NotImplementedError

    @abstractmethod
    def to_binary(self) -> Any:
        """The field's 1024-byte argument block (an ``ARG_TYPE`` record)."""
        raise NotImplementedError

    @abstractmethod
    def encode(self, destination: Any, field: Any, malloc: Any) -> None:
        """Writes one value: its metadata into ``destination`` (a one-row view of the
        metadata column), its data into buffers from ``malloc(size) -> (ptr, buffer)``."""
        raise NotImplementedError

    @abstractmethod
    def get_decoder_class(self) -> Type[Operation]:
        """The field's default decoder class."""
        raise NotImplementedError

    # ffcv_rs's native writer: the field's parameters and a value in the form it takes.
    def _writer_params(self) -> Dict[str, Any]:
        return {}

    def _plain(self, value: Any) -> Any:
        raise NotImplementedError


def zero_arguments() -> Any:
    """An all-zero argument block (the fields without arguments)."""
    return np.zeros(1, dtype=ARG_TYPE)[0]
