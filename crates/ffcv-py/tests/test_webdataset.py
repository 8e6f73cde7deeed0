"""DatasetWriter.from_webdataset with FFCV's semantics: each shard opened as
pipeline(webdataset.WebDataset(shard)), its samples counted, then all written in shard
order. The shard logic is tested with a stand-in `webdataset` module; real tar shards are
tested where the webdataset package is installed."""

import io
import sys
import tarfile
import threading
import types

import numpy as np
import pytest

from ffcv_rs.fields import IntField, NDArrayField
from ffcv_rs.fields.decoders import IntDecoder, NDArrayDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.writer import DatasetWriter

FIELDS = {"label": IntField(), "value": NDArrayField(np.dtype("<f4"), (3,))}


def read_back(path):
    loader = Loader(path, batch_size=16, order=OrderOption.SEQUENTIAL, drop_last=False,
                    pipelines={"label": [IntDecoder()], "value": [NDArrayDecoder()]})
    labels, values = [], []
    for label, value in loader:
        labels += np.asarray(label)[:, 0].tolist()
        values += [np.asarray(v).copy() for v in value]
    return labels, values


class FakeWebDataset:
    """Stands for webdataset.WebDataset: shard "start:count" yields count samples."""

    opened = []

    def __init__(self, shard):
        FakeWebDataset.opened.append((threading.get_ident(), shard))
        start, count = (int(x) for x in shard.split(":"))
        self.samples = [{"cls": i, "npy": np.arange(3, dtype="<f4") + i}
                        for i in range(start, start + count)]

    def __iter__(self):
        return iter(self.samples)


@pytest.fixture
def fake_webdataset(monkeypatch):
    module = types.ModuleType("webdataset")
    module.WebDataset = FakeWebDataset
    FakeWebDataset.opened = []
    monkeypatch.setitem(sys.modules, "webdataset", module)
    return module


def to_tuples(dataset):
    return ((s["cls"], s["npy"]) for s in dataset)


def test_shards_are_counted_then_written_in_order(tmp_path, fake_webdataset):
    shards = ["100:7", "0:0", "50:30", "7:1"]
    path = str(tmp_path / "w.beton")
    DatasetWriter(path, FIELDS, num_workers=3).from_webdataset(shards, to_tuples, progress=False)
    labels, values = read_back(path)
    want = list(range(100, 107)) + list(range(50, 80)) + [7]
    assert labels == want
    assert all(np.array_equal(v, np.arange(3, dtype="<f4") + w) for v, w in zip(values, want))
    # Each shard opened twice (counted, then written), on this thread, one after the other.
    assert [s for _, s in FakeWebDataset.opened] == shards + shards
    assert {t for t, _ in FakeWebDataset.opened} == {threading.get_ident()}


def test_a_shard_that_changes_between_the_two_reads_is_an_error(tmp_path, fake_webdataset):
    calls = {"n": 0}

    def shrinking(dataset):
        calls["n"] += 1
        samples = list(to_tuples(dataset))
        return samples if calls["n"] <= 2 else samples[:-1]

    with pytest.raises(ValueError, match="second time"):
        DatasetWriter(str(tmp_path / "a.beton"), FIELDS, num_workers=2).from_webdataset(
            ["0:5", "5:5"], shrinking, progress=False)

    calls["n"] = 0

    def growing(dataset):
        calls["n"] += 1
        samples = list(to_tuples(dataset))
        return samples if calls["n"] <= 2 else samples + samples[:1]

    with pytest.raises(ValueError, match="second time"):
        DatasetWriter(str(tmp_path / "b.beton"), FIELDS, num_workers=2).from_webdataset(
            ["0:5", "5:5"], growing, progress=False)
    assert not (tmp_path / "b.beton").exists()


def test_without_webdataset_the_import_error_names_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "webdataset", None)
    with pytest.raises(ImportError, match="'webdataset' package"):
        DatasetWriter(str(tmp_path / "x.beton"), FIELDS).from_webdataset(["a.tar"], to_tuples)


def make_shard(path, start, n):
    with tarfile.open(path, "w") as tf:
        for i in range(start, start + n):
            npy = io.BytesIO()
            np.save(npy, np.arange(3, dtype="<f4") + i)
            for ext, payload in (("cls", str(i).encode()), ("npy", npy.getvalue())):
                info = tarfile.TarInfo(f"{i:06d}.{ext}")
                info.size = len(payload)
                tf.addfile(info, io.BytesIO(payload))


@pytest.mark.filterwarnings("ignore:WebDataset")
def test_real_webdataset_shards(tmp_path):
    try:
        import webdataset  # noqa: F401
    except ImportError:
        pytest.skip("the webdataset package is not installed (pip install webdataset) to "
                    "test from_webdataset on real tar shards")
    shards = []
    for k, (start, n) in enumerate([(0, 12), (12, 1), (13, 40)]):
        shards.append(str(tmp_path / f"shard-{k}.tar"))
        make_shard(shards[-1], start, n)
    path = str(tmp_path / "w.beton")
    DatasetWriter(path, FIELDS, num_workers=3).from_webdataset(
        shards, lambda ds: ds.decode().to_tuple("cls", "npy"), chunksize=5, progress=False)
    labels, values = read_back(path)
    assert labels == list(range(53))
    assert all(np.array_equal(v, np.arange(3, dtype="<f4") + i) for i, v in enumerate(values))
