"""FFCV's file-format types (``ffcv.types``): the NumPy dtypes of a ``.beton`` file's
header, field descriptors and allocation table, and the field classes by type id. The
layout is FFCV 1.0.2's (format version 2), described in ``docs/format.md``."""

from typing import Any, List

import numpy as np

from .fields import (
    BytesField, Field, FloatField, IntField, JSONField, NDArrayField, RGBImageField,
    TorchTensorField,
)

__all__ = [
    "CURRENT_VERSION", "HeaderType", "ALLOC_TABLE_TYPE", "FieldDescType", "TYPE_ID_HANDLER",
    "get_handlers", "get_metadata_type",
    "Field", "FloatField", "IntField", "RGBImageField", "BytesField", "NDArrayField",
    "JSONField", "TorchTensorField",
]

CURRENT_VERSION = 2

HeaderType = np.dtype([
    ("version", "<u2"),
    ("num_fields", "<u2"),
    ("page_size", "<u4"),
    ("num_samples", "<u8"),
    ("alloc_table_ptr", "<u8"),
], align=True)

ALLOC_TABLE_TYPE = np.dtype([("sample_id", "<u8"), ("ptr", "<u8"), ("size", "<u8")])

FieldDescType = np.dtype([
    ("type_id", "<u1"),
    ("name", ("<u1", 16)),
    ("arguments", ("<u1", (1024,))),
], align=True)

#: The field class of each type id; 255 is a custom field (a class of the user's).
TYPE_ID_HANDLER = {
    255: None,
    0: FloatField,
    1: IntField,
    2: RGBImageField,
    3: BytesField,
    4: NDArrayField,
    5: JSONField,
    6: TorchTensorField,
}


def get_handlers(field_descriptors: Any) -> List[Any]:
    """The field instance of each descriptor (``None`` for a custom field). An unknown
    type id raises a ``ValueError`` naming it."""
    handlers = []
    for descriptor in field_descriptors:
        type_id = int(descriptor["type_id"])
        if type_id not in TYPE_ID_HANDLER:
            raise ValueError(f"unknown field type id {type_id}")
        handler = TYPE_ID_HANDLER[type_id]
        # TorchTensorField's from_binary is NDArrayField's: it reads back without torch.
        handlers.append(None if handler is None else handler.from_binary(descriptor["arguments"]))
    return handlers


def get_metadata_type(handlers: List[Any]) -> np.dtype:
    """The dtype of one metadata row: each field's ``metadata_type``, aligned."""
    return np.dtype([("", h.metadata_type) for h in handlers], align=True)
