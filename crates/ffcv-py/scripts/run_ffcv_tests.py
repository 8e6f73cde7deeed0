"""Runs FFCV's own test suite against ffcv_rs (or against FFCV itself, to compare).

FFCV's tests are not part of this repository: this script takes them from a checkout of
FFCV's repository, copies them into a scratch folder, rewrites only their imports
(``ffcv`` -> ``ffcv_rs``; torchvision's ``CIFAR10``, which downloads, -> a local stand-in
of the same interface), and runs pytest there with the interpreter given::

    python crates/ffcv-py/scripts/run_ffcv_tests.py --ffcv-repo PATH \\
        --python ~/.cache/ffcv-anchors/venv/bin/python [--package ffcv] [-- PYTEST ARGS]

``PATH`` is a work tree or a bare git directory (its ``HEAD`` is used). With
``--package ffcv`` the imports keep FFCV's name (the baseline run); the default is
``ffcv_rs``, found on ``PYTHONPATH`` through ``crates/ffcv-py/python`` (built there by
``maturin develop``). The interpreter needs pytest, assertpy, torch and torchvision,
as FFCV's tests import them. The summary line of each run is printed last.

``--tutorials`` runs FFCV's two custom-transform tutorials instead
(``examples/docs_examples/custom_transform.py`` and ``transform_with_inds.py``), imports
rewritten the same way; torchvision's ``CIFAR10`` (which they call as
``torchvision.datasets.CIFAR10``) is replaced by the stand-in through a
``sitecustomize`` module, so their text changes only in the imports. They print their
time per epoch, which is the speed comparison of a numba ``Operation`` (run once with
``--package ffcv`` for FFCV's figure).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE_DIR = HERE.parent / "python"

# The CIFAR-10 stand-in: torchvision's interface (root, train, download, transform),
# 50,000 deterministic 32x32 RGB images with smooth structure and labels 0..9.
STANDIN = '''"""A local stand-in for torchvision's CIFAR10 (nothing can be downloaded here)."""
import numpy as np
from PIL import Image


class CIFAR10:
    def __init__(self, root=None, train=True, download=False, transform=None,
                 target_transform=None):
        self.n = 50000 if train else 10000
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if not 0 <= index < self.n:
            raise IndexError(index)
        rng = np.random.default_rng(index)
        y, x = np.mgrid[0:32, 0:32]
        base = rng.integers(0, 256, size=3)
        slope = rng.normal(0, 4, size=(2, 3))
        image = base + x[..., None] * slope[0] + y[..., None] * slope[1]
        image = np.clip(image + rng.normal(0, 6, size=(32, 32, 3)), 0, 255).astype(np.uint8)
        img = Image.fromarray(image)
        label = int(index % 10)
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return img, label
'''


def export_tests(repo: Path, out: Path) -> None:
    """FFCV's ``tests/`` from a work tree or a bare git directory into ``out``."""
    if (repo / "tests").is_dir():
        shutil.copytree(repo / "tests", out, dirs_exist_ok=True)
        return
    names = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "HEAD", "tests"],
                           check=True, capture_output=True, text=True).stdout.split()
    for name in names:
        data = subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{name}"],
                              check=True, capture_output=True).stdout
        target = out / Path(name).relative_to("tests")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def rewrite(source: str, package: str) -> str:
    """Only the imports change."""
    if package != "ffcv":
        source = re.sub(r"^(\s*)from ffcv(\.|\s)", rf"\1from {package}\2", source, flags=re.M)
        source = re.sub(r"^(\s*)import ffcv(\.|\s|$)", rf"\1import {package}\2", source, flags=re.M)
    source = re.sub(r"^(\s*)from torchvision\.datasets import CIFAR10\s*$",
                    r"\1from cifar_standin import CIFAR10", source, flags=re.M)
    return source


SITECUSTOMIZE = """import torchvision.datasets
from cifar_standin import CIFAR10
torchvision.datasets.CIFAR10 = CIFAR10
"""

TUTORIALS = ["examples/docs_examples/custom_transform.py",
             "examples/docs_examples/transform_with_inds.py"]


def export_file(repo: Path, name: str) -> str:
    if (repo / name).is_file():
        return (repo / name).read_text()
    return subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{name}"], check=True,
                          capture_output=True, text=True).stdout


def run_tutorials(args: argparse.Namespace, scratch: Path, env: dict) -> int:
    (scratch / "cifar_standin.py").write_text(STANDIN)
    (scratch / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(scratch), env.get("PYTHONPATH")]))
    failed = 0
    for name in TUTORIALS:
        path = scratch / Path(name).name
        path.write_text(rewrite(export_file(args.ffcv_repo, name), args.package))
        print(f"== {args.package}: {name}", flush=True)
        run = subprocess.run([args.python, str(path)], cwd=scratch, env=env)
        failed += run.returncode != 0
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ffcv-repo", required=True, type=Path)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--package", default="ffcv_rs", choices=["ffcv_rs", "ffcv"])
    parser.add_argument("--keep", type=Path, help="write the rewritten tests here and keep them")
    parser.add_argument("--tutorials", action="store_true",
                        help="run FFCV's two custom-transform tutorials instead of its tests")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()

    scratch = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ffcv-tests-"))
    scratch.mkdir(parents=True, exist_ok=True)
    if args.tutorials:
        env = dict(os.environ)
        if args.package == "ffcv_rs":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_DIR), env.get("PYTHONPATH")]))
        return run_tutorials(args, scratch, env)
    export_tests(args.ffcv_repo, scratch)
    for path in scratch.rglob("*.py"):
        path.write_text(rewrite(path.read_text(), args.package))
    (scratch / "cifar_standin.py").write_text(STANDIN)
    env = dict(os.environ)
    if args.package == "ffcv_rs":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_DIR), env.get("PYTHONPATH")]))
    # One pytest run per file: a test that takes its interpreter down (FFCV's distributed
    # tests spawn processes) then costs only its own file.
    outcomes = {}
    files = sorted(p.name for p in scratch.glob("test_*.py"))
    for name in files:
        cmd = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", name,
               *args.pytest_args]
        print("running", " ".join(cmd), "in", scratch, flush=True)
        run = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True)
        sys.stdout.write(run.stdout[-4000:])
        sys.stdout.write(run.stderr[-2000:])
        found = False
        for line in run.stdout.splitlines():
            word, _, rest = line.partition(" ")
            if word in ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"):
                outcomes[rest.split(" - ")[0]] = word
                found = True
        if not found:
            outcomes[name] = f"CRASHED (exit {run.returncode})"
    print("\n== outcomes ==")
    for test, word in sorted(outcomes.items()):
        print(f"{word:8} {test}")
    counts = {}
    for word in outcomes.values():
        counts[word.split()[0]] = counts.get(word.split()[0], 0) + 1
    print("== summary:", ", ".join(f"{n} {w.lower()}" for w, n in sorted(counts.items())))
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if counts.get("FAILED", 0) + counts.get("ERROR", 0) + counts.get("CRASHED", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
