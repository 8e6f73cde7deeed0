"""``ImageField`` (an ffcv-rs extension): images of 1, 3 or 4 channels and 8 or 16 bits,
the kinds FFCV's ``RGBImageField`` (RGB, 8 bits) cannot hold, and its decoders, which
keep the samples as they are: ``uint8`` or ``uint16`` rows of shape ``[B, H, W, C]``.

A sample is written from a JPEG or PNG file (its path or its bytes: a JPEG of 8 bits or a
PNG of exactly the field's kind is stored as it is, other PNGs raw after decoding) or from
an array (``[H, W]`` or ``[H, W, C]``, ``uint8`` or ``uint16``, stored raw behind a
16-byte header). The field is stored as FFCV's ``BytesField`` (type id 3, metadata
``{ptr, size}``), with the channels and bits in the argument block behind the tag
``b"FFRSIMAG"``, which FFCV ignores: FFCV 1.0.2 opens the file and reads each image's
stored bytes (docs/format.md, "Image arguments")."""

import os
import struct
from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Tuple, Type

import numpy as np

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_decode import native_decoder
from .base import ARG_TYPE, Field

__all__ = ["ImageField", "SimpleImageDecoder", "CenterCropImageDecoder",
           "RandomResizedCropImageDecoder", "TAG", "is_tagged"]

#: The first 8 bytes of an ImageField's argument block.
TAG = b"FFRSIMAG"
_LAYOUT = 1
#: The first 4 bytes of a raw sample's header: ``b"FRAW"``, u32 width, u32 height, u8
#: channels, u8 bits, two zero bytes, then the pixels (16-bit samples little-endian).
RAW_MAGIC = b"FRAW"


def is_tagged(binary: Any) -> bool:
    """Whether a type id 3 argument block opens with :data:`TAG`."""
    return np.asarray(binary).view(np.uint8).reshape(-1)[:8].tobytes() == TAG


def _size(output_size: Any) -> Tuple[int, int]:
    h, w = (int(x) for x in output_size)
    if h < 1 or w < 1:
        raise ValueError(f"output_size {output_size!r} must be two positive ints")
    return h, w


@native_decoder
class _ImageDecoder(Operation):
    """The ImageField decoders' shared protocol. They run in the Rust loader, and their
    ``generate_code`` is the same decoder as one native call per batch (for
    ``SimpleImageDecoder`` the destination's rows give the image size); there is no Python
    version, so under a memory manager of the user's, or overridden by a subclass, they
    raise."""

    _native_name: Optional[str] = None
    output_size: Optional[Tuple[int, int]] = None

    def _native_params(self) -> Dict[str, Any]:
        return {}

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        field = self.field
        if not isinstance(field, ImageField):
            raise TypeError(f"{type(self).__name__} decodes ImageField fields, not "
                            f"{type(field).__name__}")
        dtype = np.dtype("<u2") if field.bits == 16 else np.dtype("<u1")
        # The whole-image size is read from every sample's stored header by the native
        # loader, which checks that it is one size; here it is left open (0 x 0).
        h, w = self.output_size if self.output_size is not None else (0, 0)
        shape = (h, w, field.channels)
        return (replace(previous_state, jit_mode=True, shape=shape, dtype=dtype),
                AllocationQuery(shape, dtype))

    def generate_code(self) -> Callable:
        raise NotImplementedError(
            f"{type(self).__name__} has no Python version: it runs in the Rust loader, or "
            "driven directly over a built-in memory manager (OSCacheManager, "
            "ProcessCacheManager)")

    def _stored_extents(self, rows: Any) -> Tuple[Any, Any]:
        return rows["ptr"], rows["size"].astype(np.int64)


class SimpleImageDecoder(_ImageDecoder):
    """Every image at its stored size (all images of the field must have one size)."""

    _native_name = "SimpleImageDecoder"


class CenterCropImageDecoder(_ImageDecoder):
    """The centre square of side ``ratio * min(height, width)``, resized to
    ``output_size`` (``INTER_AREA``'s rules, every channel, 8 or 16 bits)."""

    _native_name = "CenterCropImageDecoder"

    def __init__(self, output_size: Tuple[int, int], ratio: float = 224 / 256):
        super().__init__()
        self.output_size = _size(output_size)
        self.ratio = float(ratio)
        if not 0.0 < self.ratio <= 1.0:
            raise ValueError(f"CenterCropImageDecoder: ratio {ratio} must be in (0, 1]")

    def _native_params(self) -> Dict[str, Any]:
        return {"output_size": self.output_size, "ratio": self.ratio}


