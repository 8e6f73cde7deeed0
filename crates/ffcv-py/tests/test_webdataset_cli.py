"""`ffcv write webdataset` against the Python writer: shards written by the `webdataset`
package's ShardWriter convert, through the CLI, to a file that loads back with every
record's values, and to the same bytes as ``DatasetWriter.from_webdataset`` writes from
the same shards with the same field types and options (one writer thread each, so that
both lay pages out the same way).

Needs the `webdataset` package and the built `ffcv` binary (``cargo build -p ffcv-cli``
or $FFCV_BIN); skips without them. Images are PNGs made here; the pipeline decodes them
with the standard library (they are unfiltered 8-bit RGB), so PIL is not needed."""

import hashlib
import json
import subprocess
import zlib

import numpy as np
import pytest

from ffcv_rs.fields import BytesField, IntField, JSONField, NDArrayField, RGBImageField
from ffcv_rs.fields.decoders import IntDecoder, NDArrayDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.writer import DatasetWriter

from test_writer_proportion import ffcv_binary, png

COUNT = 11


def image(i):
    h, w = 6 + i % 3, 5 + i % 4
    y, x, ch = np.mgrid[0:h, 0:w, 0:3]
    return ((11 * x + 5 * y + 67 * ch + 23 * i) % 256).astype(np.uint8)


def sample(i):
    return {
        "__key__": f"rec{i:04d}",
        "png": png(image(i)),
        "cls": i % 4,
        "json": {"id": i, "name": f"r{i}", "score": i / 4},
        "npy": np.arange(6, dtype="<f4").reshape(2, 3) * (i + 1),
        "bin": bytes(range(i)),
    }


def unpng(data):
    """Pixels of an unfiltered 8-bit RGB PNG with one IDAT chunk (what `png` writes)."""
    w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    at = data.index(b"IDAT")
    size = int.from_bytes(data[at - 4:at], "big")
    rows = zlib.decompress(data[at + 4:at + 4 + size])
    stride = 1 + 3 * w
    pixels = b"".join(rows[r * stride + 1:(r + 1) * stride] for r in range(h))
    return np.frombuffer(pixels, dtype=np.uint8).reshape(h, w, 3)


@pytest.fixture
def shards(tmp_path):
    wds = pytest.importorskip("webdataset", reason="the webdataset package is not installed")
    binary = ffcv_binary()
    if binary is None:
        pytest.skip("no `ffcv` binary (cargo build -p ffcv-cli, or set FFCV_BIN)")
    pattern = str(tmp_path / "shard-%03d.tar")
    with wds.ShardWriter(pattern, maxcount=4, verbose=0) as sink:
        for i in range(COUNT):
            sink.write(sample(i))
    paths = sorted(str(p) for p in tmp_path.glob("shard-*.tar"))
    assert len(paths) == 3
    return binary, tmp_path, paths


FIELDS = ["image=png:image", "label=cls:int", "meta=json:json", "emb=npy:array", "raw=bin:bytes"]


def python_fields():
    return {"image": RGBImageField(), "label": IntField(), "meta": JSONField(),
            "emb": NDArrayField(np.dtype("<f4"), (2, 3)), "raw": BytesField()}


def cli(binary, out, inputs, *extra):
    run = subprocess.run([binary, "write", "webdataset", *inputs, str(out), "--workers", "1",
                          "--page-size", "2MiB", *extra], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.mark.filterwarnings("ignore:WebDataset")
def test_the_cli_writes_the_bytes_from_webdataset_writes(shards):
    binary, tmp, paths = shards
    out = tmp / "cli.beton"
    flags = [x for f in FIELDS for x in ("--field", f)]
    cli(binary, out, [str(tmp / "shard-{000..002}.tar")], *flags)

    def pipeline(ds):
        for s in ds.decode():
            yield (unpng(s["png"]), s["cls"], s["json"], s["npy"],
                   np.frombuffer(s["bin"], dtype=np.uint8))

    python = tmp / "python.beton"
    DatasetWriter(str(python), python_fields(), page_size=1 << 21, num_workers=1) \
        .from_webdataset(paths, pipeline, progress=False)
    assert out.read_bytes() == python.read_bytes(), (
        f"{binary} and DatasetWriter.from_webdataset wrote different files; if the binary "
        "is older than the sources, rebuild it with `cargo build -p ffcv-cli`")


def test_shardwriter_shards_convert_with_inferred_fields_and_load_back(shards):
    binary, tmp, _ = shards
    out = tmp / "inferred.beton"
    stdout = cli(binary, out, [str(tmp / "shard-*.tar")])
    line = stdout.splitlines()[0]
    assert line.startswith("fields: --field ")
    # ShardWriter's member order decides the field order; the kinds follow the extensions.
    assert sorted(line[len("fields: --field "):].split(" --field ")) == [
        "bin=bin:bytes", "cls=cls:int", "json=json:json", "npy=npy:array", "png=png:image"]
    loader = Loader(str(out), batch_size=COUNT, order=OrderOption.SEQUENTIAL, drop_last=False,
                    pipelines={"cls": [IntDecoder()], "npy": [NDArrayDecoder()],
                               "png": None, "json": None, "bin": None})
    names = [f.split("=")[0] for f in line[len("fields: --field "):].split(" --field ")]
    kept = [n for n in names if n in ("cls", "npy")]
    (batch,) = [dict(zip(kept, b)) for b in loader]
    assert np.asarray(batch["cls"])[:, 0].tolist() == [i % 4 for i in range(COUNT)]
    for i, row in enumerate(np.asarray(batch["npy"])):
        assert np.array_equal(row, sample(i)["npy"])
    run = subprocess.run([binary, "dump", str(out)], capture_output=True, text=True, check=True)
    rows = [json.loads(r) for r in run.stdout.splitlines()]
    assert len(rows) == COUNT
    for i, row in enumerate(rows):
        want = sample(i)
        assert row["json"] == want["json"]
        assert row["png"]["mode"] == "raw"
        assert (row["png"]["height"], row["png"]["width"]) == image(i).shape[:2]
        assert row["png"]["sha256"] == hashlib.sha256(image(i).tobytes()).hexdigest()
        assert row["bin"] == {"len": i, "sha256": hashlib.sha256(want["bin"]).hexdigest()}
