"""The crop boxes of FFCV's decoders and ``RandomResizedCrop``, as numba-compilable
Python (the Rust loader has its own, ``rgb-image``'s ``random_resized_crop_box`` and
``center_crop_box``). Kept apart so that fields and transforms share them without
importing each other."""

import numpy as np


def get_random_crop(height, width, scale, ratio):
    """torchvision's RandomResizedCrop box ``(i, j, h, w)``: ten tries at a random area
    fraction in ``scale`` and log-uniform aspect ratio in ``ratio``, then the centre crop
    clamped to ``ratio`` (numba-compilable)."""
    area = height * width
    low, high = np.log(ratio[0]), np.log(ratio[1])
    for _ in range(10):
        target = area * np.random.uniform(scale[0], scale[1])
        aspect = np.exp(np.random.uniform(low, high))
        w = int(round(np.sqrt(target * aspect)))
        h = int(round(np.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            i = int(np.random.uniform(0, height - h + 1))
            j = int(np.random.uniform(0, width - w + 1))
            return i, j, h, w
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio[0], ratio[1]):
        w = width
        h = int(round(w / min(ratio[0], ratio[1])))
    elif in_ratio > max(ratio[0], ratio[1]):
        h = height
        w = int(round(h * max(ratio[0], ratio[1])))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def get_center_crop(height, width, _scale, ratio):
    """The centre square of side ``int(ratio * min(height, width))`` as ``(i, j, h, w)``
    (numba-compilable; ``_scale`` is unused, for the same signature as the random one)."""
    c = int(ratio * min(height, width))
    return (height - c) // 2, (width - c) // 2, c, c
