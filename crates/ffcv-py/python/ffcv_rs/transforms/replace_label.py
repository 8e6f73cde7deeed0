"""FFCV's ``ReplaceLabel`` (``ffcv.transforms.replace_label``)."""

from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_code import native_protocol

__all__ = ["ReplaceLabel", "AllocationQuery", "Compiler", "Operation", "State"]


@native_protocol
class ReplaceLabel(Operation):
    """The label of every sample whose id is in ``indices`` becomes ``new_label``."""

    _native_name = "ReplaceLabel"

    def __init__(self, indices: Sequence[int], new_label: int):
        super().__init__()
        ids = np.asarray(indices).reshape(-1)
        if (ids < 0).any():
            raise ValueError("ReplaceLabel: indices must not be negative")
        self.indices = np.sort(ids.astype(np.int64))
        self.new_label = int(new_label)

    def generate_code(self) -> Callable:
        targets = self.indices
        label = self.new_label
        loop = Compiler.get_iterator()

        def replace_label(labels, _dst, indices):
            for i in loop(labels.shape[0]):
                at = np.searchsorted(targets, indices[i])
                if at < targets.shape[0] and targets[at] == indices[i]:
                    labels[i] = label
            return labels

        replace_label.is_parallel = True
        replace_label.with_indices = True
        return replace_label

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return replace(previous_state, jit_mode=True), None

    def _native_params(self) -> Dict[str, Any]:
        return {"indices": [int(i) for i in self.indices], "new_label": self.new_label}
