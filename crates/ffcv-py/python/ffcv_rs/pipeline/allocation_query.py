"""FFCV's ``AllocationQuery`` (``ffcv.pipeline.allocation_query``): the output buffer an
operation asks for, per sample; the loader allocates it for whole batches."""

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["AllocationQuery", "Allocation", "allocate_query"]


@dataclass(frozen=True)
class AllocationQuery:
    """``shape`` (per sample, without the batch axis), ``dtype`` (NumPy, or torch for a
    tensor) and ``device`` (torch's, for tensors) of an operation's output buffer."""

    shape: Tuple[int, ...]
    dtype: Any
    device: Optional[Any] = None


Allocation = Union[AllocationQuery, Sequence[AllocationQuery]]


def _torch_dtype(dtype: Any) -> bool:
    return type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype"


def allocate_query(memory_allocation: AllocationQuery, batch_size: int, batches_ahead: int):
    """``batches_ahead`` buffers of ``batch_size`` samples for ``memory_allocation``, as
    FFCV allocates them: one array of shape ``[batches_ahead, batch_size, *shape]`` for a
    NumPy dtype, a list of torch tensors for a torch dtype."""
    shape = (int(batches_ahead), int(batch_size), *(int(d) for d in memory_allocation.shape))
    if _torch_dtype(memory_allocation.dtype):
        import torch

        device = memory_allocation.device
        return [
            torch.empty(*shape[1:], dtype=memory_allocation.dtype, device=device)
            for _ in range(shape[0])
        ]
    return np.empty(shape, dtype=memory_allocation.dtype)
