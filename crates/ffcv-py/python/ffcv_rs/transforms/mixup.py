"""FFCV's mixup (``ffcv.transforms.mixup``): ``ImageMixup`` and ``LabelMixup`` pair each
sample with the previous one in its batch (the first with the last) and mix them with
weight ``lam ~ Beta(alpha, alpha)``; ``MixupToOneHot`` turns mixed labels into one-hot
targets.

Mixing pairs samples of one batch, so it is a batch-level step: it runs after the
loader's per-sample pipeline, natively (``ffcv::transforms::mixup``, the GIL released).
``lam`` is drawn from (seed, epoch, sample), the same generator for a sample's image and
label whatever the pipeline, so the two pipelines agree and a resumed run repeats its
draws. (FFCV seeds NumPy's generator with the batch's last sample id, the same draws
every epoch.) With ``same_lambda`` the batch takes the draw of its last sample.
Code that drives these operations itself, without a loader, draws with seed and epoch 0.
"""

from dataclasses import replace
from typing import Any, Callable, Optional, Sequence, Tuple

import numpy as np

from .._compat import is_torch_tensor
from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State

__all__ = ["ImageMixup", "LabelMixup", "MixupToOneHot", "AllocationQuery", "Compiler",
           "Operation", "State"]

#: Element types the native functions take (pipeline-jit's).
_NATIVE = ("uint8", "uint16", "int32", "int64", "float16", "float32", "float64")


def _check(alpha: float) -> float:
    alpha = float(alpha)
    if not alpha > 0 or not np.isfinite(alpha):
        raise ValueError(f"mixup: alpha {alpha} must be positive and finite")
    return alpha


def _cpu_array(x: Any) -> Optional[np.ndarray]:
    """``x`` (an array, or a torch tensor in CPU memory) as a C-contiguous NumPy array over
    the same memory, or ``None`` when it is not one."""
    if is_torch_tensor(x):
        if x.device.type != "cpu" or not x.is_contiguous():
            return None
        x = x.numpy()
    if isinstance(x, np.ndarray) and x.flags.c_contiguous:
        return x
    return None


def lambdas(seed: int, epoch: int, indices: Sequence[int], alpha: float, same: bool) -> np.ndarray:
    """The mixing weights of the batch ``indices`` (float64), as the loader draws them."""
    from .. import _native

    return np.asarray(_native.mixup_lambdas(int(seed), int(epoch), [int(i) for i in indices],
                                            float(alpha), bool(same)), dtype=np.float64)


def _context(context: Optional[Tuple[int, int]]) -> Tuple[int, int]:
    return (0, 0) if context is None else context


class ImageMixup(Operation):
    """``dst[i] = lam[i] * x[i] + (1 - lam[i]) * x[i - 1]`` computed in float64 and
    stored as the image dtype (integers truncated), as FFCV's compiled code does; one
    ``lam`` for the batch with ``same_lambda``."""

    def __init__(self, alpha: float, same_lambda: bool):
        super().__init__()
        self.alpha = _check(alpha)
        self.same_lambda = bool(same_lambda)

    def generate_code(self) -> Callable:
        from .. import _native

        alpha, same = self.alpha, self.same_lambda

        def mix_images(images, dst, indices, context=None):
            n = len(images)
            lam = lambdas(*_context(context), indices, alpha, same)
            x = _cpu_array(images) if is_torch_tensor(images) else np.ascontiguousarray(images)
            out = _cpu_array(dst[:n])
            if x is not None and out is not None and x.dtype == out.dtype \
                    and x.dtype.name in _NATIVE and x.shape == out.shape:
                _native.image_mixup(x.ctypes.data, x.nbytes, out.ctypes.data, out.nbytes,
                                    x.dtype.name, lam.tolist())
                return dst[:n]
            # Tensors on a device, or types the native code lacks: the same formula.
            return _mix_elsewhere(images, dst[:n], lam)

        mix_images.with_indices = True
        mix_images._ffcv_rs_python = True  # native; not compiled again
        mix_images._ffcv_rs_context = True  # takes the loader's (seed, epoch)
        return mix_images

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return previous_state, AllocationQuery(tuple(previous_state.shape), previous_state.dtype,
                                               previous_state.device)


