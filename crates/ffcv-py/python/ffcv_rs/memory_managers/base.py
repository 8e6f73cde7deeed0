"""FFCV's memory-manager protocol (``ffcv.memory_managers.base``): where sample bytes come
from, for code that reads a ``.beton`` file itself (a decoder's ``generate_code`` reads
through ``memory_read``, the function ``compile_reader()`` returns).

The Rust loader has its own page caches (``os_cache`` and the process cache); these
classes serve the Python side: FFCV code that drives a manager directly, and decoders
that run in Python. They read through a read-only map of the file.
"""

from abc import ABC, ABCMeta, abstractmethod
from collections import defaultdict
from contextlib import AbstractContextManager
from typing import Any, Callable, Dict, Sequence, Set

import numpy as np

from ..pipeline.compiler import Compiler
from ..reader import Reader

__all__ = ["MemoryManager", "MemoryContext", "Compiler", "Reader"]


class MemoryContext(AbstractContextManager, metaclass=ABCMeta):
    """An epoch's access to the data: ``state`` is what ``memory_read`` takes."""

    @property
    @abstractmethod
    def state(self) -> Any:
        raise NotImplementedError

    @abstractmethod
    def __enter__(self) -> Any:
        return super().__enter__()

    def start_batch(self, batch: int) -> None:
        """Called before each batch (prefetching managers use it)."""

    @abstractmethod
    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> Any:
        return super().__exit__(exc_type, exc_value, traceback)


class MemoryManager(ABC):
    """A manager over ``reader``: ``ptrs`` and ``sizes`` are the allocation table sorted
    by address (``memory_read`` looks a pointer up there)."""

    def __init__(self, reader: Reader):
        self.reader = reader
        table = reader.alloc_table
        # By address, and at one address the largest allocation first: a zero-length
        # allocation may share its address with the next one, and `memory_read` finds the
        # first entry at an address (decoders then cut the bytes to the sample's length).
        order = np.lexsort((-table["size"].astype(np.int64), table["ptr"]))
        self.ptrs = np.ascontiguousarray(table["ptr"][order], dtype=np.uint64)
        self.sizes = np.ascontiguousarray(table["size"][order], dtype=np.uint64)
        self._pages: Any = None
        super().__init__()

    @property
    def ptr_to_size(self) -> Dict[int, int]:
        """Each allocation's size by its address."""
        return dict(zip(self.ptrs.tolist(), self.sizes.tolist()))

    def _page_maps(self) -> Any:
        # Built on first use: a Python dict per sample costs seconds on large files.
        if self._pages is None:
            shift = int(self.reader.page_size).bit_length() - 1
            pages = (self.reader.alloc_table["ptr"] >> np.uint64(shift)).tolist()
            sample_to_pages: Dict[int, Set[int]] = defaultdict(set)
            page_to_samples: Dict[int, Set[int]] = defaultdict(set)
            for sid, pid in zip(self.reader.alloc_table["sample_id"].tolist(), pages):
                sample_to_pages[sid].add(pid)
                page_to_samples[pid].add(sid)
            self._pages = (sample_to_pages, page_to_samples)
        return self._pages

    @property
    def sample_to_pages(self) -> Dict[int, Set[int]]:
        """The pages each sample's data lies on."""
        return self._page_maps()[0]

    @property
    def page_to_samples(self) -> Dict[int, Set[int]]:
        """The samples whose data lies on each page."""
        return self._page_maps()[1]

    @abstractmethod
    def schedule_epoch(self, batches: Sequence[Sequence[int]]) -> MemoryContext:
        raise NotImplementedError

    @abstractmethod
    def compile_reader(self) -> Callable:
        raise NotImplementedError

    @property
    @abstractmethod
    def state_type(self) -> Any:
        raise NotImplementedError
