"""FFCV's ``RandomResizedCrop`` transform (``ffcv.transforms.random_resized_crop``): the
crop of torchvision's rule, resized to ``size x size`` with ``INTER_AREA``, on decoded
images. (Cropping in the decoder, ``RandomResizedCropRGBImageDecoder``, is faster.)"""

from dataclasses import replace
from typing import Callable, Optional, Tuple

import numpy as np

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from .utils import fast_crop

__all__ = ["RandomResizedCrop", "AllocationQuery", "Compiler", "Operation", "State", "fast_crop"]


class RandomResizedCrop(Operation):
    """Crop each image by torchvision's rule (area fraction in ``scale``, aspect ratio in
    ``ratio``) and resize the crop to ``size x size``. Runs in Python (numba-compiled
    when numba is installed), after the Rust pipeline."""

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
        shape = (self.size, self.size, 3)
        return (replace(previous_state, jit_mode=True, shape=shape),
                AllocationQuery(shape, previous_state.dtype))
