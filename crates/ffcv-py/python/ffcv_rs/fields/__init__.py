"""FFCV's field types (``ffcv.fields``): what a ``.beton`` column holds, for
:class:`ffcv_rs.writer.DatasetWriter` and for choosing decoders."""

import json
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .decoders import (
    BytesDecoder,
    FloatDecoder,
    IntDecoder,
    NDArrayDecoder,
    SimpleRGBImageDecoder,
)

__all__ = [
    "Field",
    "IntField",
    "FloatField",
    "BytesField",
    "NDArrayField",
    "JSONField",
    "TorchTensorField",
    "RGBImageField",
]


class Field:
    """Base class of the field types."""

    _kind = ""

    def get_decoder_class(self):
        """The field's default decoder class."""
        raise NotImplementedError

    def _writer_params(self) -> Dict[str, Any]:
        return {}

    def _plain(self, value: Any) -> Any:
        """The value as the native writer takes it."""
        raise NotImplementedError


class IntField(Field):
    """An int64 per sample, kept in the metadata."""

    _kind = "int"

    def get_decoder_class(self):
        return IntDecoder

    def _plain(self, value: Any) -> int:
        return int(value)


class FloatField(Field):
    """A float64 per sample, kept in the metadata."""

    _kind = "float"

    def get_decoder_class(self):
        return FloatDecoder

    def _plain(self, value: Any) -> float:
        return float(value)


class BytesField(Field):
    """Variable-length bytes (a uint8 array, ``bytes`` or ``bytearray``) per sample."""

    _kind = "bytes"

    def get_decoder_class(self):
        return BytesDecoder

    def _plain(self, value: Any) -> bytes:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        arr = np.asarray(value)
        if arr.dtype != np.uint8:
            raise TypeError(f"BytesField takes bytes or a uint8 array, not {arr.dtype}")
        return arr.tobytes()


class NDArrayField(Field):
    """A fixed-shape NumPy array per sample."""

    _kind = "ndarray"

    def __init__(self, dtype: Any, shape: Tuple[int, ...]):
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        if self.dtype.hasobject:
            raise TypeError("NDArrayField cannot store Python objects")

    def get_decoder_class(self):
        return NDArrayDecoder

    def _writer_params(self) -> Dict[str, Any]:
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

        np_dtype = torch.zeros(0, dtype=dtype).numpy().dtype
        super().__init__(np_dtype, shape)
        self.torch_dtype = dtype

    def _plain(self, value: Any) -> bytes:
        if hasattr(value, "detach"):
            value = value.detach().cpu().numpy()
        return super()._plain(value)


class JSONField(Field):
    """Any JSON-serialisable value per sample, stored as ``json.dumps(value)``."""

    _kind = "json"

    def get_decoder_class(self):
        return BytesDecoder

    def _plain(self, value: Any) -> str:
        return json.dumps(value)

    @staticmethod
    def unpack(batch: Any) -> List[Any]:
        """The values of a batch of JSON rows (``uint8 [B, max]``, NUL-terminated)."""
        rows = np.asarray(batch)
        out = []
        for row in rows:
            raw = row.tobytes()
            end = raw.find(b"\0")
            out.append(json.loads(raw[: end if end >= 0 else len(raw)].decode("utf-8")))
        return out


class RGBImageField(Field):
    """An RGB image per sample: a ``[H, W, 3]`` uint8 array or a PIL image, stored raw or
    as a JPEG by ``write_mode`` (``raw``, ``jpg``, ``smart``, ``proportion``), optionally
    downscaled so that its longest side is at most ``max_resolution``."""

    _kind = "rgb"

    def __init__(
        self,
        write_mode: str = "raw",
        max_resolution: Optional[int] = None,
        smart_threshold: Optional[int] = None,
        jpeg_quality: int = 90,
        compress_probability: float = 0.5,
    ):
        if write_mode not in ("raw", "jpg", "smart", "proportion"):
            raise ValueError(f"RGBImageField: write_mode {write_mode!r} is not raw, jpg, smart or proportion")
        if not 1 <= int(jpeg_quality) <= 100:
            raise ValueError(f"RGBImageField: jpeg_quality {jpeg_quality} is not in 1..100")
        if not 0.0 <= float(compress_probability) <= 1.0:
            raise ValueError(f"RGBImageField: compress_probability {compress_probability} is not in [0, 1]")
        self.write_mode = write_mode
        self.max_resolution = None if max_resolution is None else int(max_resolution)
        self.smart_threshold = None if smart_threshold is None else int(smart_threshold)
        self.jpeg_quality = int(jpeg_quality)
        self.compress_probability = float(compress_probability)

    def get_decoder_class(self):
        return SimpleRGBImageDecoder

    def _writer_params(self) -> Dict[str, Any]:
        return {
            "write_mode": self.write_mode,
            "max_resolution": self.max_resolution,
            "smart_threshold": self.smart_threshold,
            "jpeg_quality": self.jpeg_quality,
            "compress_probability": self.compress_probability,
        }

    def _plain(self, value: Any) -> Tuple[int, int, bytes]:
        if type(value).__module__.startswith("PIL."):
            value = value.convert("RGB")
        arr = np.asarray(value)
        if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:
            raise TypeError(
                f"RGBImageField takes a uint8 [H, W, 3] array or a PIL image, not {arr.dtype} {arr.shape}"
            )
        return int(arr.shape[0]), int(arr.shape[1]), np.ascontiguousarray(arr).tobytes()
