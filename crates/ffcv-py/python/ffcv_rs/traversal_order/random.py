"""FFCV's ``Random`` order (``ffcv.traversal_order.random``): NumPy's
``default_rng(seed + epoch).permutation(indices)``, sample for sample."""

from typing import Any

import numpy as np

from .base import TraversalOrder

__all__ = ["Random", "TraversalOrder"]


class Random(TraversalOrder):
    """The order ``Loader(order=OrderOption.RANDOM)`` visits; computed by the Rust loader
    (``loader.order_of(epoch)``)."""

    def sample_order(self, epoch: int) -> Any:
        return np.asarray(self.loader.order_of(epoch), dtype=np.uint64)
