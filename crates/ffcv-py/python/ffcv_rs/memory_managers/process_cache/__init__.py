"""FFCV's process cache (``ffcv.memory_managers.process_cache``)."""

from .context import ProcessCacheContext
from .manager import ProcessCacheManager

__all__ = ["ProcessCacheManager", "ProcessCacheContext"]
