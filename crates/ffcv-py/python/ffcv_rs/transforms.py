"""FFCV's transforms (``ffcv.transforms``) for ffcv_rs pipelines.

The image and label transforms run in the Rust loader, fused and compiled with the
decoder, on the worker threads. ``ToTensor``, ``ToTorchImage`` and ``ToDevice`` only change
how a batch is handed over (a torch tensor viewing the same memory, a permuted view, a
``.to(device)`` copy). Any other Python callable placed in a pipeline runs on the whole
batch (a NumPy array or torch tensor) on the consumer's thread after the built-in
transforms; it is neither fused nor compiled, so torchvision transforms work as they are.
"""

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

__all__ = [
    "Operation",
    "ToTensor",
    "ToDevice",
    "ToTorchImage",
    "NormalizeImage",
    "RandomHorizontalFlip",
    "Cutout",
    "RandomTranslate",
    "Squeeze",
    "Convert",
    "ReplaceLabel",
    "ModuleWrapper",
]


class Operation:
    """Base class of ffcv_rs's built-in transforms."""

    #: Name of the Rust operation, or None for operations the Python layer performs.
    _native_name: Optional[str] = None

    def _native_params(self) -> Dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._native_params().items())
        return f"{type(self).__name__}({params})"


class ToTensor(Operation):
    """Yield this output as a torch tensor (sharing the batch's memory) instead of a NumPy
    array. Without torch installed the output stays a NumPy array."""


class ToDevice(Operation):
    """Move the (torch) output to ``device`` with ``tensor.to(device, non_blocking)``."""

    def __init__(self, device: Any, non_blocking: bool = True):
        self.device = device
        self.non_blocking = bool(non_blocking)

    def __repr__(self) -> str:
        return f"ToDevice({self.device!r}, non_blocking={self.non_blocking})"


class ToTorchImage(Operation):
    """``[B, H, W, C]`` images as ``[B, C, H, W]``: with ``channels_last=True`` (FFCV's
    default) a permuted view of the same memory (torch's channels-last format), otherwise
    a contiguous CHW layout written by the Rust pipeline."""

    def __init__(self, channels_last: bool = True, convert_back_int16: bool = True):
        self.channels_last = bool(channels_last)
        self.convert_back_int16 = bool(convert_back_int16)

    def __repr__(self) -> str:
        return f"ToTorchImage(channels_last={self.channels_last})"


def _dtype_name(t: Any) -> str:
    """NumPy's name of a NumPy or torch dtype (``np.float16`` -> ``'float16'``)."""
    if t is None:
        return "float32"
    text = str(t)
    if text.startswith("torch."):
        return text[len("torch."):]
    return np.dtype(t).name


class NormalizeImage(Operation):
    """``(x - mean[c]) / std[c]`` per channel of ``[H, W, 3]`` images, as ``type``
    (float16, float32 or float64), each computed in float64 and rounded once, as FFCV's
    lookup table is."""

    _native_name = "NormalizeImage"

    def __init__(self, mean: Sequence[float], std: Sequence[float], type: Any = np.float32):
        self.mean = [float(x) for x in np.asarray(mean, dtype=np.float64).reshape(-1)]
        self.std = [float(x) for x in np.asarray(std, dtype=np.float64).reshape(-1)]
        if len(self.mean) != 3 or len(self.std) != 3:
            raise ValueError("NormalizeImage: mean and std need 3 values (RGB)")
        self.type = _dtype_name(type)
        if self.type not in ("float16", "float32", "float64"):
            raise ValueError(f"NormalizeImage: type {self.type} is not a float type")

    def _native_params(self) -> Dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "dtype": self.type}


class RandomHorizontalFlip(Operation):
    """Flip each image left-right with probability ``flip_prob``."""

    _native_name = "RandomHorizontalFlip"

    def __init__(self, flip_prob: float = 0.5):
        self.flip_prob = float(flip_prob)
        if not 0.0 <= self.flip_prob <= 1.0:
            raise ValueError(f"RandomHorizontalFlip: flip_prob {flip_prob} is not in [0, 1]")

    def _native_params(self) -> Dict[str, Any]:
        return {"flip_prob": self.flip_prob}


def _fill(fill: Tuple[int, int, int]) -> Tuple[int, int, int]:
    values = tuple(int(x) for x in fill)
    if len(values) != 3 or not all(0 <= v <= 255 for v in values):
        raise ValueError(f"fill {fill!r} is not three values in 0..255")
    return values  # type: ignore[return-value]


class Cutout(Operation):
    """Fill a ``crop_size`` square at a random place with ``fill``."""

    _native_name = "Cutout"

    def __init__(self, crop_size: int, fill: Tuple[int, int, int] = (0, 0, 0)):
        if int(crop_size) <= 0:
            raise ValueError(f"Cutout: crop_size {crop_size} must be positive")
        self.crop_size = int(crop_size)
        self.fill = _fill(fill)

    def _native_params(self) -> Dict[str, Any]:
        return {"crop_size": self.crop_size, "fill": self.fill}


class RandomTranslate(Operation):
    """Shift each image by up to ``padding`` pixels each way; uncovered pixels get ``fill``."""

    _native_name = "RandomTranslate"

    def __init__(self, padding: int, fill: Tuple[int, int, int] = (0, 0, 0)):
        if int(padding) < 0:
            raise ValueError(f"RandomTranslate: padding {padding} must not be negative")
        self.padding = int(padding)
        self.fill = _fill(fill)

    def _native_params(self) -> Dict[str, Any]:
        return {"padding": self.padding, "fill": self.fill}


class Squeeze(Operation):
    """Drop axes of length 1 (labels ``[B, 1]`` become ``[B]``). With ``dims``, only
    those axes, on the consumer's thread."""

    _native_name = "Squeeze"

    def __init__(self, *dims: int):
        self.dims = tuple(int(d) for d in dims)
        if self.dims:
            self._native_name = None


class Convert(Operation):
    """Convert to ``target_dtype`` (a NumPy or torch dtype). uint8, int32, int64, float32
    and float64 convert in the loader; other types on the consumer's thread."""

    _native_name = "Convert"

    def __init__(self, target_dtype: Any):
        self.target_dtype = target_dtype
        self.dtype_name = _dtype_name(target_dtype)
        if self.dtype_name not in ("uint8", "int32", "int64", "float32", "float64"):
            self._native_name = None

    def _native_params(self) -> Dict[str, Any]:
        return {"dtype": self.dtype_name}


class ReplaceLabel(Operation):
    """The label of every sample whose id is in ``indices`` becomes ``new_label``."""

    _native_name = "ReplaceLabel"

    def __init__(self, indices: Sequence[int], new_label: int):
        self.indices = [int(i) for i in np.asarray(indices).reshape(-1)]
        if any(i < 0 for i in self.indices):
            raise ValueError("ReplaceLabel: indices must not be negative")
        self.new_label = int(new_label)

    def _native_params(self) -> Dict[str, Any]:
        return {"indices": self.indices, "new_label": self.new_label}


class ModuleWrapper:
    """FFCV's wrapper of a torch module as a transform; in ffcv_rs any callable works
    directly, and this only calls ``module(batch)``."""

    def __init__(self, module: Any):
        self.module = module

    def __call__(self, batch: Any) -> Any:
        return self.module(batch)
