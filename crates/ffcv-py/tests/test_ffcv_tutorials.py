"""FFCV's two custom-transform tutorials run with only their imports changed.

They are FFCV's files, not this repository's: the test runs them from a checkout of
FFCV's repository named by ``FFCV_REPO`` (a work tree or a bare git directory), through
``scripts/run_ffcv_tests.py --tutorials``, and skips with a message without one. They
need torch and torchvision (CIFAR-10 is replaced by a local stand-in) and take a few
minutes: 100 and 20 epochs of 50,000 images each, as FFCV wrote them."""

import os
import subprocess
import sys

import pytest


def test_ffcvs_custom_transform_tutorials_run_unchanged_but_for_imports():
    repo = os.environ.get("FFCV_REPO")
    if not repo:
        pytest.skip("set FFCV_REPO to a checkout of FFCV's repository to run its tutorials")
    pytest.importorskip("torchvision", reason="FFCV's tutorials import torchvision")
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "run_ffcv_tests.py")
    run = subprocess.run([sys.executable, script, "--ffcv-repo", repo, "--python",
                          sys.executable, "--tutorials"], capture_output=True, text=True,
                         timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # Each tutorial prints one line per pipeline, "with" the user's operation and without.
    assert run.stdout.count("Method: with |") == 2 and run.stdout.count("Method: without |") == 2
