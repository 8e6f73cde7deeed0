"""FFCV's ``DatasetWriter`` (``ffcv.writer``) over the Rust writer.

``DatasetWriter(fname, fields).from_indexed_dataset(dataset)`` writes ``dataset[i]`` for
every ``i`` (each item a tuple with one value per field, in the order of ``fields``). The
Rust writer threads ask Python for one item at a time; pages, JPEG encoding and the file
itself are written without the GIL. With ``num_workers=1`` the file is byte-identical to
FFCV 1.0.2's with one worker.
"""

import os
import sys
from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np

from . import _native
from .fields import Field

__all__ = ["DatasetWriter"]

MIN_PAGE_SIZE = 1 << 21


class _Progress:
    """tqdm when installed (FFCV's bar), else a line on stderr every ~5 %."""

    def __init__(self, total: int, enabled: bool):
        self.total = total
        self.bar = None
        self.last = -1
        self.enabled = enabled and total > 0
        if not self.enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self.bar = tqdm(total=total)

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            return
        step = done * 20 // self.total
        if step != self.last:
            self.last = step
            print(f"\rffcv_rs: {done}/{self.total} samples", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            print(file=sys.stderr)


class DatasetWriter:
    """Writes a ``.beton`` file with ``fields`` (a mapping of names to
    :mod:`ffcv_rs.fields` instances, in order)."""

    def __init__(
        self,
        fname: str,
        fields: Mapping[str, Field],
        page_size: int = 4 * MIN_PAGE_SIZE,
        num_workers: int = -1,
    ):
        if not fields:
            raise ValueError("DatasetWriter needs at least one field")
        for name, field in fields.items():
            if not isinstance(field, Field):
                raise TypeError(f"field {name!r}: {field!r} is not an ffcv_rs.fields field")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int):
            raise TypeError("num_workers must be an int")
        if num_workers == 0 or num_workers < -1:
            raise ValueError(f"num_workers must be -1 (every CPU) or at least 1, got {num_workers}")
        self.fname = os.fspath(fname)
        self.fields: Dict[str, Field] = dict(fields)
        self.page_size = int(page_size)
        self.num_workers = num_workers

    def from_indexed_dataset(
        self,
        dataset: Any,
        indices: Optional[Sequence[int]] = None,
        chunksize: int = 100,
        shuffle_indices: bool = False,
        progress: bool = True,
    ) -> None:
        """Writes ``dataset[indices[i]]`` as sample ``i`` (all of ``dataset`` by default;
        ``shuffle_indices`` shuffles them first with NumPy's global generator, as FFCV)."""
        if indices is None:
            order = np.arange(len(dataset))
        else:
            order = np.asarray(indices, dtype=np.int64).reshape(-1)
        if shuffle_indices:
            order = order.copy()
            np.random.shuffle(order)
        order_list = [int(i) for i in order]
        fields = list(self.fields.items())

        def get(i: int):
            item = dataset[order_list[i]]
            if not isinstance(item, (tuple, list)):
                item = (item,)
            if len(item) != len(fields):
                raise ValueError(
                    f"dataset item {order_list[i]} has {len(item)} values for {len(fields)} fields"
                )
            return [field._plain(value) for (_, field), value in zip(fields, item)]

        specs = [(name, field._kind, field._writer_params()) for name, field in fields]
        bar = _Progress(len(order_list), progress)
        try:
            _native.write_dataset(
                self.fname, specs, get, len(order_list), self.page_size,
                0 if self.num_workers == -1 else self.num_workers, int(chunksize), bar,
            )
        finally:
            bar.close()
