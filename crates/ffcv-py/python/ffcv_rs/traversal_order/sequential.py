"""FFCV's ``Sequential`` order (``ffcv.traversal_order.sequential``): the indices in order
(this rank's share in distributed mode, as PyTorch's ``DistributedSampler``)."""

from typing import Any

import numpy as np

from .base import TraversalOrder

__all__ = ["Sequential", "TraversalOrder"]


class Sequential(TraversalOrder):
    """The order ``Loader(order=OrderOption.SEQUENTIAL)`` visits; computed by the Rust
    loader (``loader.order_of(epoch)``)."""

    def sample_order(self, epoch: int) -> Any:
        return np.asarray(self.loader.order_of(epoch), dtype=np.uint64)
