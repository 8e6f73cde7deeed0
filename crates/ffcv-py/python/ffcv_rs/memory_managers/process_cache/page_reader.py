"""FFCV's page reader threads (``ffcv.memory_managers.process_cache.page_reader``). The
Rust loader's reader threads fill the process cache; ``read`` is ``libffcv.read``."""

from ..._compat import unsupported
from ...libffcv import read

__all__ = ["PageReader", "read"]

PageReader = unsupported(
    "ffcv.memory_managers.process_cache.page_reader.PageReader",
    "the Rust loader's page-reader threads fill the process cache: set their count with "
    "Loader(os_cache=False, reader_threads=N)")
