"""`ffcv write tfrecord` on files written by the `tfrecord` package (an independent
writer: its own `example_pb2` on protobuf, and the `crc32c` package for the framing):
every record converts to the same bytes as the Python writer writes from the same values
with the same field types (one writer thread each), and a damaged record is named or
skipped.

Needs the `tfrecord` package and the built `ffcv` binary (``cargo build -p ffcv-cli`` or
$FFCV_BIN); skips without them. Images are PNGs made here with the standard library."""

import json
import subprocess

import numpy as np
import pytest

from ffcv_rs.fields import FloatField, IntField, NDArrayField, RGBImageField
from ffcv_rs.writer import DatasetWriter

from test_webdataset_cli import image
from test_writer_proportion import ffcv_binary, png

COUNT = 9


def record(i):
    return {"image": png(image(i)), "label": 3 * i - 5, "score": np.float32(i / 7),
            "vec": np.array([i, -1.5, 1e-3 * i], dtype="<f4")}


@pytest.fixture
def tools(tmp_path):
    writer = pytest.importorskip("tfrecord.writer", reason="the tfrecord package is not installed")
    binary = ffcv_binary()
    if binary is None:
        pytest.skip("no `ffcv` binary (cargo build -p ffcv-cli, or set FFCV_BIN)")

    def write(path, rows):
        w = writer.TFRecordWriter(str(path))
        for r in rows:
            w.write({"image": (r["image"], "byte"), "label": (r["label"], "int"),
                     "score": (float(r["score"]), "float"), "vec": (r["vec"].tolist(), "float")})
        w.close()

    return write, binary


def cli(binary, inputs, out, *extra):
    run = subprocess.run([binary, "write", "tfrecord", *inputs, str(out), "--workers", "1",
                          "--page-size", "2MiB", *extra], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout


def python_file(path, rows):
    from test_webdataset_cli import unpng
    fields = {"image": RGBImageField(), "label": IntField(), "score": FloatField(),
              "vec": NDArrayField(np.dtype("<f4"), (3,))}
    items = [(unpng(r["image"]), r["label"], float(r["score"]), r["vec"]) for r in rows]
    DatasetWriter(str(path), fields, page_size=1 << 21, num_workers=1) \
        .from_indexed_dataset(items, chunksize=100, progress=False)
    return path.read_bytes()


def test_tfrecord_package_files_convert_to_the_bytes_the_python_writer_writes(tools, tmp_path):
    write, binary = tools
    rows = [record(i) for i in range(COUNT)]
    write(tmp_path / "train.tfrecord-00000-of-00002", rows[:5])
    write(tmp_path / "train.tfrecord-00001-of-00002", rows[5:])
    out = tmp_path / "cli.beton"
    stdout = cli(binary, [str(tmp_path / "train.tfrecord-*")], out)
    assert stdout.splitlines()[0] == ("fields: --field image=image:image --field label=label:int "
                                      "--field score=score:float --field vec=vec:array")
    assert out.read_bytes() == python_file(tmp_path / "python.beton", rows)


def test_a_damaged_record_is_named_or_skipped(tools, tmp_path):
    write, binary = tools
    rows = [record(i) for i in range(4)]
    path = tmp_path / "data.tfrecord"
    write(path, rows)
    data = bytearray(path.read_bytes())
    # The data of record 1 starts after record 0 (12 + len + 4 bytes) and its header.
    len0 = int.from_bytes(data[:8], "little")
    start1 = 16 + len0
    data[start1 + 12 + 5] ^= 0xFF
    path.write_bytes(bytes(data))
    out = tmp_path / "out.beton"
    run = subprocess.run([binary, "write", "tfrecord", str(path), str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert f"{path}: record 1 (offset {start1}): data checksum mismatch" in run.stderr
    cli(binary, [str(path)], out, "--skip-unreadable")
    report = json.loads((tmp_path / "out.beton.skipped.json").read_text())
    assert [(s["file"], s["record"]) for s in report["skipped"]] == [(str(path), 1)]
    kept = [rows[0]] + rows[2:]
    assert out.read_bytes() == python_file(tmp_path / "python.beton", kept)
