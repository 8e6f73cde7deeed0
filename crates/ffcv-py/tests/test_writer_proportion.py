"""RGBImageField(write_mode='proportion') follows the writers' one seeding rule (Rust's
``rgb_image::sample_generator``, seed 0): the Python writer writes the file that
``ffcv write image-folder --write-mode proportion`` writes from the same images.

The images, the settings and the file's SHA-256 are pinned in
tests/fixtures/proportion-mode/expected.json, which the CLI's own test
(crates/ffcv-cli/tests/it/proportion_mode.rs) checks the CLI's output against. Where the
``ffcv`` binary is built, this test also runs it on a PNG folder of the same images and
compares the two files byte for byte."""

import hashlib
import json
import os
import pathlib
import shutil
import struct
import subprocess
import zlib

import numpy as np
import pytest

from ffcv_rs.fields import IntField, RGBImageField
from ffcv_rs.writer import DatasetWriter

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXPECTED = ROOT / "tests" / "fixtures" / "proportion-mode" / "expected.json"
CLASSES = ["a", "b"]
PER_CLASS = 6


def image(c, k):
    """Image k of class c (sample 6c + k), as expected.json's "folder" describes it."""
    i = c * PER_CLASS + k
    w, h = 5 + 3 * k + c, 4 + 2 * k
    y, x, ch = np.mgrid[0:h, 0:w, 0:3]
    return ((7 * x + 13 * y + 29 * ch + 31 * i) % 256).astype(np.uint8)


def items():
    return [(image(c, k), c) for c in range(len(CLASSES)) for k in range(PER_CLASS)]


def png(arr):
    """An 8-bit RGB PNG of `arr` ([H, W, 3] uint8), with the standard library only."""
    h, w, _ = arr.shape

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    rows = b"".join(b"\x00" + arr[r].tobytes() for r in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def ffcv_binary():
    """The built `ffcv` command: $FFCV_BIN, else the workspace's target/debug or
    target/release (or $CARGO_TARGET_DIR's), else one on PATH; None when there is none."""
    given = os.environ.get("FFCV_BIN")
    if given:
        return given
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for profile in ("debug", "release"):
        candidate = target / profile / "ffcv"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("ffcv")


def write_with_python(path):
    fields = {"image": RGBImageField(write_mode="proportion", compress_probability=0.5),
              "label": IntField()}
    DatasetWriter(str(path), fields, page_size=1 << 21, num_workers=1).from_indexed_dataset(
        items(), chunksize=100, progress=False)
    return pathlib.Path(path).read_bytes()


def test_python_writes_the_pinned_proportion_file(tmp_path):
    expected = json.loads(EXPECTED.read_text())
    data = write_with_python(tmp_path / "python.beton")
    assert len(data) == expected["file_size"]
    assert hashlib.sha256(data).hexdigest() == expected["sha256"]


def test_python_and_the_cli_write_the_same_proportion_file(tmp_path):
    binary = ffcv_binary()
    if binary is None:
        pytest.skip("no `ffcv` binary (build it with `cargo build -p ffcv-cli`, or set "
                    "FFCV_BIN); the pinned SHA-256 test still compares against the CLI's file")
    src = tmp_path / "images"
    for c, name in enumerate(CLASSES):
        (src / name).mkdir(parents=True)
        for k in range(PER_CLASS):
            (src / name / f"{k}.png").write_bytes(png(image(c, k)))
    cli = tmp_path / "cli.beton"
    run = subprocess.run(
        [binary, "write", "image-folder", str(src), str(cli), "--write-mode", "proportion",
         "--compress-probability", "0.5", "--page-size", "2MiB", "--workers", "1"],
        capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    python = write_with_python(tmp_path / "python.beton")
    assert cli.read_bytes() == python, (
        f"{binary} and the Python writer wrote different files; if the binary is older than "
        "the sources, rebuild it with `cargo build -p ffcv-cli`")
