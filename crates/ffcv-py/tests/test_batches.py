"""Batches share the slot's memory (no copy), stay intact while held, and a slot goes back
to the loader only when the last view of it is freed."""

import gc

import numpy as np
import pytest

from conftest import expected, fixture
from ffcv_rs import _native
from ffcv_rs.fields.decoders import BytesDecoder, FloatDecoder, IntDecoder
from ffcv_rs.loader import Loader, OrderOption


def numpy_loader(batch_size=4, **kw):
    # No ToTensor: NumPy arrays whatever is installed.
    return Loader(fixture("scalars"), batch_size=batch_size, num_workers=2,
                  pipelines={"index": [IntDecoder()], "value": [FloatDecoder()]}, **kw)


def test_numpy_arrays_view_the_slot_memory():
    loader = numpy_loader()
    index, value = next(iter(loader))
    for arr in (index, value):
        assert isinstance(arr, np.ndarray)
        view = arr.base
        assert isinstance(view, _native.BatchOutput)
        assert arr.ctypes.data == view.data_ptr
        assert arr.__array_interface__["data"][0] == view.data_ptr
        assert not arr.flags.writeable  # the slot is the loader's; views are read-only
    assert index.base.slot == value.base.slot


def test_dlpack_export_shares_the_memory():
    loader = numpy_loader()
    index, _ = next(iter(loader))
    view = index.base
    assert view.__dlpack_device__() == (1, 0)
    again = np.from_dlpack(view)
    assert again.ctypes.data == view.data_ptr
    assert again[:, 0].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        view.__dlpack__(stream=7)


def run_epoch(loader):
    # The loop variable dies with the call, so no batch is held across epochs (a batch kept
    # by the caller while the next epoch runs would rightly make the pool grow).
    for batch in loader:
        pass


def test_iterating_allocates_no_slot_memory_per_batch():
    loader = numpy_loader()
    for _ in range(5):
        run_epoch(loader)
    s = loader.stats()
    assert s["batches"] == 5 * 25
    # At most batches_ahead + 2 slots (filling, queued, held; made as needed), plus one: a Python loop
    # variable still holds the previous batch while the next one is fetched, so the pool
    # may grow once. Never one allocation per batch.
    assert s["slot_allocations"] == s["slots"]
    assert s["slots"] <= 3 + 3


def test_every_batch_is_one_of_the_pools_slots_and_python_memory_stays_flat():
    import tracemalloc

    loader = numpy_loader(batch_size=4, order=OrderOption.RANDOM, seed=1)
    addresses = set()

    def address(array):
        # Not `array.ctypes.data`: NumPy's ctypes helper keeps a few objects of its own
        # alive (about 0.3 bytes a batch here), which the heap check below would count.
        return array.__array_interface__["data"][0]

    def epoch():
        for index, value in loader:
            addresses.add((address(index), address(value)))
            # The array is the slot itself: NumPy's pointer is the view's, the view's is the
            # one the slot was bound to when the pool made it.
            assert address(index) == index.base.data_ptr

    def traced_after(epochs):
        for _ in range(epochs):
            epoch()
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    for _ in range(2):
        epoch()
    tracemalloc.start()
    try:
        # The interpreter's own caches fill during the first traced epochs and collections
        # and then stay (on a free-threaded build the collector keeps 4 kB after its
        # second run): only the growth after them is the batches'.
        traced_after(4)
        settled = traced_after(4)
        end = traced_after(16)
    finally:
        tracemalloc.stop()
    s = loader.stats()
    assert s["batches"] == 26 * 25
    # 650 batches, all in the same few buffers: no batch memory is allocated per batch.
    assert len(addresses) == s["slots"] == s["slot_allocations"] <= 3 + 3
    # Python objects made per batch (views, arrays, the tuple) are freed with the batch:
    # over the last 400 batches the traced heap grows by less than 1,000 bytes, where one
    # object kept per batch would add at least 12,800 (the set above holds at most 6
    # entries).
    grew = end - settled
    assert grew < 1_000, f"Python heap grew by {grew} bytes over 400 batches"


def test_twenty_held_batches_stay_intact_through_the_epoch():
    exp = expected("scalars")
    loader = numpy_loader(batch_size=4, order=OrderOption.RANDOM, seed=3)
    assert len(loader) == 25
    held = [batch for batch in loader][:20]
    # Every other batch was produced (and freed) after these; they must be unchanged.
    order = loader.order_of(0)
    for b, (index, value) in enumerate(held):
        ids = order[4 * b: 4 * b + 4]
        assert index[:, 0].tolist() == ids
        bits = [exp["outputs"][1]["bits"][i] for i in ids]
        assert value.view(np.uint64)[:, 0].tolist() == bits


def test_a_slice_keeps_its_batch_alive_across_later_epochs():
    loader = numpy_loader(batch_size=10)
    index, value = next(iter(loader))
    keep = index[3:5]  # a view of a view: the batch must stay alive through it
    del index, value
    gc.collect()
    for _ in range(3):
        for _ in loader:
            pass
    assert keep[:, 0].tolist() == [3, 4]


def test_slots_come_back_once_every_view_is_freed():
    loader = numpy_loader(batch_size=4)
    for _ in loader:
        pass
    slots = loader.stats()["slots"]
    held = [b for b in loader]  # all 25 held: the pool grows
    grown = loader.stats()["slots"]
    assert grown > slots
    del held
    gc.collect()
    for _ in loader:
        pass
    assert loader.stats()["slots"] == grown  # reused, not grown again


def test_bytes_outputs_have_lengths_and_zero_padding():
    loader = Loader(fixture("bytes_ndarray"), batch_size=7, drop_last=False,
                    pipelines={"blob": [BytesDecoder()], "index": [IntDecoder()]})
    exp = expected("bytes_ndarray")["outputs"][1]["samples"]
    index, blob, vec, mat = next(iter(loader))
    lengths = np.asarray(blob.base.lengths())
    assert lengths.tolist() == [exp[i]["len"] for i in range(7)]
    ids = np.asarray(blob.base.sample_ids())
    assert ids.tolist() == list(range(7))


def test_float16_normalize_is_ffcvs_table_in_the_slot_memory():
    # FFCV's NormalizeImage builds a float64 table and rounds it once to float16; the loader
    # now computes float16 itself, so the batch is a view of the slot, not a converted copy.
    from ffcv_rs.fields.decoders import SimpleRGBImageDecoder
    from ffcv_rs.transforms import NormalizeImage
    mean = np.array([0.485, 0.456, 0.406]) * 255
    std = np.array([0.229, 0.224, 0.225]) * 255
    kw = dict(batch_size=4, num_workers=2, order=OrderOption.SEQUENTIAL)
    normalized = Loader(fixture("images_raw"), pipelines={
        "image": [SimpleRGBImageDecoder(), NormalizeImage(mean, std, np.float16)],
        "label": None, "index": None}, **kw)
    raw = Loader(fixture("images_raw"), pipelines={
        "image": [SimpleRGBImageDecoder()], "label": None, "index": None}, **kw)
    n = 0
    for (got,), (pixels,) in zip(normalized, raw):
        assert got.dtype == np.float16 and isinstance(got.base, _native.BatchOutput)
        want = ((pixels.astype(np.float64) - mean) / std).astype(np.float16)
        assert np.array_equal(got, want)
        n += 1
    assert n == len(raw) > 0
