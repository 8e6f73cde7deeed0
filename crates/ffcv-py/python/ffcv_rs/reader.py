"""FFCV's ``Reader`` (``ffcv.reader``): a ``.beton`` file's header, fields, metadata and
allocation table as NumPy arrays.

The file is validated first by beton-io (header, descriptors, tables and every pointer
against the file's size), so a truncated or corrupt file raises
:class:`ffcv_rs.errors.BadFileError` naming what is wrong. The tables are then mapped,
not copied: ``metadata`` and ``alloc_table`` are read-only views of the file.
"""

import os
from typing import Any, Dict, Mapping, Optional

import numpy as np

from . import _native
from .errors import ConfigError
from .types import (
    ALLOC_TABLE_TYPE, CURRENT_VERSION, FieldDescType, HeaderType, get_handlers,
    get_metadata_type,
)
from .utils import decode_null_terminated_string

__all__ = [
    "Reader", "ALLOC_TABLE_TYPE", "CURRENT_VERSION", "FieldDescType", "HeaderType",
    "decode_null_terminated_string", "get_handlers", "get_metadata_type",
]


def _layout(field_class: Any, arguments: Any) -> Any:
    handler = field_class.from_binary(arguments)
    dtype = np.dtype(handler.metadata_type)
    return handler, (dtype.itemsize, dtype.alignment)


class Reader:
    """Reads ``fname``. ``custom_handlers`` maps field names to ``Field`` classes for
    fields written by a class of the user's (type id 255), as FFCV's does; such a field
    without an entry raises a ``ValueError``."""

    def __init__(self, fname: Any, custom_handlers: Optional[Mapping[str, Any]] = None):
        self._fname = os.fspath(fname)
        self._custom_handlers = dict(custom_handlers or {})
        for name, cls in self._custom_handlers.items():
            if not (isinstance(cls, type) and hasattr(cls, "from_binary")):
                raise ConfigError(f"custom field {name!r}: {cls!r} is not a Field class")
        self.read_header()
        self.read_field_descriptors()
        self.read_metadata()
        self.read_allocation_table()

    @property
    def file_name(self) -> str:
        """The file's path."""
        return self._fname

    def read_header(self) -> None:
        # Descriptors are read raw first to learn the custom fields' metadata layout,
        # which beton-io needs to validate the tables.
        if not os.path.isfile(self._fname):
            _native.check_file(self._fname)  # raises BadFileError naming the file
        header = np.fromfile(self._fname, dtype=HeaderType, count=1)
        if len(header) != 1:
            _native.check_file(self._fname)  # raises, naming what is missing
        header = header[0]
        if int(header["version"]) != CURRENT_VERSION:
            # beton-io names the version and the file.
            _native.check_file(self._fname)
        self.header = header
        self.num_fields = int(header["num_fields"])
        descriptors = np.fromfile(self._fname, dtype=FieldDescType, count=self.num_fields,
                                  offset=HeaderType.itemsize)
        layouts: Dict[str, Any] = {}
        self._custom_instances: Dict[str, Any] = {}
        if len(descriptors) == self.num_fields:
            for desc in descriptors:
                name = decode_null_terminated_string(desc["name"])
                if name in self._custom_handlers:
                    handler, layout = _layout(self._custom_handlers[name], desc["arguments"])
                    layouts[name] = layout
                    self._custom_instances[name] = handler
                elif int(desc["type_id"]) == 255:
                    raise ConfigError(
                        f"field {name!r} of {self._fname} was written by a custom Field class: "
                        f"give it as custom_fields={{{name!r}: TheFieldClass}}"
                    )
        num_samples, page_size = _native.check_file(self._fname, layouts or None)
        self.num_samples = int(num_samples)
        self.page_size = int(page_size)

    def read_field_descriptors(self) -> None:
        descriptors = np.fromfile(self._fname, dtype=FieldDescType, count=self.num_fields,
                                  offset=HeaderType.itemsize)
        descriptors.setflags(write=False)
        self.field_descriptors = descriptors
        self.field_names = [decode_null_terminated_string(d["name"]) for d in descriptors]
        handlers = get_handlers(descriptors)
        self.handlers = dict(zip(self.field_names, handlers))
        self.handlers.update(self._custom_instances)
        for name, handler in self.handlers.items():
            if handler is None:
                raise ConfigError(
                    f"field {name!r} of {self._fname} was written by a custom Field class: "
                    f"give it as custom_fields={{{name!r}: TheFieldClass}}"
                )
        self.metadata_type = get_metadata_type(list(self.handlers.values()))

    def read_metadata(self) -> None:
        offset = HeaderType.itemsize + self.field_descriptors.nbytes
        if self.num_samples == 0:
            self.metadata = np.zeros(0, dtype=self.metadata_type)
            self.metadata.setflags(write=False)
        else:
            self.metadata = np.memmap(self._fname, dtype=self.metadata_type, mode="r",
                                      offset=offset, shape=(self.num_samples,))

    def read_allocation_table(self) -> None:
        offset = int(self.header["alloc_table_ptr"])
        count = (os.path.getsize(self._fname) - offset) // ALLOC_TABLE_TYPE.itemsize
        if count <= 0:
            self.alloc_table = np.zeros(0, dtype=ALLOC_TABLE_TYPE)
            self.alloc_table.setflags(write=False)
        else:
            self.alloc_table = np.memmap(self._fname, dtype=ALLOC_TABLE_TYPE, mode="r",
                                         offset=offset, shape=(count,))
