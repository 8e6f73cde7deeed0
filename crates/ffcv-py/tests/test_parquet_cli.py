"""`ffcv write parquet` and `ffcv write arrow` on files pyarrow writes (and, where the
`datasets` package is installed, files Hugging Face `datasets` writes with `to_parquet`
and `save_to_disk`): every record converts with its values, to the same bytes as the
Python writer writes from the same values with the same field types (one writer thread
each, so that both lay pages out the same way).

Needs pyarrow and the built `ffcv` binary (``cargo build -p ffcv-cli`` or $FFCV_BIN);
skips without them (the `datasets` test also without `datasets` and Pillow, which CI
does not install: they take most of a minute). Images are PNGs made here with the
standard library."""

import hashlib
import json
import subprocess

import numpy as np
import pytest

from ffcv_rs.fields import BytesField, FloatField, IntField, NDArrayField, RGBImageField
from ffcv_rs.writer import DatasetWriter

from test_webdataset_cli import image, unpng
from test_writer_proportion import ffcv_binary, png

COUNT = 10


def record(i):
    return {
        "image": {"bytes": png(image(i)), "path": f"img{i}.png"},
        "label": i * 7 - 20,
        "score": i / 3,
        "caption": f"caption {i} \u00e9",
        "emb": [float(i), -0.5, 0.25 * i],
    }


@pytest.fixture
def tools():
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    binary = ffcv_binary()
    if binary is None:
        pytest.skip("no `ffcv` binary (cargo build -p ffcv-cli, or set FFCV_BIN)")
    return pa, binary


def table(pa, rows):
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    return pa.table({
        "image": pa.array([r["image"] for r in rows], type=image_type),
        "label": pa.array([r["label"] for r in rows], type=pa.int64()),
        "score": pa.array([r["score"] for r in rows], type=pa.float64()),
        "caption": pa.array([r["caption"] for r in rows], type=pa.string()),
        "emb": pa.array([r["emb"] for r in rows], type=pa.list_(pa.float32(), 3)),
    })


INFERRED = ("fields: --field image=image:image --field label=label:int --field "
            "score=score:float --field caption=caption:bytes --field emb=emb:array")


