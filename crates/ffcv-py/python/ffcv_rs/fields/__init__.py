"""FFCV's field types (``ffcv.fields``): what a ``.beton`` column holds, for
:class:`ffcv_rs.writer.DatasetWriter` and for choosing decoders."""

from .base import Field
from .basics import FloatField, IntField
from .bytes import BytesField
from .image import ImageField
from .json import JSONField
from .ndarray import NDArrayField, TorchTensorField
from .rgb_image import RGBImageField
from .var_array import VarArrayField

__all__ = [
    "Field",
    "BytesField",
    "IntField",
    "FloatField",
    "RGBImageField",
    "NDArrayField",
    "JSONField",
    "TorchTensorField",
    "VarArrayField",
    "ImageField",
]
