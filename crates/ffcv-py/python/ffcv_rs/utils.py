"""FFCV's small helpers (``ffcv.utils``), with the same behaviour."""

import threading
from typing import Any, Iterator, Sequence

import numpy as np

__all__ = [
    "align_to_page", "cast_int_to_byte_ptr", "chunks", "decode_null_terminated_string",
    "is_power_of_2", "s_print", "s_print_lock",
]


def chunks(lst: Sequence[Any], n: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of ``lst`` of ``n`` items (the last may be shorter)."""
    for i in range(0, len(lst), n):
        yield lst[i: i + n]


def is_power_of_2(n: int) -> bool:
    """Whether ``n`` is a positive power of two."""
    return n > 0 and (n & (n - 1)) == 0


def align_to_page(ptr: int, page_size: int) -> int:
    """``ptr`` rounded up to a multiple of ``page_size``."""
    if ptr % page_size:
        ptr += page_size - ptr % page_size
    return ptr


def decode_null_terminated_string(bytes_: np.ndarray) -> str:
    """The ASCII text of ``bytes_`` up to its first NUL byte."""
    raw = np.asarray(bytes_, dtype=np.uint8).tobytes()
    end = raw.find(b"\0")
    return raw[: end if end >= 0 else len(raw)].decode("ascii")


def cast_int_to_byte_ptr(value: int) -> Any:
    """``value`` as a ``uint8`` C pointer (``ctypes``)."""
    import ctypes

    return ctypes.cast(value, ctypes.POINTER(ctypes.c_uint8))


s_print_lock = threading.Lock()


def s_print(*args: Any, **kwargs: Any) -> None:
    """``print`` under a lock, so that lines from several threads do not interleave."""
    with s_print_lock:
        print(*args, **kwargs)
