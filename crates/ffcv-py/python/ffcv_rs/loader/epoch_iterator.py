"""One epoch of a :class:`ffcv_rs.loader.Loader` (FFCV's ``ffcv.loader.epoch_iterator``).

The Rust loader prepares batches ahead on its own threads; ``__next__`` waits for the
next one with the GIL released, then runs the outputs' Python steps (if any) on the
calling thread. Starting another epoch ends this one; freeing the iterator (the end of a
``for`` loop, an exception in its body) frees its native ``Epoch``, which stops the epoch
and joins its threads.
"""

import sys
from typing import TYPE_CHECKING, Any, Iterator, Optional, Sequence, Tuple

import numpy as np

from ..pipeline.compiler import Compiler
from ..traversal_order.quasi_random import QuasiRandom
from ..utils import chunks

if TYPE_CHECKING:
    from .loader import Loader

__all__ = ["EpochIterator", "select_buffer", "IS_CUDA", "QUASIRANDOM_ERROR_MSG",
           "Compiler", "QuasiRandom", "chunks"]

QUASIRANDOM_ERROR_MSG = (
    "Not enough memory for the process cache: try order=OrderOption.QUASI_RANDOM, a "
    "smaller batches_ahead, or max_memory"
)


def _cuda_available() -> bool:
    # Only a torch the program imported itself: importing ffcv_rs never imports torch.
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available())


#: FFCV's flag: whether CUDA is usable (as seen when ffcv_rs was imported).
IS_CUDA = _cuda_available()


def select_buffer(buffer: Any, batch_slot: int, count: int) -> Any:
    """FFCV's helper: the first ``count`` samples of slot ``batch_slot`` of a buffer of
    ``[slots, batch, ...]`` (or of each in a tuple)."""
    if buffer is None:
        return None
    if isinstance(buffer, tuple):
        return tuple(select_buffer(x, batch_slot, count) for x in buffer)
    return buffer[batch_slot][:count]


def _hand_over_plan(loader: "Loader") -> Optional[Tuple[Tuple[int, int, Any], ...]]:
    """The plan of ``_native.Loader.next_outputs`` when every output is a host output of
    the Rust loader that Python only converts (a tensor or array over the slot, hand-over
    steps included), else ``None``: then ``__next__`` takes the views and runs each
    output's :class:`~ffcv_rs.loader.plan.OutputPlan`."""
    if getattr(loader, "_cuda_device", None) is not None:
        return None  # device outputs are handed over with DLPack's stream handshake
    kinds = [kind for _, _, _, kind in loader._native.outputs()]
    entries = [plan.native_hand_over(loader._torch, kinds) for plan in loader._output_plans]
    if any(e is None for e in entries):
        return None
    return tuple(entries)


class EpochIterator:
    """One epoch; see the module docs."""

    def __init__(self, loader: "Loader", order: Sequence[int] = ()):
        self._loader = loader
        self._native = loader._native
        self._plans = loader._output_plans
        self._torch = loader._torch
        self._with_ids = loader._needs_indices
        self._seed = loader.seed
        self._epoch = loader.next_epoch  # the epoch start_epoch runs
        self._hand_over = None if self._with_ids else _hand_over_plan(loader)
        # The epoch stops when this native handle is freed (with the iterator, or at once
        # if a Ctrl-C is raised as `start_epoch` returns). No `__del__` here: Python drops
        # a `KeyboardInterrupt` raised inside a finalizer.
        self._handle = self._native.start_epoch()
        self._id = self._handle.id

    def __iter__(self) -> "EpochIterator":
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def __next__(self) -> Tuple[Any, ...]:
        plan = self._hand_over
        if plan is not None:
            # Every output is the Rust loader's, converted: one native call per batch.
            batch = self._native.next_outputs(self._id, plan)
            if batch is None:
                raise StopIteration
            return batch
        if self._with_ids:
            got = self._native.next_batch_with_ids(self._id)
            if got is None:
                raise StopIteration
            views, ids = got
            indices = np.asarray(ids, dtype=np.uint64)
        else:
            views = self._native.next_batch(self._id)
            if views is None:
                raise StopIteration
            indices = None
        torch = self._torch
        return tuple(plan.make(views, indices, torch, self._seed, self._epoch)
                     for plan in self._plans)

    def close(self) -> None:
        """Stops the epoch now (held batches stay valid)."""
        self._handle.stop()
