"""FFCV's colour operations (``ffcv.transforms.color_jitter``): ``RandomBrightness``,
``RandomContrast`` and ``RandomSaturation``, each applied with probability ``p`` and a
factor uniform in ``[max(0, 1 - magnitude), 1 + magnitude]``, blending the image with
black, its mean grey level, or its grey image (ITU-R 601 weights), clamped to 0..255.

In a loader they run natively (``ffcv::transforms::colour``), per sample, with the draws
(applied or not, the factor) a function of (seed, epoch, sample), so a resumed run
repeats them. ``generate_code`` gives FFCV's NumPy code (numba-compiled when numba is
installed), for code that drives the operation itself."""

from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_code import native_protocol

__all__ = ["RandomBrightness", "RandomContrast", "RandomSaturation", "AllocationQuery",
           "Compiler", "Operation", "State"]


def _blend(image, other, factor):
    return np.clip(factor * image + (1 - factor) * other, 0, 255).astype(image.dtype)


def _grey(image):
    return (0.2989 * image[:, :, 0] + 0.587 * image[:, :, 1]
            + 0.114 * image[:, :, 2]).astype(image.dtype)


class _ColorOperation(Operation):
    def __init__(self, magnitude: float, p: float = 0.5):
        super().__init__()
        self.magnitude = float(magnitude)
        self.p = float(p)
        if self.magnitude < 0 or not 0.0 <= self.p <= 1.0:
            raise ValueError(f"{type(self).__name__}: magnitude {magnitude} must be >= 0 "
                             f"and p {p} in [0, 1]")

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return (replace(previous_state, jit_mode=True),
                AllocationQuery(tuple(previous_state.shape), previous_state.dtype))

    def _native_params(self) -> Dict[str, Any]:
        return {"magnitude": self.magnitude, "p": self.p}

    def _code(self, adjust: Callable) -> Callable:
        loop = Compiler.get_iterator()
        p, m = self.p, self.magnitude
        adjust = Compiler.compile(adjust)

        def colour(images, *_):
            n = images.shape[0]
            apply = np.random.rand(n) < p
            factors = np.random.uniform(max(0.0, 1 - m), 1 + m, n)
            for i in loop(n):
                if apply[i]:
                    images[i] = adjust(images[i], factors[i])
            return images

        colour.is_parallel = True
        return colour


@native_protocol
class RandomBrightness(_ColorOperation):
    """Scale the image towards black (factor < 1) or away from it."""

    _native_name = "RandomBrightness"

    def generate_code(self) -> Callable:
        blend = Compiler.compile(_blend)

        def brighter(image, factor):
            return blend(image, 0.0, factor)

        return self._code(brighter)


@native_protocol
class RandomContrast(_ColorOperation):
    """Move the image towards its mean grey level (factor < 1) or away from it."""

    _native_name = "RandomContrast"

    def generate_code(self) -> Callable:
        blend = Compiler.compile(_blend)
        grey = Compiler.compile(_grey)

        def contrasted(image, factor):
            return blend(image, grey(image).mean(), factor)

        return self._code(contrasted)


@native_protocol
class RandomSaturation(_ColorOperation):
    """Move the image towards its grey image (factor < 1) or away from it."""

    _native_name = "RandomSaturation"

    def generate_code(self) -> Callable:
        blend = Compiler.compile(_blend)
        grey = Compiler.compile(_grey)

        def saturated(image, factor):
            g = grey(image)
            grey3 = np.empty_like(image)
            for c in range(image.shape[2]):
                grey3[:, :, c] = g
            return blend(image, grey3, factor)

        return self._code(saturated)
