"""Helpers shared by the FFCV-compatible modules: dtype conversions between NumPy and
torch (torch imported only when present), and FFCV internals that have no counterpart
here, which import but raise on use with the ffcv_rs way to do the same."""

import sys
from typing import Any

import numpy as np

from .errors import FFCVError


def torch_module() -> Any:
    """torch when it is installed (imported on first need), else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def is_torch_dtype(dtype: Any) -> bool:
    return type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype"


def is_torch_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def numpy_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype of a NumPy or torch dtype."""
    if is_torch_dtype(dtype):
        import torch

        return torch.empty(0, dtype=dtype).numpy().dtype
    return np.dtype(dtype)


def torch_dtype(dtype: Any) -> Any:
    """The torch dtype of a NumPy or torch dtype (the NumPy dtype without torch: the
    hand-over then gives NumPy arrays)."""
    if is_torch_dtype(dtype):
        return dtype
    torch = torch_module()
    if torch is None:
        return np.dtype(dtype)

    return torch.from_numpy(np.empty(0, dtype=np.dtype(dtype))).dtype


class UnsupportedInternal(FFCVError, NotImplementedError):
    """An FFCV internal that ffcv_rs has no counterpart for was used."""


def unsupported(qualname: str, instead: str):
    """A class named like FFCV's internal ``qualname`` whose construction (or call)
    raises :class:`UnsupportedInternal` naming the ffcv_rs way (``instead``)."""
    name = qualname.rsplit(".", 1)[-1]

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise UnsupportedInternal(
            f"{qualname} is an FFCV internal with no counterpart in ffcv_rs: {instead}"
        )

    cls = type(name, (), {"__init__": refuse, "__doc__": f"FFCV's {qualname}: {instead}"})
    return cls


def unsupported_function(qualname: str, instead: str):
    """A function named like FFCV's ``qualname`` that raises on call (see
    :func:`unsupported`)."""

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise UnsupportedInternal(
            f"{qualname} is an FFCV internal with no counterpart in ffcv_rs: {instead}"
        )

    refuse.__name__ = qualname.rsplit(".", 1)[-1]
    refuse.__doc__ = f"FFCV's {qualname}: {instead}"
    return refuse
