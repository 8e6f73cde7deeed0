"""FFCV's ``ProcessCacheContext`` (``ffcv.memory_managers.process_cache.context``)."""

from ...pipeline.compiler import Compiler
from ..base import MemoryContext, MemoryManager
from ..common import BATCHES_TYPE
from ..os_cache import OSCacheContext
from .schedule import Schedule, ScheduleExecutor, compute_schedule

__all__ = [
    "ProcessCacheContext", "BATCHES_TYPE", "MemoryContext", "MemoryManager", "Schedule",
    "ScheduleExecutor", "compute_schedule", "Compiler",
]


class ProcessCacheContext(OSCacheContext):
    """An epoch's access for the process cache. The Rust loader's process cache (page
    slots filled by reader threads in FFCV's schedule) serves ``Loader(os_cache=False)``;
    code that reads the file from Python reads through the map, as with the OS cache."""
