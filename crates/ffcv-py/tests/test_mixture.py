"""Weighted mixtures through ``Loader([...], weights=[...])``: the per-source counts of an
epoch match the weights under every order, the same seed gives the same epoch, ``stop``
repeats no sample, two ranks take disjoint positions that together are the epoch, a
mid-epoch ``state_dict`` resumes exactly the rest (with two ranks' state, on three ranks
too), and bad weights or knobs raise
``ffcv_rs`` exceptions naming them. A list without ``weights`` is still a shard set."""

import numpy as np
import pytest

from ffcv_rs.errors import ConfigError, FFCVError
from ffcv_rs.fields import BytesField, FloatField, IntField
from ffcv_rs.fields.decoders import BytesDecoder, IntDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.writer import DatasetWriter

PAGE = 1 << 21
# Global ids: a = 0..40, b = 40..100, c (two shards) = 100..150.
FIRST = [0, 40, 100]
ORDERS = [OrderOption.SEQUENTIAL, OrderOption.RANDOM, OrderOption.QUASI_RANDOM]


def blob(i):
    return np.full(100 + i % 50, i % 251, dtype=np.uint8)


def write(path, start, end, fields=None):
    fields = fields or {"index": IntField(), "blob": BytesField()}
    items = [(i, blob(i)) for i in range(start, end)]
    DatasetWriter(str(path), fields, page_size=PAGE, num_workers=1).from_indexed_dataset(
        items, progress=False)
    return str(path)


@pytest.fixture
def sources(tmp_path):
    return [write(tmp_path / "a.beton", 0, 40), write(tmp_path / "b.beton", 40, 100),
            [write(tmp_path / "c-0.beton", 100, 130), write(tmp_path / "c-1.beton", 130, 150)]]


def loader(sources, weights, **kw):
    kw.setdefault("seed", 3)
    return Loader(sources, batch_size=8, num_workers=2, drop_last=False, weights=weights,
                  pipelines={"index": [IntDecoder()], "blob": [BytesDecoder()]}, **kw)


def ids_of(batches):
    out = []
    for i, b in batches:
        idents = np.asarray(i)[:, 0].tolist()
        lengths = np.asarray(b.base.lengths()).tolist()
        for row, ident, n in zip(np.asarray(b), idents, lengths):
            assert row[:n].tobytes() == blob(ident).tobytes()
        out.extend(idents)
    return out


def source_counts(ids):
    return [sum(1 for i in ids if FIRST[s] <= i < (FIRST + [150])[s + 1]) for s in range(3)]


@pytest.mark.parametrize("order", ORDERS)
def test_counts_per_source_match_the_weights(sources, order):
    mix = loader(sources, [0.5, 0.3, 0.2], order=order)
    assert len(mix) == 150 // 8 + 1
    for _ in range(2):
        ids = ids_of(mix)
        assert len(ids) == 150
        assert source_counts(ids) == [75, 45, 30]
    # The same seed, the same epoch 0; another epoch is another order (shuffled kinds).
    again = loader(sources, [0.5, 0.3, 0.2], order=order)
    first = ids_of(again)
    assert first == ids_of(loader(sources, [0.5, 0.3, 0.2], order=order))
    if order != OrderOption.SEQUENTIAL:
        assert ids_of(again) != first


@pytest.mark.parametrize("order", ORDERS)
def test_stop_repeats_no_sample(sources, order):
    mix = loader(sources, [1, 1, 1], order=order, when_exhausted="stop")
    ids = ids_of(mix)
    assert len(set(ids)) == len(ids)
    assert source_counts(ids) == [40, 40, 40]


def test_two_ranks_take_disjoint_positions_that_make_the_epoch(sources):
    whole = ids_of(loader(sources, [2, 1, 1], order=OrderOption.RANDOM,
                          samples_per_epoch=120))
    ranks = [ids_of(loader(sources, [2, 1, 1], order=OrderOption.RANDOM,
                           samples_per_epoch=120, distributed=True, rank=r, world_size=2))
             for r in range(2)]
    assert [x for pair in zip(*ranks) for x in pair] == whole


@pytest.mark.parametrize("order", ORDERS)
def test_a_mid_epoch_state_resumes_the_rest_exactly(sources, order):
    whole = ids_of(loader(sources, [0.2, 0.5, 0.3], order=order, samples_per_epoch=200))
    first = loader(sources, [0.2, 0.5, 0.3], order=order, samples_per_epoch=200)
    it = iter(first)
    taken = ids_of(next(it) for _ in range(4))
    state = first.state_dict()
    del it
    second = loader(sources, [0.2, 0.5, 0.3], order=order, samples_per_epoch=200,
                    seed=None, os_cache=False)
    second.load_state_dict(state)
    assert taken + ids_of(second) == whole


@pytest.mark.parametrize("order", ORDERS)
def test_a_state_of_two_ranks_resumes_on_three(sources, order):
    # 120 positions; each of two ranks takes 3 batches of 8 (positions 0..48 of the global
    # order), then three ranks split the 72 left strided: 24 each, no padding.
    kw = dict(order=order, samples_per_epoch=120)
    whole = ids_of(loader(sources, [2, 1, 1], **kw))
    saved = None
    for r in range(2):
        rank = loader(sources, [2, 1, 1], distributed=True, rank=r, world_size=2, **kw)
        it = iter(rank)
        taken = ids_of(next(it) for _ in range(3))
        assert taken == whole[r:48:2]
        saved = rank.state_dict()
        del it
    for r in range(3):
        rank = loader(sources, [2, 1, 1], distributed=True, rank=r, world_size=3,
                      os_cache=False, **kw)
        rank.load_state_dict(saved)
        assert ids_of(rank) == whole[48 + r::3]


def test_bad_weights_and_knobs_raise(sources, tmp_path):
    with pytest.raises(ConfigError, match="2 weights for 3 sources"):
        loader(sources, [1, 1])
    with pytest.raises(ConfigError, match="weight 1 is -1"):
        loader(sources, [1, -1, 1])
    with pytest.raises(ConfigError, match="weight 2 is NaN"):
        loader(sources, [1, 1, float("nan")])
    with pytest.raises(ConfigError, match="sum to 0"):
        loader(sources, [0, 0, 0])
    with pytest.raises(ValueError, match="when_exhausted"):
        loader(sources, [1, 1, 1], when_exhausted="never")
    with pytest.raises(ConfigError, match="indices"):
        loader(sources, [1, 1, 1], indices=[0, 1])
    with pytest.raises(ValueError, match="need weights"):
        Loader(sources[:2], batch_size=8, samples_per_epoch=10)
    odd = str(tmp_path / "odd.beton")
    DatasetWriter(odd, {"index": FloatField(), "blob": BytesField()}, page_size=PAGE,
                  num_workers=1).from_indexed_dataset([(0.5, blob(0))], progress=False)
    with pytest.raises(FFCVError, match=r"source 1 .*odd\.beton.*index"):
        Loader([sources[0], odd], batch_size=8, weights=[1, 1])


def test_a_list_without_weights_is_still_one_shard_set(sources):
    shards = Loader(sources[:2], batch_size=8, drop_last=False,
                    pipelines={"index": [IntDecoder()], "blob": [BytesDecoder()]})
    assert ids_of(shards) == list(range(100))
