"""FFCV's ``ffcv.memory_managers.common``: the type of an epoch's batches."""

from typing import Sequence

__all__ = ["BATCHES_TYPE"]

BATCHES_TYPE = Sequence[Sequence[int]]
