"""FFCV's ``QuasiRandom`` order (``ffcv.traversal_order.quasi_random``): a page-aware
shuffle over a window of pages, so the process cache reads each page once. ffcv_rs
follows FFCV's scheme with orders that depend only on the seed, epoch and rank (FFCV's
depend on numba's generator state and cannot be reproduced)."""

from typing import Any

import numpy as np

from .._compat import unsupported_function
from .base import TraversalOrder

__all__ = ["QuasiRandom", "TraversalOrder", "generate_order_inner"]


class QuasiRandom(TraversalOrder):
    """The order ``Loader(order=OrderOption.QUASI_RANDOM)`` visits; computed by the Rust
    loader (``loader.order_of(epoch)``)."""

    def sample_order(self, epoch: int) -> Any:
        return np.asarray(self.loader.order_of(epoch), dtype=np.uint64)


generate_order_inner = unsupported_function(
    "ffcv.traversal_order.quasi_random.generate_order_inner",
    "the Rust traversal crate computes QuasiRandom orders: use "
    "Loader(order=OrderOption.QUASI_RANDOM).order_of(epoch), or `ffcv order FILE --order "
    "quasi-random`")
