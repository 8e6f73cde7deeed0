"""FFCV's ``State`` (``ffcv.pipeline.state``): what a pipeline stage hands the next one."""

from dataclasses import dataclass
from typing import Any, Tuple

__all__ = ["State"]


def _is_cpu(device: Any) -> bool:
    return device is None or str(device) == "cpu"


def _is_torch_dtype(dtype: Any) -> bool:
    return type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype"


@dataclass
class State:
    """The per-sample ``shape`` and ``dtype`` of a stage's output, where it lives
    (``device``) and whether the next operation runs in compiled code (``jit_mode``: NumPy
    arrays on the CPU) or on torch tensors."""

    jit_mode: bool
    device: Any
    shape: Tuple[int, ...]
    dtype: Any

    def __post_init__(self) -> None:
        # FFCV's validity rules: compiled code sees only NumPy arrays on the CPU.
        if self.jit_mode and not _is_cpu(self.device):
            raise AssertionError("Can't be in JIT mode and on the GPU")
        if self.jit_mode and _is_torch_dtype(self.dtype):
            raise AssertionError("Can't allocate a torch tensor in JIT mode")
