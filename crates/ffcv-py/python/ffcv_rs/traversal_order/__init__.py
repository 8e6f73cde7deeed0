"""FFCV's sample orders (``ffcv.traversal_order``)."""

from .quasi_random import QuasiRandom
from .random import Random
from .sequential import Sequential

__all__ = ["Sequential", "Random", "QuasiRandom"]
