"""FFCV's ``RandomHorizontalFlip`` (``ffcv.transforms.flip``)."""

from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_code import native_protocol

__all__ = ["RandomHorizontalFlip", "AllocationQuery", "Compiler", "Operation", "State"]


@native_protocol
class RandomHorizontalFlip(Operation):
    """Flip each image left-right with probability ``flip_prob``. In the loader the draw
    is a function of (seed, epoch, sample); after an operation of the user's it is drawn
    from NumPy's (or numba's) generator, as in FFCV."""

    _native_name = "RandomHorizontalFlip"

    def __init__(self, flip_prob: float = 0.5):
        super().__init__()
        self.flip_prob = float(flip_prob)
        if not 0.0 <= self.flip_prob <= 1.0:
            raise ValueError(f"RandomHorizontalFlip: flip_prob {flip_prob} is not in [0, 1]")

    def generate_code(self) -> Callable:
        loop = Compiler.get_iterator()
        p = self.flip_prob

        def flip(images, dst):
            draws = np.random.rand(images.shape[0])
            for i in loop(images.shape[0]):
                if draws[i] < p:
                    dst[i] = images[i, :, ::-1]
                else:
                    dst[i] = images[i]
            return dst

        flip.is_parallel = True
        return flip

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return (replace(previous_state, jit_mode=True),
                AllocationQuery(tuple(previous_state.shape), previous_state.dtype))

    def _native_params(self) -> Dict[str, Any]:
        return {"flip_prob": self.flip_prob}
