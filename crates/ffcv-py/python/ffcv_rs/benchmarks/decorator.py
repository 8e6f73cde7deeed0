"""FFCV's micro-benchmark registry (``ffcv.benchmarks.decorator``): ``@benchmark({...})``
registers a ``Benchmark`` class with every combination of its parameters, and
``run_all`` times them (median of ``runs`` after ``warm_up`` runs)."""

import itertools
import pathlib
import time
from collections import defaultdict
from typing import Any, Dict, List

import numpy as np

from .benchmark import Benchmark

__all__ = ["ALL_SUITES", "FakeSink", "benchmark", "run_all", "Benchmark"]

ALL_SUITES: Dict[str, Any] = {}


class FakeSink:
    """A file-like object that discards what is written."""

    def write(self, *args: Any) -> None:
        pass

    def writelines(self, *args: Any) -> None:
        pass

    def close(self, *args: Any) -> None:
        pass

    def flush(self, *args: Any) -> None:
        pass


def benchmark(arg_values: Dict[str, List[Any]] = {}):  # noqa: B006 (FFCV's signature)
    """Registers the decorated class with each combination of ``arg_values``."""
    runs = [dict(zip(arg_values, combo)) for combo in itertools.product(*arg_values.values())]

    def register(cls: Any) -> Any:
        ALL_SUITES[cls.__name__] = (cls, runs)
        return cls

    return register


def run_all(runs: int = 3, warm_up: int = 1, pattern: str = "*") -> Dict[str, List[Dict[str, Any]]]:
    """Times every registered benchmark whose name matches ``pattern``: per
    configuration its parameters, the median ``time`` and, with an ``n`` parameter, the
    ``throughput``."""
    results: Dict[str, List[Dict[str, Any]]] = defaultdict(list)
    for name, (cls, configurations) in ALL_SUITES.items():
        if not pathlib.PurePath(name).match(pattern):
            continue
        for args in configurations:
            bench = cls(**args)
            with bench:
                for _ in range(warm_up):
                    bench.run()
                timings = []
                for _ in range(runs):
                    start = time.perf_counter()
                    bench.run()
                    timings.append(time.perf_counter() - start)
            median = float(np.median(timings))
            row = {**args, "time": median}
            if "n" in args and median > 0:
                rate = args["n"] / median
                row["throughput"] = f"{rate:.1f} it/sec" if rate >= 1 else f"{1 / rate:.1f} sec/it"
            results[name].append(row)
    return results
