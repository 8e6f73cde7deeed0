"""FFCV's ``Squeeze`` (``ffcv.transforms.common``)."""

from dataclasses import replace
from typing import Any, Callable, Optional, Tuple

import numpy as np

from .._compat import is_torch_tensor
from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.operation import Operation
from ..pipeline.state import State

__all__ = ["Squeeze", "AllocationQuery", "Operation", "State"]


class Squeeze(Operation):
    """Drop axes of length 1 (labels ``[B, 1]`` become ``[B]``); in the loader. With
    ``dims``, only those axes, on the consumer's thread."""

    _native_name = "Squeeze"

    def __init__(self, *dims: int):
        super().__init__()
        self.dims = tuple(int(d) for d in dims)
        if self.dims:
            self._native_name = None

    def generate_code(self) -> Callable:
        dims = self.dims

        def squeeze(inp, _dst):
            if is_torch_tensor(inp):
                return inp.squeeze(*dims) if dims else inp.squeeze()
            return np.squeeze(inp, axis=dims if dims else None)

        squeeze._ffcv_rs_python = True  # NumPy or torch, not compiled
        return squeeze

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return replace(previous_state, shape=tuple(x for x in previous_state.shape if x != 1)), None
