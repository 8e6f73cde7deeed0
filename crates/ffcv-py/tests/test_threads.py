"""Loaders on several Python threads: two threads each iterating a loader of its own at
the same time (each epoch exactly once, with the file's values), and two threads taking
batches of one loader's epoch between them. On a GIL build the waits overlap (the GIL is
released while a loader waits); on a free-threaded build the whole loop does."""

import sys
import sysconfig
import threading

import numpy as np
import pytest

from conftest import fixture, scalar_pairs, scalars_expected
from ffcv_rs.fields.decoders import BytesDecoder, FloatDecoder, IntDecoder
from ffcv_rs.loader import Loader, OrderOption

#: Seconds a thread may take; only a hang reaches it.
THREAD_TIMEOUT_S = 120


def run_threads(targets):
    """Runs each callable on a thread of its own, started together; returns their results
    (re-raising the first failure)."""
    results = [None] * len(targets)
    failures = []
    start = threading.Barrier(len(targets))

    def run(k, target):
        try:
            start.wait()
            results[k] = target()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            failures.append(e)

    threads = [threading.Thread(target=run, args=(k, t), daemon=True)
               for k, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(THREAD_TIMEOUT_S)
        assert not t.is_alive(), "a thread hung"
    if failures:
        raise failures[0]
    return results


def test_two_threads_iterate_two_loaders_at_once():
    scalars = Loader(fixture("scalars"), batch_size=7, num_workers=2, os_cache=False,
                     order=OrderOption.RANDOM, seed=3, drop_last=False,
                     pipelines={"index": [IntDecoder()], "value": [FloatDecoder()]})
    blobs = Loader(fixture("multipage"), batch_size=3, num_workers=2, os_cache=False,
                   order=OrderOption.QUASI_RANDOM, seed=4, drop_last=False,
                   pipelines={"index": [IntDecoder()], "blob": [BytesDecoder()]})
    # The blobs' reference: the same epochs, read on this thread alone.
    reference = Loader(fixture("multipage"), batch_size=3, num_workers=1, os_cache=True,
                       order=OrderOption.QUASI_RANDOM, seed=4, drop_last=False,
                       pipelines={"index": [IntDecoder()], "blob": [BytesDecoder()]})
    want_blobs = [[(np.array(i), np.array(b)) for i, b in reference] for _ in range(3)]

    def scalar_epochs():
        return [scalar_pairs((np.array(i), np.array(v)) for i, v in scalars) for _ in range(3)]

    def blob_epochs():
        return [[(np.array(i), np.array(b)) for i, b in blobs] for _ in range(3)]

    got_scalars, got_blobs = run_threads([scalar_epochs, blob_epochs])
    for epoch in got_scalars:
        assert epoch == scalars_expected()
    for got, want in zip(got_blobs, want_blobs):
        assert len(got) == len(want) == 14
        ids = sorted(int(x) for index, _b in got for x in index[:, 0])
        assert ids == list(range(40))
        for (index, blob), (want_index, want_blob) in zip(got, want):
            np.testing.assert_array_equal(index, want_index)
            np.testing.assert_array_equal(blob, want_blob)
    assert scalars.live_threads() == 0 and blobs.live_threads() == 0


def test_two_threads_share_one_epoch_of_one_loader():
    loader = Loader(fixture("scalars"), batch_size=5, num_workers=2, os_cache=False,
                    order=OrderOption.RANDOM, seed=8, drop_last=False,
                    pipelines={"index": [IntDecoder()], "value": [FloatDecoder()]})
    it = iter(loader)

    def take():
        mine = []
        while True:
            # No lock of the test's: the epoch is one queue, and each batch goes to
            # exactly one of the threads waiting on it.
            batch = next(it, None)
            if batch is None:
                return mine
            mine.append(tuple(np.array(x) for x in batch))

    a, b = run_threads([take, take])
    assert len(a) + len(b) == 20
    assert scalar_pairs(a + b) == scalars_expected()


def test_other_threads_query_a_loader_while_one_iterates_it():
    # The loader's state is behind its own locks: its position, counters and threads can be
    # read from any thread while another takes batches (on a free-threaded build, at the
    # same time).
    loader = Loader(fixture("scalars"), batch_size=5, num_workers=2, os_cache=False,
                    order=OrderOption.RANDOM, seed=8, drop_last=False,
                    pipelines={"index": [IntDecoder()], "value": [FloatDecoder()]})
    done = threading.Event()

    def iterate():
        try:
            return [scalar_pairs((np.array(i), np.array(v)) for i, v in loader)
                    for _ in range(3)]
        finally:
            done.set()

    def query():
        positions, batches = [], []
        while not done.is_set() or not positions:
            state = loader.state_dict()["state"]
            consumed = sum(sum(s["batches_consumed"]) for s in state["stints"])
            positions.append((state["epoch"], consumed))
            batches.append(loader.stats()["batches"])
            assert len(loader) == 20
            loader.live_threads()  # read beside the epoch's start and end; its value moves
        return positions, batches

    epochs, *queries = run_threads([iterate, query, query])
    for epoch in epochs:
        assert epoch == scalars_expected()
    for positions, batches in queries:
        # Each reader sees the position and the counters only move forward.
        assert positions == sorted(positions) and positions[-1] <= (3, 0)
        assert batches == sorted(batches) and batches[-1] <= 60
    assert loader.state_dict()["state"]["epoch"] == 3
    assert loader.stats()["batches"] == 60
    assert loader.live_threads() == 0


def test_the_module_keeps_the_gil_off_on_a_free_threaded_build():
    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("not a free-threaded interpreter (docs/python.md: none could be "
                    "installed on this machine)")
    import ffcv_rs._native  # noqa: F401 - importing a module that needs the GIL enables it
    assert not sys._is_gil_enabled()
