"""FFCV's ``Cutout`` (``ffcv.transforms.cutout``)."""

from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_code import native_protocol

__all__ = ["Cutout", "AllocationQuery", "Compiler", "Operation", "State"]


def check_fill(fill: Any) -> Tuple[int, int, int]:
    values = tuple(int(x) for x in np.asarray(fill).reshape(-1))
    if len(values) != 3 or not all(0 <= v <= 255 for v in values):
        raise ValueError(f"fill {fill!r} is not three values in 0..255")
    return values  # type: ignore[return-value]


@native_protocol
class Cutout(Operation):
    """Fill a ``crop_size`` square at a random place with ``fill`` (in place)."""

    _native_name = "Cutout"

    def __init__(self, crop_size: int, fill: Tuple[int, int, int] = (0, 0, 0)):
        super().__init__()
        if int(crop_size) <= 0:
            raise ValueError(f"Cutout: crop_size {crop_size} must be positive")
        self.crop_size = int(crop_size)
        self.fill = check_fill(fill)

    def generate_code(self) -> Callable:
        loop = Compiler.get_iterator()
        size = self.crop_size
        fill = np.array(self.fill)

        def cutout(images, *_):
            for i in loop(images.shape[0]):
                y = np.random.randint(images.shape[1] - size + 1)
                x = np.random.randint(images.shape[2] - size + 1)
                images[i, y:y + size, x:x + size] = fill
            return images

        cutout.is_parallel = True
        return cutout

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return replace(previous_state, jit_mode=True), None

    def _native_params(self) -> Dict[str, Any]:
        return {"crop_size": self.crop_size, "fill": self.fill}
