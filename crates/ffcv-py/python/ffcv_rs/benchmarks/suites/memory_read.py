"""Reading samples' bytes through ``OSCacheManager.compile_reader`` (FFCV's
``MemoryReadBytesBench``)."""

import os
import tempfile
from typing import Any

import numpy as np

from ...compat_data import RandomBytes
from ...fields import BytesField, IntField
from ...libffcv import memcpy
from ...memory_managers import OSCacheManager
from ...pipeline.compiler import Compiler
from ...reader import Reader
from ...writer import DatasetWriter
from ..benchmark import Benchmark
from ..decorator import benchmark

__all__ = ["MemoryReadBytesBench", "DummyDataset", "Benchmark", "BytesField", "IntField",
           "Compiler", "DatasetWriter", "OSCacheManager", "Reader", "benchmark", "memcpy"]

DummyDataset = RandomBytes


@benchmark({"num_samples": [3000], "size_bytes": [32 * 32 * 3, 128 * 1024],
            "random_reads": [True, False], "n": [3000]})
class MemoryReadBytesBench(Benchmark):
    """Reads ``n`` samples of ``size_bytes`` bytes each, at random or in order."""

    def __init__(self, num_samples: int, size_bytes: int, random_reads: bool, n: int):
        self.num_samples, self.size_bytes = num_samples, size_bytes
        self.random_reads, self.n = random_reads, n

    def __enter__(self) -> "MemoryReadBytesBench":
        self.dir = tempfile.TemporaryDirectory()
        name = os.path.join(self.dir.name, "bytes.beton")
        DatasetWriter(name, {"index": IntField(), "value": BytesField()}).from_indexed_dataset(
            RandomBytes(self.num_samples, self.size_bytes), progress=False)
        self.reader = Reader(name)
        manager = OSCacheManager(self.reader)
        self.state = manager.schedule_epoch(np.arange(self.num_samples)).state
        self.read = manager.compile_reader()
        self.copy = Compiler.compile(memcpy)
        self.buffer = np.empty(self.size_bytes, dtype=np.uint8)
        return self

    def run(self) -> None:
        table = self.reader.alloc_table
        rows = np.random.randint(0, len(table), self.n) if self.random_reads else np.arange(self.n) % len(table)
        for ptr in table["ptr"][rows]:
            self.copy(self.read(ptr, self.state), self.buffer)

    def __exit__(self, *exc: Any) -> None:
        self.dir.cleanup()
