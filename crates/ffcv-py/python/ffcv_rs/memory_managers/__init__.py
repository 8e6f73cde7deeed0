"""FFCV's memory managers (``ffcv.memory_managers``); see ``base``."""

from .base import MemoryContext, MemoryManager
from .os_cache import OSCacheManager
from .process_cache import ProcessCacheManager

__all__ = ["OSCacheManager", "ProcessCacheManager", "MemoryManager", "MemoryContext"]
