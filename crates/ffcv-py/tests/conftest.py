"""Shared helpers of the ffcv_rs pytest suite: fixture paths and value extraction."""

import hashlib
import json
import os
import pathlib

import numpy as np
import pytest

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "ffcv-1.0.2"
NAMES = ["scalars", "bytes_ndarray", "json", "images_raw", "images_jpg", "multipage", "page_retry"]


def fixture(name: str) -> str:
    return str(FIXTURES / f"{name}.beton")


def expected(name: str) -> dict:
    with open(FIXTURES / f"{name}.expected.json") as f:
        return json.load(f)


def as_numpy(x):
    """A NumPy view of a yielded output (torch tensors through .numpy())."""
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        return x.numpy()
    return np.asarray(x)


def scalar_pairs(batches):
    """{sample id: the value's float64 bits} of batches of the `scalars` fixture (outputs
    `index`, `value`), asserting each sample id comes once."""
    out = {}
    for index, value in batches:
        for i, v in zip(np.asarray(index)[:, 0].tolist(),
                        np.asarray(value).view(np.uint64)[:, 0].tolist()):
            assert i not in out, f"sample {i} twice"
            out[i] = v
    return out


def scalars_expected():
    """{sample id: the value's float64 bits} of the whole `scalars` fixture, from FFCV."""
    return dict(enumerate(int(b) for b in expected("scalars")["outputs"][1]["bits"]))


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def torch_or_skip():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed: run this test in an environment with torch "
                    "(e.g. the reference FFCV venv) to exercise the torch path")
    return torch


@pytest.fixture
def tmp_beton(tmp_path):
    return str(tmp_path / "out.beton")
