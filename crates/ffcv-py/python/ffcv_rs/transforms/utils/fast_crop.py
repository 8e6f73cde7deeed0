"""FFCV's crop helpers (``ffcv.transforms.utils.fast_crop``): crop boxes and the
``INTER_AREA`` resize of a crop, callable from numba-compiled code."""

from ..._crops import get_random_crop
from ...libffcv import ctypes_resize, resize_crop

__all__ = ["resize_crop", "get_random_crop", "get_center_crop", "ctypes_resize"]


def get_center_crop(height, width, ratio):
    """The centre square of side ``int(ratio * min(height, width))`` as ``(i, j, h, w)``."""
    c = int(ratio * min(height, width))
    return (height - c) // 2, (width - c) // 2, c, c
