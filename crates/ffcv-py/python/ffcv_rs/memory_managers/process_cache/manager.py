"""FFCV's ``ProcessCacheManager`` (``ffcv.memory_managers.process_cache.manager``)."""

from typing import Any

from ...pipeline.compiler import Compiler
from ..base import MemoryContext, MemoryManager
from ..common import BATCHES_TYPE
from ..os_cache import OSCacheManager
from .context import ProcessCacheContext

__all__ = ["ProcessCacheManager", "ProcessCacheContext", "BATCHES_TYPE", "Compiler",
           "MemoryContext", "MemoryManager"]


class ProcessCacheManager(OSCacheManager):
    """FFCV's ``os_cache=False`` manager. ``Loader(os_cache=False)`` uses the Rust
    loader's process cache; this class reads the file from Python through the map (see
    :class:`ProcessCacheContext`), with the same ``schedule_epoch`` / ``compile_reader``
    protocol."""

    def __init__(self, reader: Any):
        super().__init__(reader)
        self.context = ProcessCacheContext(self)
