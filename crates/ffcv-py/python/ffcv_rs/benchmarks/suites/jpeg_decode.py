"""``libffcv.imdecode`` on one photograph-like JPEG at several sizes (FFCV's
``JPEGDecodeBenchmark``)."""

from typing import Any

import numpy as np

from ...fields.rgb_image import encode_jpeg
from ...libffcv import imdecode
from ...pipeline.compiler import Compiler
from ..benchmark import Benchmark
from ..decorator import benchmark

__all__ = ["JPEGDecodeBenchmark", "Benchmark", "Compiler", "benchmark", "imdecode"]


def _smooth_image(height: int, width: int) -> np.ndarray:
    # Gradients and a few edges: compresses like a photograph, not like noise.
    y, x = np.mgrid[0:height, 0:width]
    image = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1),
                      ((x // 16 + y // 16) % 2) * 200], axis=2)
    return image.astype(np.uint8)


@benchmark({"n": [500], "size": [(256, 256), (512, 384)], "quality": [90]})
class JPEGDecodeBenchmark(Benchmark):
    """Decodes the same JPEG ``n`` times."""

    def __init__(self, n: int, size: Any, quality: int):
        self.n, self.size, self.quality = n, size, quality

    def __enter__(self) -> "JPEGDecodeBenchmark":
        h, w = self.size
        self.jpeg = encode_jpeg(_smooth_image(h, w), self.quality)
        self.out = np.empty((h, w, 3), dtype=np.uint8)
        self.decode = Compiler.compile(imdecode)
        return self

    def run(self) -> None:
        h, w = self.size
        for _ in range(self.n):
            self.decode(self.jpeg, self.out, h, w, h, w, 0, 0, 1, 1, False, False)
