"""FFCV's ``TraversalOrder`` (``ffcv.traversal_order.base``): an epoch's sample order.

A subclass of the user's is passed as ``Loader(order=MyOrder)`` (a class, built with the
loader and ``order_kwargs``, or an instance). Its ``sample_order(epoch)`` is called once
per epoch, before the epoch starts, and returns the sample ids to visit (this rank's
share in distributed mode: the order decides it, using ``self.distributed`` and the
rank as it likes). ``docs/python.md`` has a class-balanced sampler as an example.
"""

from abc import ABC, abstractmethod
from typing import Any, Sequence

from ..reader import Reader

__all__ = ["TraversalOrder", "Reader"]


class TraversalOrder(ABC):
    """Base class of sample orders; ``loader`` gives ``indices``, ``seed`` and
    ``distributed`` (and ``rank``, ``world_size`` in ffcv_rs)."""

    def __init__(self, loader: Any):
        self.loader = loader
        self.indices = loader.indices
        self.seed = loader.seed
        self.distributed = loader.distributed
        self.sampler = None

    @abstractmethod
    def sample_order(self, epoch: int) -> Sequence[int]:
        """The sample ids of ``epoch``, in the order to visit them."""
        raise NotImplementedError
