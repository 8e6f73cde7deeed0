"""``loader.indices = ...`` between epochs (ffcv-rs; FFCV ignores a new value): a curriculum
that grows the subset each epoch yields exactly its current set every epoch, under every
order, in one process and over two and three ranks; ``state_dict`` after a change records
the set's hash and resumes exactly (random crops and flips included); a change while an
epoch runs, an id out of range, a custom order and bad values raise."""

import hashlib
import json

import numpy as np
import pytest

from resume_support import assert_same, copies, jpeg_loader
from ffcv_rs import ConfigError
from ffcv_rs.fields import BytesField, IntField
from ffcv_rs.fields.decoders import IntDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.traversal_order.base import TraversalOrder
from ffcv_rs.writer import DatasetWriter

N = 120
ORDERS = [OrderOption.SEQUENTIAL, OrderOption.RANDOM, OrderOption.QUASI_RANDOM]


def curriculum(n):
    """A scattered 10 %, then 40 %, then every sample; each set holds the one before."""
    perm = [(i * 7 + 3) % n for i in range(n)]  # 7 is prime to the sizes used here
    return [perm[: max(n // 10, 1)], perm[: n * 4 // 10], perm]


@pytest.fixture(scope="module")
def blobs(tmp_path_factory):
    # Bytes in 2 MiB pages, so that QuasiRandom has several pages to walk.
    path = str(tmp_path_factory.mktemp("subsets") / "blobs.beton")
    items = [(i, np.full(40_000 + 97 * i, i % 251, dtype=np.uint8)) for i in range(N)]
    DatasetWriter(path, {"index": IntField(), "blob": BytesField()}, page_size=1 << 21,
                  num_workers=1).from_indexed_dataset(items, progress=False)
    return path


def index_loader(path, order, **kw):
    return Loader(path, batch_size=8, num_workers=2, order=order, seed=3, drop_last=False,
                  pipelines={"index": [IntDecoder()], "blob": None}, **kw)


def epoch_ids(loader):
    return [i for (index,) in loader for i in np.asarray(index)[:, 0].tolist()]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("as_array", [False, True])
def test_a_growing_curriculum_yields_exactly_the_current_set_every_epoch(blobs, order, as_array):
    loader = index_loader(blobs, order)
    assert loader.indices.tolist() == list(range(N))
    for epoch, ids in enumerate(curriculum(N)):
        loader.indices = np.asarray(ids, dtype=np.int64) if as_array else ids
        assert loader.indices.dtype == np.uint64 and loader.indices.tolist() == ids
        assert len(loader) == -(-len(ids) // 8)
        got = epoch_ids(loader)
        assert sorted(got) == sorted(ids), f"epoch {epoch}: each id of the set once"
        assert got == loader.order_of(epoch)
        # The order a loader built over the set runs.
        assert got == index_loader(blobs, order, indices=ids).order_of(epoch)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("world", [2, 3])
def test_ranks_split_the_current_set_as_they_split_the_first(blobs, order, world):
    ranks = [index_loader(blobs, order, distributed=True, rank=r, world_size=world)
             for r in range(world)]
    for epoch, ids in enumerate(curriculum(N)):
        got = []
        for rank, loader in enumerate(ranks):
            loader.indices = ids
            mine = epoch_ids(loader)
            fresh = index_loader(blobs, order, indices=ids, distributed=True, rank=rank,
                                 world_size=world)
            assert mine == fresh.order_of(epoch)
            got += mine
        # Every id of the set, plus DistributedSampler's padding to a multiple of the world.
        assert set(got) == set(ids)
        assert len(got) == -(-len(ids) // world) * world


def hash64(ids):
    return hashlib.sha256(np.asarray(ids, dtype="<u8").tobytes()).hexdigest()[:16]


def test_a_state_saved_after_a_change_resumes_exactly():
    n = jpeg_loader().reader.num_samples
    sets = curriculum(n)
    plain = jpeg_loader(indices=sets[0])
    list(plain)
    plain.indices = sets[1]
    whole = copies(plain)
    assert len(whole) >= 2

    first = jpeg_loader(indices=sets[0])
    list(first)
    first.indices = sets[1]
    it = iter(first)
    taken = copies([next(it)])
    state = json.loads(json.dumps(first.state_dict()))
    del it
    assert state["state"]["epoch"] == 1
    assert state["state"]["indices"]["hash64"] == hash64(sets[1])

    # A new process builds over the set in use, or sets it before loading the state.
    for resumed in (jpeg_loader(indices=sets[1]), jpeg_loader()):
        if resumed.indices.tolist() != sets[1]:
            resumed.indices = sets[1]
        resumed.load_state_dict(state)
        assert_same(taken + copies(resumed), whole)

    with pytest.raises(ConfigError, match="another index set") as refused:
        jpeg_loader(indices=sets[0]).load_state_dict(state)
    assert hash64(sets[1]) in str(refused.value) and hash64(sets[0]) in str(refused.value)


def test_bad_changes_raise_and_leave_the_set(blobs):
    loader = index_loader(blobs, OrderOption.SEQUENTIAL)
    it = iter(loader)
    next(it)
    with pytest.raises(ConfigError, match="an epoch is running"):
        loader.indices = [1, 2]
    del it  # leaving the loop stops the epoch
    loader.indices = [1, 2]
    with pytest.raises(ConfigError, match=r"indices\[1\] = 1000 is out of range: the file has 120"):
        loader.indices = [0, 1000]
    with pytest.raises(ValueError, match="negative"):
        loader.indices = [0, -1]
    with pytest.raises(TypeError, match="integers"):
        loader.indices = [0.5, 1.0]
    assert loader.indices.tolist() == [1, 2]
    assert epoch_ids(loader) == [1, 2]
    # None: every sample again; an empty set runs an empty epoch; repeats come as listed.
    loader.indices = None
    assert loader.indices.tolist() == list(range(N)) and len(epoch_ids(loader)) == N
    loader.indices = []
    assert len(loader) == 0 and epoch_ids(loader) == []
    loader.indices = [4, 4, 9]
    assert epoch_ids(loader) == [4, 4, 9]


class Evens(TraversalOrder):
    def sample_order(self, epoch):
        return [i for i in self.indices if i % 2 == 0]


def test_a_custom_order_keeps_deciding_its_samples(blobs):
    loader = index_loader(blobs, Evens)
    with pytest.raises(ConfigError, match="custom order"):
        loader.indices = [1, 2, 3]
    assert epoch_ids(loader) == list(range(0, N, 2))
