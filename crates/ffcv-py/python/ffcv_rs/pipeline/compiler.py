"""FFCV's ``Compiler`` (``ffcv.pipeline.compiler``): the switch between compiled and
interpreted pipelines, the worker thread count, and numba compilation of Python code.

``Compiler.set_enabled(False)`` makes the loaders built afterwards interpret their Rust
pipelines (the interpreter that defines the JIT's semantics) and leaves operations
written in Python uncompiled. ``Compiler.compile(code)`` compiles a Python function
with numba (``njit(nogil=True)``, parallel when the function says ``is_parallel`` and more
than one thread is set) when numba is installed and compilation is enabled; without
numba it returns the function unchanged, which then runs as Python.
"""

import os
import sys
from typing import Any, Callable, Optional

__all__ = ["Compiler"]


def _numba() -> Any:
    try:
        import numba
    except ImportError:
        return None
    return numba


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _set_numba_threads(numba: Any, n: int) -> None:
    # numba refuses more threads than it started with (NUMBA_NUM_THREADS, by default the
    # CPU count), and more threads than CPUs only make its parallel loops wait for each
    # other beside the loader's own workers.
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS, _cpu_count())))


class Compiler:
    """Class-level settings, as in FFCV (no instances)."""

    is_enabled: bool = True
    num_threads: int = 1

    @classmethod
    def set_enabled(cls, b: bool) -> None:
        """Compile pipelines (True, the default) or interpret them (False)."""
        cls.is_enabled = bool(b)

    @classmethod
    def set_num_threads(cls, n: int) -> None:
        """Threads for parallel loops (every CPU of this process for ``n < 1``); also
        numba's, and torch's when torch is imported, as FFCV sets them."""
        n = int(n)
        if n < 1:
            n = _cpu_count()
        cls.num_threads = n
        numba = _numba()
        if numba is not None:
            _set_numba_threads(numba, n)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(n)

    @classmethod
    def use_threads(cls, n: int) -> None:
        """As :meth:`set_num_threads` without touching torch's threads: what a loader
        sets for its Python steps (torch's threads are the training loop's)."""
        n = int(n) if int(n) >= 1 else _cpu_count()
        cls.num_threads = n
        # numba takes a second to import: only a loader with Python steps pays for it
        # (compile() sets numba's threads when it imports numba).
        if "numba" in sys.modules:
            _set_numba_threads(sys.modules["numba"], n)

    @classmethod
    def compile(cls, code: Callable, signature: Optional[Any] = None) -> Callable:
        """``code`` compiled by numba when enabled and installed, else ``code``."""
        numba = _numba()
        # A function marked `_ffcv_rs_python` dispatches itself (compiled code for arrays,
        # torch operations for tensors): compiling it again would fail.
        if not cls.is_enabled or numba is None or getattr(code, "_ffcv_rs_python", False):
            return code
        _set_numba_threads(numba, cls.num_threads)
        parallel = bool(getattr(code, "is_parallel", False)) and cls.num_threads > 1
        return numba.njit(
            signature, fastmath=True, nogil=True, error_model="numpy", parallel=parallel
        )(code)

    @classmethod
    def get_iterator(cls) -> Callable:
        """The range to loop over a batch with: numba's ``prange`` (parallel in compiled
        code, a plain range in Python) with more than one thread, else ``range``."""
        numba = _numba()
        if cls.num_threads > 1 and numba is not None:
            return numba.prange
        return range
