"""FFCV's hand-over operations (``ffcv.transforms.ops``): ``ToTensor``, ``ToDevice``,
``ToTorchImage``, ``Convert`` and ``View``.

Where they follow the Rust pipeline directly they only change how a batch is handed
over (a torch tensor viewing the loader's memory, a permuted view, a copy to a device);
after an operation of the user's they run through FFCV's protocol as written here.
"""

from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from .._compat import is_torch_dtype, is_torch_tensor, numpy_dtype, torch_dtype
from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.operation import Operation
from ..pipeline.state import State

__all__ = ["ToTensor", "ToDevice", "ToTorchImage", "Convert", "View",
           "AllocationQuery", "Operation", "State"]


def dtype_name(t: Any) -> str:
    """NumPy's name of a NumPy or torch dtype (``np.float16`` -> ``'float16'``)."""
    if t is None:
        return "float32"
    text = str(t)
    if text.startswith("torch."):
        return text[len("torch."):]
    return np.dtype(t).name


class ToTensor(Operation):
    """Yield this output as a torch tensor (sharing the batch's memory) instead of a NumPy
    array. Without torch installed the output stays a NumPy array."""

    def generate_code(self) -> Callable:
        def to_tensor(inp, dst):
            if is_torch_tensor(inp):
                return inp
            import torch

            return torch.from_numpy(inp)

        to_tensor._ffcv_rs_python = True  # NumPy or torch, not compiled
        return to_tensor

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return replace(previous_state, jit_mode=False, dtype=torch_dtype(previous_state.dtype)), None


class ToDevice(Operation):
    """Move the (torch) output to ``device`` (a copy into a reused buffer there,
    ``non_blocking`` when asked)."""

    def __init__(self, device: Any, non_blocking: bool = True):
        super().__init__()
        self.device = device
        self.non_blocking = bool(non_blocking)

    def generate_code(self) -> Callable:
        non_blocking = self.non_blocking

        def to_device(inp, dst):
            n = inp.shape[0]
            if inp.dim() == 4 and not inp.is_contiguous() and inp.permute(0, 2, 3, 1).is_contiguous():
                # A channels-last view: copy into the same layout (no reordering copy).
                b, c, h, w = dst.shape
                dst = dst.reshape(b, h, w, c).permute(0, 3, 1, 2)
            out = dst[:n]
            out.copy_(inp, non_blocking=non_blocking)
            return out

        to_device._ffcv_rs_python = True  # NumPy or torch, not compiled
        return to_device

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        if previous_state.jit_mode:
            raise ValueError("ToDevice moves torch tensors: it needs a ToTensor before it")
        return (replace(previous_state, device=self.device),
                AllocationQuery(tuple(previous_state.shape), previous_state.dtype, self.device))

    def __repr__(self) -> str:
        return f"ToDevice({self.device!r}, non_blocking={self.non_blocking})"


class ToTorchImage(Operation):
    """``[B, H, W, C]`` images as ``[B, C, H, W]``: with ``channels_last=True`` (FFCV's
    default) a permuted view of the same memory (torch's channels-last format), otherwise
    a contiguous CHW layout (written by the Rust pipeline where it can). int16 images (the
    bits of float16, as FFCV's ``NormalizeImage`` makes them) are viewed as float16 when
    ``convert_back_int16``."""

    def __init__(self, channels_last: bool = True, convert_back_int16: bool = True):
        super().__init__()
        self.channels_last = bool(channels_last)
        self.convert_back_int16 = bool(convert_back_int16)
        self.convert_int16 = self.convert_back_int16
        self.enable_int16conv = False

    def generate_code(self) -> Callable:
        channels_last = self.channels_last
        to_half = self.enable_int16conv

        def to_torch_image(inp, dst):
            if to_half:
                inp = inp.view(dtype=__import__("torch").float16)
            chw = inp.permute(0, 3, 1, 2)
            if channels_last:
                return chw
            out = dst[: inp.shape[0]]
            out.copy_(chw)
            return out

        to_torch_image._ffcv_rs_python = True  # NumPy or torch, not compiled
        return to_torch_image

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        h, w, c = previous_state.shape
        dtype = previous_state.dtype
        if self.convert_back_int16 and str(dtype) == "torch.int16":
            import torch

            dtype = torch.float16
            self.enable_int16conv = True
        alloc = None if self.channels_last else AllocationQuery((c, h, w), dtype, previous_state.device)
        return replace(previous_state, shape=(c, h, w), dtype=dtype), alloc

    def __repr__(self) -> str:
        return f"ToTorchImage(channels_last={self.channels_last})"


class Convert(Operation):
    """Convert to ``target_dtype`` (a NumPy or torch dtype). uint8, int32, int64, float32
    and float64 convert in the loader; other types on the consumer's thread."""

    _native_name = "Convert"

    def __init__(self, target_dtype: Any):
        super().__init__()
        self.target_dtype = target_dtype
        self.dtype_name = dtype_name(target_dtype)
        if self.dtype_name not in ("uint8", "int32", "int64", "float32", "float64"):
            self._native_name = None

    def generate_code(self) -> Callable:
        target = self.target_dtype

        def convert(inp, dst):
            if is_torch_tensor(inp):
                return inp.type(torch_dtype(target))
            return inp.astype(numpy_dtype(target))

        convert._ffcv_rs_python = True  # NumPy or torch, not compiled
        return convert

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        target = self.target_dtype
        if previous_state.jit_mode and is_torch_dtype(target):
            target = numpy_dtype(target)
        return replace(previous_state, dtype=target), None

    def _native_params(self) -> Dict[str, Any]:
        return {"dtype": self.dtype_name}


class View(Operation):
    """Reinterpret the output's bytes as ``target_dtype`` (``ndarray.view`` /
    ``Tensor.view``). At the end of a loader's native part it is a view of the batch the
    loader hands over (no copy); followed by built-in transforms, it runs natively
    (``ffcv::transforms::view``, the last axis rescaled by the item sizes)."""

    _native_name = "View"

    def __init__(self, target_dtype: Any):
        super().__init__()
        self.target_dtype = target_dtype

    def generate_code(self) -> Callable:
        target = self.target_dtype

        def view(inp, dst):
            if is_torch_tensor(inp):
                return inp.view(torch_dtype(target))
            return inp.view(numpy_dtype(target))

        view._ffcv_rs_python = True  # NumPy or torch, not compiled
        return view

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return replace(previous_state, dtype=self.target_dtype, jit_mode=False), None

    def _native_params(self) -> Dict[str, Any]:
        return {"dtype": np.dtype(numpy_dtype(self.target_dtype)).name}

    def __repr__(self) -> str:
        return f"View({self.target_dtype!r})"
