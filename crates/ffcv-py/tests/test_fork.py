"""Loaders across ``fork``: a loader used in a forked child raises a clear ``FFCVError``
(its threads are the parent's), a loader built in the child works, the parent's loader
goes on unharmed; the same with ``spawn``, and under a torch ``DataLoader`` with worker
processes. Every child has a hard timeout, so a hang fails the test instead of blocking.
"""

import gc
import json
import multiprocessing
import os
import pickle

import numpy as np
import pytest

from conftest import fixture, scalar_pairs, scalars_expected, torch_or_skip
from ffcv_rs import _native
from ffcv_rs.errors import FFCVError
from ffcv_rs.fields.decoders import FloatDecoder, IntDecoder
from ffcv_rs.loader import Loader, OrderOption

# Python 3.12 and later warn that forking a process with threads may deadlock the child;
# that is what these tests check does not happen.
pytestmark = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")

#: Seconds a child may take; far more than it needs, so that only a hang reaches it.
CHILD_TIMEOUT_S = 120


def scalars_loader(**kw):
    # The process cache (os_cache=False) and two workers: page readers, a producer and a
    # decoding pool, every kind of thread a fork leaves behind.
    kw.setdefault("order", OrderOption.RANDOM)
    return Loader(fixture("scalars"), batch_size=7, num_workers=2, os_cache=False, seed=11,
                  drop_last=False,
                  pipelines={"index": [IntDecoder()], "value": [FloatDecoder()]}, **kw)


def copied(batch):
    return tuple(np.array(x) for x in batch)


def run_child(ctx, target, *args):
    """Starts `target(*args)` in a process of context `ctx`, waits for it (at most
    CHILD_TIMEOUT_S) and returns its exit code."""
    p = ctx.Process(target=target, args=args)
    p.start()
    p.join(CHILD_TIMEOUT_S)
    if p.is_alive():
        p.kill()
        p.join()
        pytest.fail(f"the child process hung (still running after {CHILD_TIMEOUT_S} s)")
    return p.exitcode


def write(path, result):
    with open(path, "w") as f:
        json.dump(result, f)


def read(path):
    with open(path) as f:
        return json.load(f)


# The children. Module-level functions, so that a 'spawn' child can import them.

def use_parents_loader(loader, it, out, held=None):
    """In a forked child: every use of the parent's loader and its running epoch; a batch
    of the parent's is read, then freed."""
    errors = {}
    if held is not None:
        errors["held"] = [np.asarray(x).tolist() for x in held]
        del held
        gc.collect()
    for name, use in [("next", lambda: next(it)), ("iter", lambda: iter(loader)),
                      ("len", lambda: len(loader)), ("stats", loader.stats)]:
        try:
            use()
            errors[name] = None
        except FFCVError as e:
            errors[name] = str(e)
    write(out, errors)


def build_own_loader(out):
    """In any child: a loader of its own, one full epoch, then a second."""
    loader = scalars_loader()
    first = scalar_pairs(copied(b) for b in loader)
    second = scalar_pairs(copied(b) for b in loader)
    write(out, {"pid": os.getpid(), "first": sorted(first.items()),
                "second": sorted(second.items()), "live_threads": loader.live_threads()})


def test_a_forked_child_using_the_parents_loader_gets_a_clear_error_and_the_parent_goes_on(
        tmp_path):
    loader = scalars_loader()
    it = iter(loader)
    head = [copied(next(it)) for _ in range(3)]  # mid-epoch: its threads are running
    held = next(it)  # a batch over the loader's slot memory, as the child sees it
    head.append(copied(held))
    out = str(tmp_path / "child.json")
    code = run_child(multiprocessing.get_context("fork"), use_parents_loader, loader, it, out,
                     held)
    assert code == 0
    errors = read(out)
    assert errors.pop("held") == [x.tolist() for x in head[-1]]
    del held
    assert set(errors) == {"next", "iter", "len", "stats"}
    for name, message in errors.items():
        assert message is not None, f"{name} worked in the child"
        assert "after a fork" in message and "create the loader in the child" in message
        assert "'spawn'" in message
    # The parent's epoch goes on where it was, then a whole new one.
    rest = [copied(b) for b in it]
    assert scalar_pairs(head + rest) == scalars_expected()
    assert scalar_pairs(copied(b) for b in loader) == scalars_expected()
    assert loader.live_threads() == 0


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_child_builds_its_own_loader_while_the_parent_is_mid_epoch(tmp_path, method):
    loader = scalars_loader()
    it = iter(loader)
    head = [copied(next(it)) for _ in range(2)]
    out = str(tmp_path / "child.json")
    code = run_child(multiprocessing.get_context(method), build_own_loader, out)
    assert code == 0
    child = read(out)
    assert child["pid"] != os.getpid()
    assert dict(map(tuple, child["first"])) == scalars_expected()
    assert dict(map(tuple, child["second"])) == scalars_expected()
    assert child["live_threads"] == 0
    assert scalar_pairs(head + [copied(b) for b in it]) == scalars_expected()


