"""A loader over raw or JPEG images, every batch touched (FFCV's ``ImageReadBench``)."""

import os
import tempfile
from typing import Any

import numpy as np

from ...compat_data import FlatImages
from ...fields import BytesField, IntField, RGBImageField
from ...loader import Loader
from ...memory_managers import OSCacheManager
from ...pipeline.compiler import Compiler
from ...reader import Reader
from ...writer import DatasetWriter
from ..benchmark import Benchmark
from ..decorator import benchmark

__all__ = ["ImageReadBench", "DummyDataset", "Benchmark", "BytesField", "IntField",
           "RGBImageField", "Compiler", "DatasetWriter", "OSCacheManager", "Reader",
           "benchmark"]

DummyDataset = FlatImages


@benchmark({"n": [1000], "length": [1000], "mode": ["raw", "jpg"], "compile": [True, False]})
class ImageReadBench(Benchmark):
    """One epoch of ``length`` 64x64 images, batch 100."""

    def __init__(self, n: int, length: int, mode: str, compile: bool):
        self.n, self.length, self.mode, self.compile = n, length, mode, compile

    def __enter__(self) -> "ImageReadBench":
        self.dir = tempfile.TemporaryDirectory()
        name = os.path.join(self.dir.name, "images.beton")
        DatasetWriter(name, {"index": IntField(), "value": RGBImageField(write_mode=self.mode)}
                      ).from_indexed_dataset(FlatImages(self.length, 64, 64), progress=False)
        self.loader = Loader(name, batch_size=100, num_workers=2, compile=self.compile)
        return self

    def run(self) -> None:
        for _, images in self.loader:
            np.asarray(images).sum()

    def __exit__(self, *exc: Any) -> None:
        del self.loader
        self.dir.cleanup()
