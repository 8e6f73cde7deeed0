"""FFCV's decoders (``ffcv.fields.decoders``): the first step of a field's pipeline.

Every decoder runs in the Rust loader. Shapes and types are FFCV's: ``IntDecoder`` gives
``int64 [B, 1]``, ``FloatDecoder`` ``float64 [B, 1]``, ``BytesDecoder`` ``uint8 [B, max]``
(rows zero-padded past each sample's length), ``NDArrayDecoder`` the stored dtype and
shape, the image decoders ``uint8 [B, H, W, 3]``.
"""

from typing import Any, Dict, Tuple

__all__ = [
    "Decoder",
    "IntDecoder",
    "FloatDecoder",
    "BytesDecoder",
    "NDArrayDecoder",
    "SimpleRGBImageDecoder",
    "CenterCropRGBImageDecoder",
    "RandomResizedCropRGBImageDecoder",
]

DEFAULT_CROP_RATIO = 224 / 256


class Decoder:
    """Base class of the decoders."""

    _native_name = ""

    def _native_params(self) -> Dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._native_params().items())
        return f"{type(self).__name__}({params})"


class IntDecoder(Decoder):
    """An IntField as ``int64 [B, 1]``."""

    _native_name = "IntDecoder"


class FloatDecoder(Decoder):
    """A FloatField as ``float64 [B, 1]``."""

    _native_name = "FloatDecoder"


class BytesDecoder(Decoder):
    """A BytesField (or JSONField) as ``uint8 [B, longest sample]``."""

    _native_name = "BytesDecoder"


class NDArrayDecoder(Decoder):
    """An NDArrayField or TorchTensorField in its stored dtype and shape."""

    _native_name = "NDArrayDecoder"


class SimpleRGBImageDecoder(Decoder):
    """Full images, for datasets whose images all have one size."""

    _native_name = "SimpleRGBImageDecoder"


def _size(output_size: Tuple[int, int]) -> Tuple[int, int]:
    try:
        h, w = (int(x) for x in output_size)
    except (TypeError, ValueError):
        raise TypeError(f"output_size {output_size!r} is not (height, width)") from None
    if h <= 0 or w <= 0:
        raise ValueError(f"output_size {output_size!r} must be positive")
    return h, w


class CenterCropRGBImageDecoder(Decoder):
    """The centre square of side ``ratio * min(height, width)``, resized to
    ``output_size`` (INTER_AREA, as FFCV).

    ``dct_downscale=True`` (an ffcv_rs option, off by default) decodes a JPEG whose crop
    is at least twice the output at 1/2, 1/4 or 1/8 scale in the DCT domain: faster, but
    the pixels are no longer FFCV's (about 30 dB PSNR on photos)."""

    _native_name = "CenterCropRGBImageDecoder"

    def __init__(
        self,
        output_size: Tuple[int, int],
        ratio: float = DEFAULT_CROP_RATIO,
        *,
        dct_downscale: bool = False,
    ):
        self.output_size = _size(output_size)
        self.ratio = float(ratio)
        self.dct_downscale = bool(dct_downscale)
        if not 0.0 < self.ratio <= 1.0:
            raise ValueError(f"CenterCropRGBImageDecoder: ratio {ratio} must be in (0, 1]")

    def _native_params(self) -> Dict[str, Any]:
        return {
            "output_size": self.output_size,
            "ratio": self.ratio,
            "dct_downscale": self.dct_downscale,
        }


class RandomResizedCropRGBImageDecoder(Decoder):
    """torchvision's RandomResizedCrop rule (FFCV's), resized to ``output_size``.

    ``dct_downscale=True``: as for :class:`CenterCropRGBImageDecoder` (crops at least twice
    the output only; at 224x224 from ~400 px images that is rare)."""

    _native_name = "RandomResizedCropRGBImageDecoder"

    def __init__(
        self,
        output_size: Tuple[int, int],
        scale: Tuple[float, float] = (0.08, 1.0),
        ratio: Tuple[float, float] = (3 / 4, 4 / 3),
        *,
        dct_downscale: bool = False,
    ):
        self.output_size = _size(output_size)
        self.dct_downscale = bool(dct_downscale)
        self.scale = (float(scale[0]), float(scale[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        for name, (lo, hi) in (("scale", self.scale), ("ratio", self.ratio)):
            if not 0.0 < lo <= hi:
                raise ValueError(f"RandomResizedCropRGBImageDecoder: {name} {(lo, hi)} must satisfy 0 < low <= high")

    def _native_params(self) -> Dict[str, Any]:
        return {
            "output_size": self.output_size,
            "scale": self.scale,
            "ratio": self.ratio,
            "dct_downscale": self.dct_downscale,
        }
