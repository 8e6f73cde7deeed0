"""FFCV's decoders (``ffcv.fields.decoders``): the first step of a field's pipeline.

Every decoder runs in the Rust loader. Shapes and types are FFCV's: ``IntDecoder`` gives
``int64 [B, 1]``, ``FloatDecoder`` ``float64 [B, 1]``, ``BytesDecoder`` ``uint8 [B, max]``
(rows zero-padded past each sample's length), ``NDArrayDecoder`` the stored dtype and
shape, the image decoders ``uint8 [B, H, W, 3]``, ``VarArrayDecoder`` (an ffcv-rs
extension) ``[B, K_max, *inner_shape]`` in the field's dtype, zero-padded, and the
``ImageField`` decoders (an ffcv-rs extension) ``uint8`` or ``uint16 [B, H, W, C]``.
"""

from ..pipeline.operation import Operation as Decoder
from .basics import FloatDecoder, IntDecoder
from .bytes import BytesDecoder
from .ndarray import NDArrayDecoder
from .var_array import VarArrayDecoder
from .image import CenterCropImageDecoder, RandomResizedCropImageDecoder, SimpleImageDecoder
from .rgb_image import (
    CenterCropRGBImageDecoder,
    RandomResizedCropRGBImageDecoder,
    SimpleRGBImageDecoder,
)

__all__ = [
    "Decoder",
    "IntDecoder",
    "FloatDecoder",
    "BytesDecoder",
    "NDArrayDecoder",
    "SimpleRGBImageDecoder",
    "CenterCropRGBImageDecoder",
    "RandomResizedCropRGBImageDecoder",
    "VarArrayDecoder",
    "SimpleImageDecoder",
    "CenterCropImageDecoder",
    "RandomResizedCropImageDecoder",
]
