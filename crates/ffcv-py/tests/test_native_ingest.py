"""`ffcv_rs.writer.write_webdataset`, `write_parquet`, `write_arrow` and `write_tfrecord`:
the native conversions write the bytes `ffcv write` writes from the same inputs and
options (one writer thread each), the values read back equal the source's, the mapping
used comes back and repeats the conversion, and a corrupt record raises `InputError`
naming its input and record, or is skipped and listed with ``skip_unreadable``.

Inputs are made with the `webdataset`, `pyarrow` and `tfrecord` packages (each test skips
without its package); the comparisons need the built `ffcv` binary (``cargo build -p
ffcv-cli`` or $FFCV_BIN) and skip without it."""

import json
import subprocess

import numpy as np
import pytest

from ffcv_rs.errors import ConfigError, InputError
from ffcv_rs.fields.decoders import IntDecoder, NDArrayDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.writer import (WriteResult, write_arrow, write_parquet, write_tfrecord,
                            write_webdataset)

from test_webdataset_cli import image, sample
from test_writer_proportion import ffcv_binary, png

COUNT = 11
FIELDS = {"image": "png:image", "label": "cls:int", "meta": "json:json", "emb": "npy:array",
          "raw": "bin:bytes"}


def binary_or_skip():
    binary = ffcv_binary()
    if binary is None:
        pytest.skip("no `ffcv` binary (cargo build -p ffcv-cli, or set FFCV_BIN)")
    return binary


