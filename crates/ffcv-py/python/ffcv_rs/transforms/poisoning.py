"""FFCV's ``Poison`` (``ffcv.transforms.poisoning``): blend a mask into chosen images."""

from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_code import native_protocol

__all__ = ["Poison", "AllocationQuery", "Compiler", "Operation", "State"]


@native_protocol
class Poison(Operation):
    """For every sample whose id is in ``indices``: ``x * (1 - alpha) + mask * alpha``
    per pixel (``alpha`` an ``[H, W]`` opacity, ``mask`` an ``[H, W, 3]`` image), clamped
    to ``clamp`` and stored back as the image's dtype (truncated, as FFCV), each step
    rounded to float32 as FFCV's float32 buffer does. In a loader it runs natively (the
    facade's ``Poison`` kernel); ``generate_code`` gives FFCV's NumPy code."""

    _native_name = "Poison"

    def __init__(self, mask: np.ndarray, alpha: np.ndarray, indices: Sequence[int],
                 clamp: Tuple[float, float] = (0, 255)):
        super().__init__()
        self.mask = np.asarray(mask)
        self.alpha = np.asarray(alpha)
        if self.mask.ndim != 3 or self.mask.shape[2] != 3 or self.alpha.shape != self.mask.shape[:2]:
            raise ValueError(f"Poison: mask {self.mask.shape} must be [H, W, 3] and alpha [H, W], "
                             f"got alpha {self.alpha.shape}")
        self.indices = np.sort(np.asarray(indices, dtype=np.int64).reshape(-1))
        self.clamp = (float(clamp[0]), float(clamp[1]))

    def generate_code(self) -> Callable:
        # FFCV's types: `1 - alpha` in alpha's own float type, `mask * alpha` in float64.
        alpha = np.repeat(self._alpha()[:, :, None], 3, axis=2)
        keep = 1 - alpha
        overlay = self.mask.astype(np.float64) * alpha
        targets = self.indices
        low, high = self.clamp
        loop = Compiler.get_iterator()

        def poison(images, scratch, indices):
            for i in loop(images.shape[0]):
                at = np.searchsorted(targets, indices[i])
                if at < targets.shape[0] and targets[at] == indices[i]:
                    work = scratch[i]
                    work[:] = images[i]
                    work[:] = work * keep
                    work[:] = work + overlay
                    work[:] = np.minimum(np.maximum(work, low), high)
                    images[i] = work
            return images

        poison.is_parallel = True
        poison.with_indices = True
        return poison

    def _alpha(self) -> np.ndarray:
        """The opacity as FFCV computes with it: float32 stays float32, the rest float64."""
        return self.alpha if self.alpha.dtype == np.float32 else self.alpha.astype(np.float64)

    def _native_params(self) -> Dict[str, Any]:
        h, w = self.alpha.shape
        return {"size": (int(h), int(w)),
                "mask": [float(v) for v in self.mask.astype(np.float64).reshape(-1)],
                "alpha": [float(v) for v in self.alpha.astype(np.float64).reshape(-1)],
                "indices": [int(i) for i in self.indices], "clamp": self.clamp,
                "alpha_float32": bool(self.alpha.dtype == np.float32)}

    def __repr__(self) -> str:
        return f"Poison(size={tuple(self.alpha.shape)}, indices={len(self.indices)}, clamp={self.clamp})"

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return (replace(previous_state, jit_mode=True),
                AllocationQuery(tuple(previous_state.shape), np.dtype("float32")))
