"""FFCV's ``Benchmark`` base (``ffcv.benchmarks.benchmark``): a context manager that sets
up data on entry and times ``run``."""

from abc import ABCMeta, abstractmethod
from contextlib import AbstractContextManager
from typing import Any

__all__ = ["Benchmark"]


class Benchmark(AbstractContextManager, metaclass=ABCMeta):
    """One benchmark configuration; the keyword arguments are its parameters."""

    def __init__(self, **kwargs: Any):
        pass

    @abstractmethod
    def run(self) -> None:
        raise NotImplementedError

    def __exit__(self, *exc: Any) -> None:
        return None