def cli(kind, inputs, out, *extra):
    run = subprocess.run([binary_or_skip(), "write", kind, *inputs, str(out), "--workers", "1",
                          "--page-size", "2MiB", *extra], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout


def flags(fields):
    return [x for name, source in fields.items() for x in ("--field", f"{name}={source}")]


def load_all(path, pipelines):
    loader = Loader(str(path), batch_size=64, order=OrderOption.SEQUENTIAL, drop_last=False,
                    pipelines=pipelines)
    batches = list(loader)
    outputs = len([p for p in pipelines.values() if p is not None])
    return [np.concatenate([np.asarray(b[k]) for b in batches]) for k in range(outputs)]


@pytest.fixture
def wds_shards(tmp_path):
    wds = pytest.importorskip("webdataset", reason="the webdataset package is not installed")
    with wds.ShardWriter(str(tmp_path / "shard-%03d.tar"), maxcount=4, verbose=0) as sink:
        for i in range(COUNT):
            sink.write(sample(i))
    return tmp_path


@pytest.mark.filterwarnings("ignore:WebDataset")
def test_write_webdataset_writes_the_cli_bytes_and_the_values_read_back(wds_shards):
    tmp = wds_shards
    pattern = str(tmp / "shard-{000..002}.tar")
    result = write_webdataset(pattern, tmp / "py.beton", FIELDS, num_workers=1,
                              page_size=1 << 21)
    assert isinstance(result, WriteResult)
    assert result.fields == FIELDS
    assert result.records == COUNT
    assert result.inputs == [str(tmp / f"shard-{k:03d}.tar") for k in range(3)]
    assert result.files == [str(tmp / "py.beton")]
    assert result.samples == [(0, COUNT)]
    assert result.skipped == [] and result.skip_report is None
    assert result.images == {"raw": COUNT, "jpg": 0, "unchanged": 0}
    stdout = cli("webdataset", [pattern], tmp / "cli.beton", *flags(FIELDS))
    assert result.lines[0] == stdout.splitlines()[0] == (
        "fields: --field image=png:image --field label=cls:int --field meta=json:json "
        "--field emb=npy:array --field raw=bin:bytes")
    assert (tmp / "py.beton").read_bytes() == (tmp / "cli.beton").read_bytes()

    labels, embs = load_all(tmp / "py.beton", {"image": None, "label": [IntDecoder()],
                                               "emb": [NDArrayDecoder()], "meta": None,
                                               "raw": None})
    assert labels[:, 0].tolist() == [i % 4 for i in range(COUNT)]
    for i in range(COUNT):
        assert np.array_equal(embs[i], np.arange(6, dtype="<f4").reshape(2, 3) * (i + 1))


@pytest.mark.filterwarnings("ignore:WebDataset")
def test_the_inferred_mapping_comes_back_and_repeats_the_conversion(wds_shards):
    tmp = wds_shards
    first = write_webdataset(str(tmp / "shard-*.tar"), tmp / "a.beton", num_workers=1)
    assert sorted(first.fields.items()) == [
        ("bin", "bin:bytes"), ("cls", "cls:int"), ("json", "json:json"), ("npy", "npy:array"),
        ("png", "png:image")]
    again = write_webdataset(str(tmp / "shard-*.tar"), tmp / "b.beton", first.fields,
                             num_workers=1)
    assert again.fields == first.fields
    assert (tmp / "a.beton").read_bytes() == (tmp / "b.beton").read_bytes()
    # The same mapping as the command line's strings.
    strings = [f"{k}={v}" for k, v in first.fields.items()]
    write_webdataset([str(tmp / "shard-*.tar")], tmp / "c.beton", strings, num_workers=1)
    assert (tmp / "c.beton").read_bytes() == (tmp / "a.beton").read_bytes()


@pytest.mark.filterwarnings("ignore:WebDataset")
def test_shards_are_the_cli_shards_and_progress_is_told(wds_shards):
    tmp = wds_shards
    seen = []
    for sub in ("py", "cli", "one"):
        (tmp / sub).mkdir()
    result = write_webdataset(str(tmp / "shard-*.tar"), tmp / "py" / "train.beton", FIELDS,
                              num_workers=1, page_size=1 << 21, shards=3,
                              progress=lambda unit, done, total: seen.append((unit, done, total)))
    names = [f"train-{k:05d}-of-00003.beton" for k in range(3)]
    assert result.files == [str(tmp / "py" / n) for n in names]
    assert result.samples == [(0, 4), (4, 8), (8, 11)]
    assert seen[-1] == ("records", COUNT, COUNT)
    cli("webdataset", [str(tmp / "shard-*.tar")], tmp / "cli" / "train.beton", *flags(FIELDS),
        "--shards", "3")
    for n in names:
        assert (tmp / "py" / n).read_bytes() == (tmp / "cli" / n).read_bytes(), n
    one = write_webdataset(str(tmp / "shard-*.tar"), tmp / "one" / "train.beton", FIELDS,
                           num_workers=1, page_size=1 << 21, shards=3, shard_index=1)
    assert one.files == [str(tmp / "one" / names[1])]
    assert one.samples == [(4, 8)]
    assert (tmp / "one" / names[1]).read_bytes() == (tmp / "cli" / names[1]).read_bytes()


def test_a_corrupt_webdataset_record_is_named_or_skipped(tmp_path):
    wds = pytest.importorskip("webdataset", reason="the webdataset package is not installed")
    shard = tmp_path / "s-000.tar"
    with wds.TarWriter(str(shard)) as sink:
        for i in range(5):
            sink.write({"__key__": f"k{i}", "cls": b"three" if i == 3 else str(i).encode()})
    with pytest.raises(InputError) as raised:
        write_webdataset(str(shard), tmp_path / "out.beton", {"label": "cls:int"})
    assert raised.value.path == str(shard)
    assert raised.value.record == "k3"
    assert f"{shard}: record `k3`: field `label` (from `cls`): not an integer" in str(raised.value)
    assert not (tmp_path / "out.beton").exists()

    result = write_webdataset(str(shard), tmp_path / "out.beton", {"label": "cls:int"},
                              skip_unreadable=True)
    assert [(s["input"], s["record"]) for s in result.skipped] == [(str(shard), "k3")]
    assert result.skip_report == str(tmp_path / "out.beton.skipped.json")
    report = json.loads((tmp_path / "out.beton.skipped.json").read_text())
    assert [(s["shard"], s["key"]) for s in report["skipped"]] == [(str(shard), "k3")]
    (labels,) = load_all(tmp_path / "out.beton", {"label": [IntDecoder()]})
    assert labels[:, 0].tolist() == [0, 1, 2, 4]


def parquet_rows(n):
    return [{"image": {"bytes": png(image(i)), "path": f"{i}.png"}, "label": 7 * i - 3,
             "emb": [float(i), 0.5, -1.0 * i]} for i in range(n)]


def arrow_table(pa, rows):
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    return pa.table({
        "image": pa.array([r["image"] for r in rows], type=image_type),
        "label": pa.array([r["label"] for r in rows], type=pa.int64()),
        "emb": pa.array([r["emb"] for r in rows], type=pa.list_(pa.float32(), 3)),
    })


def test_write_parquet_and_write_arrow_write_the_cli_bytes(tmp_path):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    import pyarrow.parquet as pq
    rows = parquet_rows(9)
    pq.write_table(arrow_table(pa, rows[:5]), tmp_path / "train-0.parquet", row_group_size=2)
    pq.write_table(arrow_table(pa, rows[5:]), tmp_path / "train-1.parquet")
    result = write_parquet(str(tmp_path), tmp_path / "py.beton", num_workers=1,
                           page_size=1 << 21, write_mode="jpg")
    assert result.fields == {"image": "image:image", "label": "label:int", "emb": "emb:array"}
    assert result.records == 9
    cli("parquet", [str(tmp_path)], tmp_path / "cli.beton", "--write-mode", "jpg")
    assert (tmp_path / "py.beton").read_bytes() == (tmp_path / "cli.beton").read_bytes()
    labels, embs = load_all(tmp_path / "py.beton", {"image": None, "label": [IntDecoder()],
                                                      "emb": [NDArrayDecoder()]})
    assert labels[:, 0].tolist() == [r["label"] for r in rows]
    assert embs.tolist() == [r["emb"] for r in rows]

    with pa.ipc.new_stream(str(tmp_path / "data-00000-of-00001.arrow"),
                           arrow_table(pa, rows).schema) as sink:
        sink.write_table(arrow_table(pa, rows), max_chunksize=4)
    result = write_arrow(str(tmp_path / "data-*.arrow"), tmp_path / "arrow.beton",
                         {"label": "label:int", "emb": "emb:array"}, num_workers=1,
                         page_size=1 << 21)
    assert result.records == 9
    cli("arrow", [str(tmp_path / "data-*.arrow")], tmp_path / "arrow-cli.beton",
        "--field", "label=label:int", "--field", "emb=emb:array")
    assert (tmp_path / "arrow.beton").read_bytes() == (tmp_path / "arrow-cli.beton").read_bytes()


def test_a_corrupt_parquet_row_raises_input_error_naming_file_and_row(tmp_path):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    import pyarrow.parquet as pq
    rows = parquet_rows(6)
    rows[4]["image"] = {"bytes": b"not an image at all", "path": "4.png"}
    path = tmp_path / "bad.parquet"
    pq.write_table(arrow_table(pa, rows), path)
    with pytest.raises(InputError) as raised:
        write_parquet(str(path), tmp_path / "out.beton", num_workers=1,
                      fields={"image": "image:image", "label": "label:int"})
    assert raised.value.path == str(path)
    assert raised.value.record == 4
    assert f"{path}: row 4: field `image` (from `image`)" in str(raised.value)
    result = write_parquet(str(path), tmp_path / "out.beton", num_workers=1,
                           fields={"image": "image:image", "label": "label:int"},
                           skip_unreadable=True)
    assert [(s["input"], s["record"]) for s in result.skipped] == [(str(path), "4")]
    (labels,) = load_all(tmp_path / "out.beton", {"image": None, "label": [IntDecoder()]})
    assert labels[:, 0].tolist() == [r["label"] for k, r in enumerate(rows) if k != 4]


def test_write_tfrecord_writes_the_cli_bytes(tmp_path):
    writer = pytest.importorskip("tfrecord.writer", reason="the tfrecord package is not installed")
    w = writer.TFRecordWriter(str(tmp_path / "train.tfrecord-00000-of-00001"))
    for i in range(7):
        w.write({"image": (png(image(i)), "byte"), "label": (3 * i - 5, "int"),
                 "vec": ([float(i), -1.5], "float")})
    w.close()
    result = write_tfrecord(str(tmp_path), tmp_path / "py.beton", num_workers=1,
                            page_size=1 << 21)
    assert result.fields == {"image": "image:image", "label": "label:int", "vec": "vec:array"}
    cli("tfrecord", [str(tmp_path)], tmp_path / "cli.beton")
    assert (tmp_path / "py.beton").read_bytes() == (tmp_path / "cli.beton").read_bytes()
    labels, vecs = load_all(tmp_path / "py.beton", {"image": None, "label": [IntDecoder()],
                                                      "vec": [NDArrayDecoder()]})
    assert labels[:, 0].tolist() == [3 * i - 5 for i in range(7)]
    assert vecs.tolist() == [[float(i), -1.5] for i in range(7)]


def test_options_that_do_not_fit_are_refused(tmp_path):
    shard = tmp_path / "s.tar"
    shard.write_bytes(b"\0" * 1024)
    with pytest.raises(ConfigError, match="write mode `bogus`"):
        write_webdataset(str(shard), tmp_path / "o.beton", write_mode="bogus")
    with pytest.raises(ValueError, match="--jpeg-passthrough applies to --write-mode jpg"):
        write_webdataset(str(shard), tmp_path / "o.beton", jpeg_passthrough=True)
    with pytest.raises(ConfigError, match="the field `a` is given twice"):
        write_webdataset(str(shard), tmp_path / "o.beton", ["a=cls:int", "a=txt:bytes"])
    with pytest.raises(ConfigError, match="--field label=cls: no `:`"):
        write_webdataset(str(shard), tmp_path / "o.beton", {"label": "cls"})
    with pytest.raises(TypeError, match="not one string"):
        write_webdataset(str(shard), tmp_path / "o.beton", "label=cls:int")
    with pytest.raises(ValueError, match="shards=0"):
        write_webdataset(str(shard), tmp_path / "o.beton", shards=0)
    with pytest.raises(InputError, match="no records"):
        write_webdataset(str(shard), tmp_path / "o.beton")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.tar"]


def test_gzip_and_lz4_parquet_read_as_snappy_does(tmp_path):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    import pyarrow.parquet as pq
    rows = parquet_rows(7)
    fields = {"label": "label:int", "emb": "emb:array"}
    written = {}
    for codec in ("snappy", "gzip", "lz4", "none"):
        pq.write_table(arrow_table(pa, rows), tmp_path / f"{codec}.parquet",
                       compression=codec, row_group_size=3)
        write_parquet(str(tmp_path / f"{codec}.parquet"), tmp_path / f"{codec}.beton", fields,
                      num_workers=1)
        written[codec] = (tmp_path / f"{codec}.beton").read_bytes()
    assert written["gzip"] == written["lz4"] == written["none"] == written["snappy"]
    labels, embs = load_all(tmp_path / "gzip.beton", {"label": [IntDecoder()],
                                                       "emb": [NDArrayDecoder()]})
    assert labels[:, 0].tolist() == [r["label"] for r in rows]
    assert embs.tolist() == [r["emb"] for r in rows]


def test_dictionary_encoded_columns_are_their_values(tmp_path):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    import pyarrow.parquet as pq
    # What pandas categoricals become in pyarrow: dictionary-encoded columns (strings and
    # integers), with a null.
    species = ["cat", "dog", None, "cat", "owl", "dog", "cat"]
    sizes = [3, 1, 3, 2, 1, 3, 2]
    table = pa.table({
        "species": pa.array(species).dictionary_encode(),
        "size": pa.array(sizes, type=pa.int64()).dictionary_encode(),
        "label": pa.array(range(7), type=pa.int64()),
    })
    assert pa.types.is_dictionary(table.schema.field("species").type)
    pq.write_table(table, tmp_path / "cats.parquet", row_group_size=4)
    with pa.ipc.new_stream(str(tmp_path / "cats.arrow"), table.schema) as sink:
        sink.write_table(table, max_chunksize=3)
    fields = {"size": "size:int", "label": "label:int"}
    for name, write in (("cats.parquet", write_parquet), ("cats.arrow", write_arrow)):
        out = tmp_path / f"{name}.beton"
        result = write(str(tmp_path / name), out, fields, num_workers=1)
        assert result.records == 7
        got_sizes, got_labels = load_all(out, {"size": [IntDecoder()], "label": [IntDecoder()]})
        assert got_sizes[:, 0].tolist() == sizes, name
        assert got_labels[:, 0].tolist() == list(range(7)), name
        # The strings: bytes fields holding each row's category; the null row is named.
        with pytest.raises(InputError) as raised:
            write(str(tmp_path / name), tmp_path / "s.beton", {"species": "species:bytes"},
                  num_workers=1)
        assert raised.value.record == 2, name
        skipped = write(str(tmp_path / name), tmp_path / "s.beton", {"species": "species:bytes"},
                        num_workers=1, skip_unreadable=True)
        assert [s["record"] for s in skipped.skipped] == ["2"], name
        reader_rows = read_bytes_field(tmp_path / "s.beton", "species")
        assert reader_rows == [s.encode() for s in species if s is not None], name


def read_bytes_field(path, name):
    """Each sample's stored bytes of BytesField `name`, through FFCV's Reader's metadata."""
    from ffcv_rs.reader import Reader
    reader = Reader(str(path))
    data = path.read_bytes()
    # The metadata's columns follow the fields' order.
    column = reader.metadata.dtype.names[list(reader.handlers).index(name)]
    rows = reader.metadata[column]
    return [data[int(r["ptr"]):int(r["ptr"]) + int(r["size"])] for r in rows]


def test_the_native_options_are_keyword_only(tmp_path):
    """`ffcv_rs.writer` hands every option to the native conversion by name, and the native
    function refuses them by position: an option added in one place only cannot shift its
    neighbours' values."""
    from ffcv_rs import _native
    with pytest.raises(TypeError):
        _native.ingest("parquet", [], str(tmp_path / "out.beton"), [], "raw", None, 90, None,
                       0.5, 0, False, False, 1, 1 << 21, 1, None)
    assert not (tmp_path / "out.beton").exists()