def cli(binary, kind, inputs, out, *extra):
    run = subprocess.run([binary, "write", kind, *inputs, str(out), "--workers", "1",
                          "--page-size", "2MiB", *extra], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout


def python_file(path, rows):
    fields = {"image": RGBImageField(), "label": IntField(), "score": FloatField(),
              "caption": BytesField(), "emb": NDArrayField(np.dtype("<f4"), (3,))}
    items = [(unpng(r["image"]["bytes"]), r["label"], r["score"],
              np.frombuffer(r["caption"].encode(), dtype=np.uint8),
              np.array(r["emb"], dtype="<f4")) for r in rows]
    DatasetWriter(str(path), fields, page_size=1 << 21, num_workers=1) \
        .from_indexed_dataset(items, chunksize=100, progress=False)
    return path.read_bytes()


def check_dump(binary, out, rows, image_field="image"):
    run = subprocess.run([binary, "dump", str(out)], capture_output=True, text=True, check=True)
    dumped = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(dumped) == len(rows)
    for i, (row, want) in enumerate(zip(dumped, rows)):
        pixels = unpng(want["image"]["bytes"])
        assert row[image_field]["sha256"] == hashlib.sha256(pixels.tobytes()).hexdigest(), i
        assert row["label"] == want["label"]
        assert row["score"] == want["score"]


def test_pyarrow_parquet_converts_to_the_bytes_the_python_writer_writes(tools, tmp_path):
    pa, binary = tools
    import pyarrow.parquet as pq
    rows = [record(i) for i in range(COUNT)]
    # Two files, the first of several row groups; pyarrow's default codec (snappy).
    pq.write_table(table(pa, rows[:7]), tmp_path / "train-0.parquet", row_group_size=3)
    pq.write_table(table(pa, rows[7:]), tmp_path / "train-1.parquet")
    out = tmp_path / "cli.beton"
    stdout = cli(binary, "parquet", [str(tmp_path / "train-*.parquet")], out)
    assert stdout.splitlines()[0] == INFERRED
    check_dump(binary, out, rows)
    assert out.read_bytes() == python_file(tmp_path / "python.beton", rows)


def test_pyarrow_ipc_stream_and_file_convert_to_the_same_bytes(tools, tmp_path):
    pa, binary = tools
    rows = [record(i) for i in range(COUNT)]
    want = python_file(tmp_path / "python.beton", rows)
    t = table(pa, rows)
    stream = tmp_path / "data.arrow"
    with pa.ipc.new_stream(str(stream), t.schema) as w:
        for batch in t.to_batches(max_chunksize=4):
            w.write_batch(batch)
    file = tmp_path / "data.feather"
    with pa.ipc.new_file(str(file), t.schema) as w:
        for batch in t.to_batches(max_chunksize=3):
            w.write_batch(batch)
    for path in (stream, file):
        out = tmp_path / f"{path.suffix[1:]}.beton"
        stdout = cli(binary, "arrow", [str(path)], out)
        assert stdout.splitlines()[0] == INFERRED
        assert out.read_bytes() == want, path


def test_hugging_face_datasets_files_convert(tools, tmp_path):
    pa, binary = tools
    datasets = pytest.importorskip("datasets", reason="the datasets package is not installed")
    pytest.importorskip("PIL", reason="datasets encodes images with Pillow, not installed")
    rows = [record(i) for i in range(COUNT)]
    features = datasets.Features({
        "image": datasets.Image(),
        "label": datasets.Value("int64"),
        "score": datasets.Value("float64"),
        "caption": datasets.Value("string"),
        "emb": datasets.Sequence(datasets.Value("float32"), length=3),
    })
    ds = datasets.Dataset.from_dict({k: [r[k] for r in rows] for k in rows[0]}, features=features)
    ds.to_parquet(str(tmp_path / "hf.parquet"))
    ds.save_to_disk(str(tmp_path / "saved"))
    want = python_file(tmp_path / "python.beton", rows)
    out = tmp_path / "parquet.beton"
    assert cli(binary, "parquet", [str(tmp_path / "hf.parquet")], out).splitlines()[0] == INFERRED
    assert out.read_bytes() == want
    out = tmp_path / "saved.beton"
    assert cli(binary, "arrow", [str(tmp_path / "saved")], out).splitlines()[0] == INFERRED
    assert out.read_bytes() == want


def test_a_corrupt_image_is_named_or_skipped(tools, tmp_path):
    pa, binary = tools
    import pyarrow.parquet as pq
    rows = [record(i) for i in range(4)]
    rows[2]["image"]["bytes"] = b"\x89PNG\r\n\x1a\nbroken"
    path = tmp_path / "bad.parquet"
    pq.write_table(table(pa, rows), path)
    out = tmp_path / "out.beton"
    run = subprocess.run([binary, "write", "parquet", str(path), str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert f"{path}: row 2: field `image` (from `image`): cannot decode the image" in run.stderr
    cli(binary, "parquet", [str(path)], out, "--skip-unreadable")
    report = json.loads((tmp_path / "out.beton.skipped.json").read_text())
    assert [(s["file"], s["record"]) for s in report["skipped"]] == [(str(path), 2)]
    check_dump(binary, out, rows[:2] + rows[3:])


def test_codecs_not_built_in_are_refused_naming_the_file(tools, tmp_path):
    pa, binary = tools
    import pyarrow.parquet as pq
    t = table(pa, [record(i) for i in range(3)])
    pq.write_table(t, tmp_path / "z.parquet", compression="zstd")
    with pa.ipc.new_stream(str(tmp_path / "z.arrow"), t.schema,
                           options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_table(t)
    out = tmp_path / "out.beton"
    for kind, name, needle in [("parquet", "z.parquet", "rewrite the file with compression=\"snappy\""),
                               ("arrow", "z.arrow", "record batch 0 is compressed")]:
        run = subprocess.run([binary, "write", kind, str(tmp_path / name), str(out)],
                             capture_output=True, text=True)
        assert run.returncode == 1, run.stderr
        assert run.stderr.startswith(f"ffcv: error: {tmp_path / name}: ") and needle in run.stderr
        assert run.stderr.count("\n") == 1
