"""FFCV's ``RandomResizedCrop`` transform (``ffcv.transforms.random_resized_crop``): the
crop of torchvision's rule, resized to ``size x size`` with ``INTER_AREA``, on decoded
images. In a loader it runs natively (``ffcv::transforms::resized_crop``), the box drawn
from (seed, epoch, sample). (Cropping in the decoder, ``RandomResizedCropRGBImageDecoder``,
is faster: it decodes only what the crop needs.)"""

from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_code import native_protocol
from .utils import fast_crop

__all__ = ["RandomResizedCrop", "AllocationQuery", "Compiler", "Operation", "State", "fast_crop"]


@native_protocol
class RandomResizedCrop(Operation):
    """Crop each image by torchvision's rule (area fraction in ``scale``, aspect ratio in
    ``ratio``) and resize the crop to ``size x size`` (OpenCV's ``INTER_AREA``).
    ``generate_code`` gives FFCV's NumPy code, for code that drives it itself."""

    _native_name = "RandomResizedCrop"

    def __init__(self, scale: Tuple[float, float], ratio: Tuple[float, float], size: int):
        super().__init__()
        self.scale = (float(scale[0]), float(scale[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        self.size = int(size)
        if self.size <= 0:
            raise ValueError(f"RandomResizedCrop: size {size} must be positive")
        for name, (lo, hi) in (("scale", self.scale), ("ratio", self.ratio)):
            if not 0.0 < lo <= hi:
                raise ValueError(f"RandomResizedCrop: {name} {(lo, hi)} must satisfy 0 < low <= high")

    def generate_code(self) -> Callable:
        scale = np.array(self.scale)
        ratio = np.array(self.ratio)
        loop = Compiler.get_iterator()
        crop_box = Compiler.compile(fast_crop.get_random_crop)
        resize = Compiler.compile(fast_crop.resize_crop)

        def random_resized_crop(images, dst):
            for k in loop(images.shape[0]):
                i, j, h, w = crop_box(images.shape[1], images.shape[2], scale, ratio)
                resize(np.ascontiguousarray(images[k]), i, i + h, j, j + w, dst[k])
            return dst[: images.shape[0]]

        random_resized_crop.is_parallel = True
        return random_resized_crop

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        # FFCV's state says 3 channels; here the channels of what comes in, when known.
        prev = previous_state.shape
        channels = tuple(prev[2:]) if prev is not None and len(prev) == 3 else (3,)
        shape = (self.size, self.size, *channels)
        return (replace(previous_state, jit_mode=True, shape=shape),
                AllocationQuery(shape, previous_state.dtype))

    def _native_params(self) -> Dict[str, Any]:
        return {"scale": self.scale, "ratio": self.ratio, "size": self.size}