def run_transforms(transforms, out):
    """Runs `transforms` (a _native.BatchTransforms) on two samples; writes the output
    or the error."""
    x = np.arange(2, dtype=np.int64).reshape(2, 1)
    y = np.empty((2, *transforms.output_shape), dtype=np.dtype(transforms.output_dtype))
    try:
        transforms.run(x.ctypes.data, x.nbytes, y.ctypes.data, y.nbytes, [0, 1], 0, 0)
        write(out, {"output": y.tolist()})
    except FFCVError as e:
        write(out, {"error": str(e)})


def test_a_forked_child_cannot_run_the_parents_batch_transforms(tmp_path):
    # The transforms that run after a user's operation have their own thread pool.
    transforms = _native.BatchTransforms([1], "int64", [("Squeeze", {})], 2, False)
    here = str(tmp_path / "parent.json")
    run_transforms(transforms, here)
    assert read(here) == {"output": [0, 1]}
    out = str(tmp_path / "child.json")
    assert run_child(multiprocessing.get_context("fork"), run_transforms, transforms, out) == 0
    assert "after a fork" in read(out)["error"]
    run_transforms(transforms, here)
    assert read(here) == {"output": [0, 1]}


def test_spawn_refuses_to_send_a_loader_to_the_child(tmp_path):
    # A 'spawn' child gets its arguments pickled; a loader (threads, a mapped file) is
    # not picklable, which fails in the parent at start, before any child runs.
    loader = scalars_loader()
    with pytest.raises((TypeError, pickle.PicklingError)):
        pickle.dumps(loader)
    p = multiprocessing.get_context("spawn").Process(
        target=use_parents_loader, args=(loader, None, str(tmp_path / "never.json")))
    with pytest.raises((TypeError, pickle.PicklingError)):
        p.start()
    assert not (tmp_path / "never.json").exists()
    assert scalar_pairs(copied(b) for b in loader) == scalars_expected()


def test_forked_children_in_a_row_leave_the_parent_working(tmp_path):
    loader = scalars_loader(order=OrderOption.SEQUENTIAL)
    ctx = multiprocessing.get_context("fork")
    for k in range(3):
        it = iter(loader)
        head = [copied(next(it)) for _ in range(k + 1)]
        out = str(tmp_path / f"child{k}.json")
        assert run_child(ctx, build_own_loader, out) == 0
        assert dict(map(tuple, read(out)["first"])) == scalars_expected()
        assert scalar_pairs(head + [copied(b) for b in it]) == scalars_expected()


# torch: a map-style Dataset that reads through ffcv_rs, under DataLoader workers.

class LazyFFCVDataset:
    """Sample i of scalars.beton, read through an ffcv_rs loader that each process
    builds for itself on first use (the pattern the fork error points to)."""

    def __init__(self):
        self._pid = None
        self._rows = None

    def __len__(self):
        return 100

    def __getitem__(self, i):
        if self._pid != os.getpid():
            loader = scalars_loader(order=OrderOption.SEQUENTIAL)
            self._rows = {k: v for k, v in scalar_pairs(copied(b) for b in loader).items()}
            self._pid = os.getpid()
        # The bits as a signed int64, which torch's collation takes.
        return i, int(np.array(self._rows[i], dtype=np.uint64).view(np.int64)), os.getpid()


class ParentLoaderDataset:
    """Holds a loader built in the parent: wrong under fork workers."""

    def __init__(self):
        self.loader = scalars_loader()

    def __len__(self):
        return 100

    def __getitem__(self, i):
        return len(self.loader)


def test_torch_dataloader_workers_read_through_their_own_loaders():
    torch = torch_or_skip()
    parent = scalars_loader()
    it = iter(parent)
    head = [copied(next(it))]  # the parent's loader is mid-epoch while workers fork
    dl = torch.utils.data.DataLoader(LazyFFCVDataset(), batch_size=10, shuffle=True,
                                     num_workers=2, multiprocessing_context="fork",
                                     timeout=CHILD_TIMEOUT_S)
    got = {}
    pids = set()
    for ids, bits, pid in dl:
        for i, b in zip(ids.tolist(), bits.tolist()):
            assert i not in got
            got[i] = b & 0xFFFFFFFFFFFFFFFF  # torch's int64 back to the unsigned bits
        pids.update(pid.tolist())
    assert got == scalars_expected()
    assert len(pids) == 2 and os.getpid() not in pids
    assert scalar_pairs(head + [copied(b) for b in it]) == scalars_expected()


def test_torch_dataloader_over_a_parents_loader_raises_the_fork_error():
    torch = torch_or_skip()
    dl = torch.utils.data.DataLoader(ParentLoaderDataset(), batch_size=10, num_workers=2,
                                     multiprocessing_context="fork", timeout=CHILD_TIMEOUT_S)
    with pytest.raises(FFCVError, match="after a fork"):
        for _ in dl:
            pass
