"""FFCV's ``NormalizeImage`` (``ffcv.transforms.normalize``)."""

from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from .._compat import is_torch_tensor, torch_dtype
from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ._native_code import native_protocol
from .ops import dtype_name

__all__ = ["NormalizeImage", "ch_dtype_from_numpy", "AllocationQuery", "Compiler",
           "Operation", "State"]


def ch_dtype_from_numpy(dtype: Any) -> Any:
    """The torch dtype of a NumPy dtype."""
    return torch_dtype(dtype)


@native_protocol
class NormalizeImage(Operation):
    """``(x - mean[c]) / std[c]`` per channel of ``uint8`` images, as ``type`` (float16,
    float32 or float64): each of the 256 values per channel computed in float64 and
    rounded once, as FFCV's lookup table is. One mean and std per channel: 3 for RGB, 1
    or 4 for an ``ImageField``'s kinds, whose ``uint16`` images the Rust loader
    normalizes directly in float64. The Rust loader outputs ``type`` directly
    (FFCV's CPU path gives the int16 bits of float16, which ``View(np.float16)`` or
    ``ToTorchImage`` turn back; both give the same values)."""

    _native_name = "NormalizeImage"

    def __init__(self, mean: Sequence[float], std: Sequence[float], type: Any = np.float32):
        super().__init__()
        self.mean = [float(x) for x in np.asarray(mean, dtype=np.float64).reshape(-1)]
        self.std = [float(x) for x in np.asarray(std, dtype=np.float64).reshape(-1)]
        # One value per channel: 3 for RGB, 1 or 4 for an ImageField's gray and RGBA.
        if len(self.mean) not in (1, 3, 4) or len(self.std) != len(self.mean):
            raise ValueError("NormalizeImage: mean and std need one value per channel "
                             "(3 for RGB; 1 or 4 for ImageField's kinds), as many of each")
        self.type = dtype_name(type)
        if self.type not in ("float16", "float32", "float64"):
            raise ValueError(f"NormalizeImage: type {self.type} is not a float type")
        values = (np.arange(256, dtype=np.float64)[:, None] - np.array(self.mean)) / np.array(self.std)
        self.lookup_table = np.ascontiguousarray(values.astype(self.type))
        self.dtype = np.dtype(self.type)

    def generate_code(self) -> Callable:
        table = self.lookup_table
        loop = Compiler.get_iterator()
        nc = len(self.mean)

        def normalize(images, result):
            n = images.shape[0]
            flat_in = images.reshape(n, -1, nc)
            flat_out = result[:n].reshape(n, -1, nc)
            for i in loop(n):
                for px in range(flat_in.shape[1]):
                    for c in range(nc):
                        flat_out[i, px, c] = table[flat_in[i, px, c], c]
            return result[:n]

        normalize.is_parallel = True
        compiled = Compiler.compile(normalize)
        vectorised = compiled is normalize  # no numba (or disabled): NumPy indexing
        channels = np.arange(nc)
        torch_table = {}

        def normalize_any(images, result):
            if not is_torch_tensor(images):
                if vectorised:
                    out = result[: images.shape[0]]
                    out[...] = table[images, channels]
                    return out
                return compiled(images, result)
            # A torch tensor (after ToTensor, maybe on a GPU, maybe [B, C, H, W]).
            key = (str(images.device),)
            if key not in torch_table:
                import torch

                torch_table[key] = torch.from_numpy(table).to(images.device)
            t = torch_table[key]
            channel_axis = 1 if images.dim() == 4 and images.shape[1] == nc and images.shape[-1] != nc else -1
            out = result[: images.shape[0]]
            idx = images.long()
            for c in range(nc):
                src = idx.select(channel_axis, c)
                out.select(channel_axis, c).copy_(t[:, c][src])
            return out

        normalize_any._ffcv_rs_python = True
        return normalize_any

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        if previous_state.jit_mode:
            state = replace(previous_state, jit_mode=True, dtype=self.dtype)
            return state, AllocationQuery(tuple(previous_state.shape), self.dtype)
        dtype = torch_dtype(self.dtype)
        return (replace(previous_state, dtype=dtype),
                AllocationQuery(tuple(previous_state.shape), dtype, previous_state.device))

    def _native_params(self) -> Dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "dtype": self.type}
