"""FFCV's ``OSCacheManager`` (``ffcv.memory_managers.os_cache``): samples read from a
read-only map of the file, cached by the operating system."""

from typing import Any, Callable, Optional

import numpy as np

from ..pipeline.compiler import Compiler
from .base import MemoryContext, MemoryManager

__all__ = ["OSCacheManager", "OSCacheContext", "MemoryContext", "MemoryManager", "Compiler"]


def _read(address, mem_state):
    # The allocation starting at `address`: its size from the sorted table.
    data, ptrs, sizes = mem_state
    size = sizes[np.searchsorted(ptrs, address)]
    return data[address: address + size]


class OSCacheContext(MemoryContext):
    """The map of the file, opened once; ``state`` is ``(bytes, ptrs, sizes)``."""

    def __init__(self, manager: MemoryManager):
        self.manager = manager
        self.mmap: Optional[np.ndarray] = None

    def _open(self) -> None:
        if self.mmap is None:
            mapped = np.memmap(self.manager.reader.file_name, dtype=np.uint8, mode="r")
            # A plain ndarray view: numba types it as an array, and it keeps the map alive.
            self.mmap = mapped.view(np.ndarray)

    @property
    def state(self) -> Any:
        self._open()
        return (self.mmap, self.manager.ptrs, self.manager.sizes)

    def __enter__(self) -> Any:
        self._open()
        return super().__enter__()

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> Any:
        # The map stays open for later epochs (a map of a read-only file costs nothing).
        return super().__exit__(exc_type, exc_value, traceback)


class OSCacheManager(MemoryManager):
    """Reads through the OS page cache (FFCV's ``os_cache=True``)."""

    def __init__(self, reader: Any):
        super().__init__(reader)
        self.context = OSCacheContext(self)

    def schedule_epoch(self, schedule: Any) -> OSCacheContext:
        """The context for an epoch over ``schedule`` (every page is read on demand)."""
        return self.context

    @property
    def state_type(self) -> Any:
        """numba's type of ``state`` (``(uint8[::1], uint64[::1], uint64[::1])``)."""
        import numba

        data = numba.uint8[::1]
        table = numba.uint64[::1]
        return numba.types.Tuple([data, table, table])

    def compile_reader(self) -> Callable:
        """``read(address, state)``: the bytes of the allocation at ``address``."""
        return Compiler.compile(_read)
