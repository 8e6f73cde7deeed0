"""FFCV's page allocator of the writer (``ffcv.memory_allocator``). The Rust writer
(beton-io's ``DatasetWriter``) allocates pages by FFCV's rules; ``MemoryAllocator``
imports but raises on use, ``align_to_page`` is FFCV's helper."""

from ._compat import unsupported
from .utils import align_to_page

__all__ = ["MemoryAllocator", "align_to_page"]

MemoryAllocator = unsupported(
    "ffcv.memory_allocator.MemoryAllocator",
    "ffcv_rs.writer.DatasetWriter allocates pages in Rust; a Field's encode gets its "
    "malloc from the writer")