def _mix_elsewhere(images: Any, dst: Any, lam: np.ndarray) -> Any:
    """ImageMixup's formula with torch (any device) or NumPy operations."""
    shape = (len(lam),) + (1,) * (len(images.shape) - 1)
    if is_torch_tensor(images):
        import torch

        w = torch.from_numpy(lam.reshape(shape)).to(images.device)
        mixed = w * images.double() + (1 - w) * torch.roll(images, 1, 0).double()
        dst.copy_(mixed if dst.is_floating_point() else mixed.trunc())
        return dst
    w = lam.reshape(shape)
    dst[...] = (w * images + (1 - w) * np.roll(images, 1, axis=0)).astype(dst.dtype)
    return dst


class LabelMixup(Operation):
    """The labels of :class:`ImageMixup`: ``float32 [B, 3]`` rows ``(label, label of the
    previous sample, lam)``. Build it with the same ``alpha`` and ``same_lambda``."""

    def __init__(self, alpha: float, same_lambda: bool):
        super().__init__()
        self.alpha = _check(alpha)
        self.same_lambda = bool(same_lambda)

    def generate_code(self) -> Callable:
        from .. import _native

        alpha, same = self.alpha, self.same_lambda

        def mix_labels(labels, dst, indices, context=None):
            n = len(labels)
            lam = lambdas(*_context(context), indices, alpha, same)
            x = _cpu_array(labels) if is_torch_tensor(labels) else np.ascontiguousarray(labels)
            out = _cpu_array(dst[:n])
            if x is not None and out is not None and x.dtype.name in _NATIVE and x.ndim == 2:
                _native.label_mixup(x.ctypes.data, x.nbytes, x.dtype.name, out.ctypes.data,
                                    out.nbytes, lam.tolist())
                return dst[:n]
            rows = np.empty((n, 3), dtype=np.float32)
            first = np.asarray(labels.cpu() if is_torch_tensor(labels) else labels)[:, 0]
            rows[:, 0], rows[:, 1], rows[:, 2] = first, np.roll(first, 1), lam
            if is_torch_tensor(dst):
                import torch

                dst[:n].copy_(torch.from_numpy(rows))
            else:
                dst[:n] = rows
            return dst[:n]

        mix_labels.with_indices = True
        mix_labels._ffcv_rs_python = True  # native; not compiled again
        mix_labels._ffcv_rs_context = True  # takes the loader's (seed, epoch)
        return mix_labels

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        dtype = np.dtype("float32")  # FFCV's, torch state or not
        return (replace(previous_state, shape=(3,), dtype=dtype),
                AllocationQuery((3,), dtype, previous_state.device))


class MixupToOneHot(Operation):
    """Mixed labels (torch ``[B, 3]`` from :class:`LabelMixup` and ``ToTensor``) as
    ``[B, num_classes]`` targets: ``lam`` at the first label, ``1 - lam`` at the second
    (which wins where the two are the same class, as in FFCV). Native for tensors in CPU
    memory, torch operations on a device."""

    def __init__(self, num_classes: int):
        super().__init__()
        self.num_classes = int(num_classes)
        if self.num_classes <= 0:
            raise ValueError(f"MixupToOneHot: num_classes {num_classes} must be positive")

    def generate_code(self) -> Callable:
        from .. import _native

        classes = self.num_classes

        def one_hot(mixed, dst):
            n = mixed.shape[0]
            out = dst[:n]
            x, o = _cpu_array(mixed), _cpu_array(out)
            if x is not None and o is not None and x.dtype == np.float32 \
                    and o.dtype == np.float32:
                _native.mixup_to_one_hot(x.ctypes.data, x.nbytes, classes, o.ctypes.data, o.nbytes)
                return out
            import torch

            out.zero_()
            rows = torch.arange(n, device=mixed.device)
            lam = mixed[:, 2].to(out.dtype)
            out[rows, mixed[:, 0].long()] = lam
            out[rows, mixed[:, 1].long()] = 1 - lam
            return out

        one_hot._ffcv_rs_python = True  # native or torch; not compiled
        return one_hot

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        if previous_state.jit_mode:
            raise ValueError("MixupToOneHot works on torch tensors: put ToTensor before it")
        return (replace(previous_state, shape=(self.num_classes,)),
                AllocationQuery((self.num_classes,), previous_state.dtype, previous_state.device))
