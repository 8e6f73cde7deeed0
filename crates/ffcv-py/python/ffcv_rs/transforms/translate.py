"""FFCV's ``RandomTranslate`` (``ffcv.transforms.translate``)."""

from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_code import native_protocol
from .cutout import check_fill

__all__ = ["RandomTranslate", "AllocationQuery", "Compiler", "Operation", "State"]


@native_protocol
class RandomTranslate(Operation):
    """Shift each image by up to ``padding`` pixels each way; uncovered pixels get ``fill``."""

    _native_name = "RandomTranslate"

    def __init__(self, padding: int, fill: Tuple[int, int, int] = (0, 0, 0)):
        super().__init__()
        if int(padding) < 0:
            raise ValueError(f"RandomTranslate: padding {padding} must not be negative")
        self.padding = int(padding)
        self.fill = check_fill(fill)

    def generate_code(self) -> Callable:
        loop = Compiler.get_iterator()
        pad = self.padding
        fill = np.array(self.fill)

        def translate(images, padded):
            n, h, w = images.shape[0], images.shape[1], images.shape[2]
            padded[:] = fill
            padded[:n, pad:pad + h, pad:pad + w] = images
            for i in loop(n):
                y = np.random.randint(0, 2 * pad + 1)
                x = np.random.randint(0, 2 * pad + 1)
                images[i] = padded[i, y:y + h, x:x + w]
            return images

        translate.is_parallel = True
        return translate

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        h, w, c = previous_state.shape
        return (replace(previous_state, jit_mode=True),
                AllocationQuery((h + 2 * self.padding, w + 2 * self.padding, c), previous_state.dtype))

    def _native_params(self) -> Dict[str, Any]:
        return {"padding": self.padding, "fill": self.fill}
