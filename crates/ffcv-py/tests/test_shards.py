"""Several ``.beton`` files read as one dataset through ``Loader([...])``: the shards give
the single file's batches in the same order, a glob pattern expands sorted, and bad shard
sets raise ``ffcv_rs`` exceptions naming the files; the disk cache knobs are checked."""

import numpy as np
import pytest

from ffcv_rs.errors import FFCVError
from ffcv_rs.fields import BytesField, FloatField, IntField
from ffcv_rs.fields.decoders import BytesDecoder, FloatDecoder, IntDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.writer import DatasetWriter

N = 90
SPLITS = [0, 31, 70, N]
PAGE = 1 << 21


def blob(i):
    # Bytes in pages, so that QuasiRandom has pages to draw.
    return np.full(100 + i % 50, i % 251, dtype=np.uint8)


def write(path, start, end, fields=None):
    fields = fields or {"index": IntField(), "value": FloatField(), "blob": BytesField()}
    items = [(i, i * 0.5, blob(i)) for i in range(start, end)]
    if "value" not in fields:
        items = [(i,) for i in range(start, end)]
    DatasetWriter(str(path), fields, page_size=PAGE, num_workers=1).from_indexed_dataset(
        items, progress=False)
    return str(path)


def columns(fname, order=OrderOption.SEQUENTIAL, **kw):
    loader = Loader(fname, batch_size=8, num_workers=2, order=order, seed=5, drop_last=False,
                    pipelines={"index": [IntDecoder()], "value": [FloatDecoder()],
                               "blob": [BytesDecoder()]}, **kw)
    index, value = [], []
    for i, v, b in loader:
        index.extend(np.asarray(i)[:, 0].tolist())
        value.extend(np.asarray(v)[:, 0].tolist())
        lengths = np.asarray(b.base.lengths()).tolist()
        for row, ident, n in zip(np.asarray(b), np.asarray(i)[:, 0].tolist(), lengths):
            assert row[:n].tobytes() == blob(ident).tobytes()
    return index, value


@pytest.fixture
def shard_set(tmp_path):
    single = write(tmp_path / "single.beton", 0, N)
    shards = [write(tmp_path / f"part-{k}.beton", SPLITS[k], SPLITS[k + 1]) for k in range(3)]
    return single, shards


def test_shards_give_the_single_files_batches(shard_set):
    single, shards = shard_set
    for order in (OrderOption.SEQUENTIAL, OrderOption.RANDOM):
        want = columns(single, order)
        assert columns(shards, order) == want
    index, value = columns(shards)
    assert index == list(range(N))
    assert value == [i * 0.5 for i in range(N)]
    quasi, _ = columns(shards, OrderOption.QUASI_RANDOM)
    assert sorted(quasi) == list(range(N))


def test_a_glob_pattern_expands_sorted(shard_set, tmp_path):
    single, _ = shard_set
    assert columns([str(tmp_path / "part-*.beton")]) == columns(single)
    with pytest.raises(FFCVError, match="nomatch-"):
        Loader([str(tmp_path / "nomatch-*.beton")], batch_size=4)


def test_bad_shard_sets_are_errors_naming_the_files(shard_set, tmp_path):
    _, shards = shard_set
    other = write(tmp_path / "other.beton", 0, 10, {"index": IntField()})
    with pytest.raises(FFCVError) as e:
        Loader([shards[0], other], batch_size=4)
    assert "other.beton" in str(e.value) and "part-0.beton" in str(e.value)
    with pytest.raises(ValueError, match="empty list"):
        Loader([], batch_size=4)


def test_page_cache_knobs_are_checked(shard_set, tmp_path):
    single, _ = shard_set
    with pytest.raises(ValueError, match="page_cache_dir"):
        Loader(single, batch_size=4, page_cache_size=1 << 20)
    with pytest.raises(ValueError, match="page_cache_size"):
        Loader(single, batch_size=4, page_cache_dir=str(tmp_path / "c"), page_cache_size=0)
    # A local file is read through its map; the directory is accepted and left unused.
    cache = tmp_path / "pages"
    assert columns(single, page_cache_dir=cache) == columns(single)
    assert not cache.exists() or not any(cache.iterdir())
