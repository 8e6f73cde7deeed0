"""FFCV's transform helpers (``ffcv.transforms.utils``)."""
