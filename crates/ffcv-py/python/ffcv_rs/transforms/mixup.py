"""FFCV's mixup (``ffcv.transforms.mixup``): ``ImageMixup`` and ``LabelMixup`` pair each
sample with the previous one in its batch (the first with the last) and mix them with
weight ``lam ~ Beta(alpha, alpha)``, drawn from a generator seeded with the batch's last
sample id, so the image and label pipelines draw the same ``lam``; ``MixupToOneHot``
turns mixed labels into one-hot targets."""

from dataclasses import replace
from typing import Any, Callable, Optional, Tuple

import numpy as np

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State

__all__ = ["ImageMixup", "LabelMixup", "MixupToOneHot", "AllocationQuery", "Compiler",
           "Operation", "State"]


def _lambdas(seed, alpha, same, n):
    """The batch's mixing weights: ``n`` draws of Beta(alpha, alpha), or one repeated,
    from the generator seeded with ``seed`` (numba-compilable)."""
    np.random.seed(seed)
    if same:
        return np.full(n, np.random.beta(alpha, alpha))
    return np.random.beta(alpha, alpha, n)


def _check(alpha: float) -> float:
    alpha = float(alpha)
    if not alpha > 0:
        raise ValueError(f"mixup: alpha {alpha} must be positive")
    return alpha


class ImageMixup(Operation):
    """``dst[i] = lam[i] * x[i] + (1 - lam[i]) * x[i - 1]`` (one ``lam`` for the batch
    with ``same_lambda``), stored as the image dtype (truncated, as FFCV)."""

    def __init__(self, alpha: float, same_lambda: bool):
        super().__init__()
        self.alpha = _check(alpha)
        self.same_lambda = bool(same_lambda)

    def generate_code(self) -> Callable:
        alpha, same = self.alpha, self.same_lambda
        loop = Compiler.get_iterator()
        draw = Compiler.compile(_lambdas)

        def mix_images(images, dst, indices):
            n = images.shape[0]
            lam = draw(indices[n - 1], alpha, same, n)
            for i in loop(n):
                dst[i] = lam[i] * images[i] + (1 - lam[i]) * images[i - 1]
            return dst[:n]

        mix_images.is_parallel = True
        mix_images.with_indices = True
        return mix_images

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return previous_state, AllocationQuery(tuple(previous_state.shape), previous_state.dtype)


class LabelMixup(Operation):
    """The labels of :class:`ImageMixup`: ``float32 [B, 3]`` rows ``(label, label of the
    previous sample, lam)``. Build it with the same ``alpha`` and ``same_lambda``."""

    def __init__(self, alpha: float, same_lambda: bool):
        super().__init__()
        self.alpha = _check(alpha)
        self.same_lambda = bool(same_lambda)

    def generate_code(self) -> Callable:
        alpha, same = self.alpha, self.same_lambda
        loop = Compiler.get_iterator()
        draw = Compiler.compile(_lambdas)

        def mix_labels(labels, dst, indices):
            n = labels.shape[0]
            lam = draw(indices[n - 1], alpha, same, n)
            for i in loop(n):
                dst[i, 0] = labels[i, 0]
                dst[i, 1] = labels[i - 1, 0]
                dst[i, 2] = lam[i]
            return dst[:n]

        mix_labels.is_parallel = True
        mix_labels.with_indices = True
        return mix_labels

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return (replace(previous_state, shape=(3,), dtype=np.dtype("float32")),
                AllocationQuery((3,), np.dtype("float32")))


class MixupToOneHot(Operation):
    """Mixed labels (torch ``[B, 3]`` from :class:`LabelMixup` and ``ToTensor``) as
    ``[B, num_classes]`` targets: ``lam`` at the first label, ``1 - lam`` at the second
    (which wins where the two are the same class, as in FFCV)."""

    def __init__(self, num_classes: int):
        super().__init__()
        self.num_classes = int(num_classes)
        if self.num_classes <= 0:
            raise ValueError(f"MixupToOneHot: num_classes {num_classes} must be positive")

    def generate_code(self) -> Callable:
        def one_hot(mixed, dst):
            import torch

            n = mixed.shape[0]
            out = dst[:n]
            out.zero_()
            rows = torch.arange(n, device=mixed.device)
            lam = mixed[:, 2].to(out.dtype)
            out[rows, mixed[:, 0].long()] = lam
            out[rows, mixed[:, 1].long()] = 1 - lam
            return out

        one_hot._ffcv_rs_python = True  # NumPy or torch, not compiled
        return one_hot

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        if previous_state.jit_mode:
            raise ValueError("MixupToOneHot works on torch tensors: put ToTensor before it")
        return (replace(previous_state, shape=(self.num_classes,)),
                AllocationQuery((self.num_classes,), previous_state.dtype, previous_state.device))