class RandomResizedCropImageDecoder(_ImageDecoder):
    """torchvision's RandomResizedCrop rule (FFCV's), resized to ``output_size``."""

    _native_name = "RandomResizedCropImageDecoder"
    _draws = True

    def __init__(self, output_size: Tuple[int, int], scale: Tuple[float, float] = (0.08, 1.0),
                 ratio: Tuple[float, float] = (3 / 4, 4 / 3)):
        super().__init__()
        self.output_size = _size(output_size)
        self.scale = (float(scale[0]), float(scale[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        for name, (lo, hi) in (("scale", self.scale), ("ratio", self.ratio)):
            if not 0.0 < lo <= hi:
                raise ValueError(
                    f"RandomResizedCropImageDecoder: {name} {(lo, hi)} must satisfy 0 < low <= high")

    def _native_params(self) -> Dict[str, Any]:
        return {"output_size": self.output_size, "scale": self.scale, "ratio": self.ratio}


class ImageField(Field):
    """An image per sample with ``channels`` (1 gray, 3 RGB, 4 RGBA) of ``bits`` (8 or
    16) each, kept as it is: a path or the bytes of a JPEG or PNG file of that kind, or an
    array ``[H, W]`` / ``[H, W, C]`` of ``uint8`` (8 bits) or ``uint16`` (16 bits)."""

    _kind = "image"

    def __init__(self, channels: int = 3, bits: int = 8):
        self.channels = int(channels)
        self.bits = int(bits)
        if self.channels not in (1, 3, 4):
            raise ValueError(f"ImageField: {channels} channels (1, 3 or 4)")
        if self.bits not in (8, 16):
            raise ValueError(f"ImageField: {bits} bits (8 or 16)")

    @property
    def metadata_type(self) -> np.dtype:
        return np.dtype([("ptr", "<u8"), ("size", "<u8")])

    @staticmethod
    def from_binary(binary: Any) -> Field:
        raw = np.asarray(binary).view(np.uint8).reshape(-1)
        if raw[:8].tobytes() != TAG:
            raise ValueError("ImageField: the argument block does not open with its tag")
        layout, channels, bits = (int(x) for x in raw[8:20].view("<u4"))
        if layout != _LAYOUT:
            raise ValueError(f"ImageField: layout version {layout}")
        return ImageField(channels, bits)

    def to_binary(self) -> Any:
        out = np.zeros(1, dtype=ARG_TYPE)[0]
        raw = out[0]
        raw[:8] = np.frombuffer(TAG, dtype=np.uint8)
        raw[8:20] = np.array([_LAYOUT, self.channels, self.bits], dtype="<u4").view(np.uint8)
        return out

    def encode(self, destination: Any, field: Any, malloc: Any) -> None:
        data = np.frombuffer(self._plain(field), dtype=np.uint8)
        ptr, buffer = malloc(data.size)
        buffer[:] = data
        destination["ptr"] = ptr
        destination["size"] = data.size

    def get_decoder_class(self) -> Type[Operation]:
        return SimpleImageDecoder

    def _writer_params(self):
        return {"channels": self.channels, "bits": self.bits}

    def _plain(self, value: Any) -> bytes:
        """A file's bytes (the writer keeps or converts them), or a raw sample."""
        if isinstance(value, (str, os.PathLike)):
            with open(value, "rb") as f:
                return f.read()
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        arr = np.asarray(value)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        want = np.dtype("<u2") if self.bits == 16 else np.dtype("u1")
        if arr.ndim != 3 or arr.shape[2] != self.channels or arr.dtype != want.newbyteorder("="):
            raise ValueError(f"ImageField: an array of shape {arr.shape} and dtype {arr.dtype}; "
                             f"the field takes [H, W, {self.channels}] {want.name} images")
        h, w = arr.shape[:2]
        if h < 1 or w < 1:
            raise ValueError(f"ImageField: an empty {h}x{w} image")
        header = RAW_MAGIC + struct.pack("<IIBBxx", w, h, self.channels, self.bits)
        return header + np.ascontiguousarray(arr, dtype=want).tobytes()
