"""Small deterministic datasets used by the micro-benchmarks (FFCV's ``DummyDataset``s):
indexable, with ``len``, returning ``(index, value)`` tuples."""

from typing import Any, Tuple

import numpy as np


class RandomBytes:
    """``(i, size random bytes drawn from a generator seeded with i)``."""

    def __init__(self, length: int, size: int):
        self.length, self.size = length, size

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Tuple[int, Any]:
        if not 0 <= index < self.length:
            raise IndexError(index)
        rng = np.random.default_rng(index)
        return index, rng.integers(0, 255, size=self.size, dtype=np.uint8)


class FlatImages:
    """``(i, an height x width RGB image of value i % 255)``."""

    def __init__(self, length: int, height: int, width: int):
        self.length, self.height, self.width = length, height, width

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Tuple[int, Any]:
        if not 0 <= index < self.length:
            raise IndexError(index)
        return index, np.full((self.height, self.width, 3), index % 255, dtype=np.uint8)
