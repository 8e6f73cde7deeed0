"""FFCV's micro-benchmark suites (``ffcv.benchmarks.suites``), registered on import."""

from . import image_read, jpeg_decode, memory_read  # noqa: F401 (registers the suites)
