"""The one-call hand-over (`_native.Loader.next_outputs`): when Python only converts the
Rust loader's outputs, each batch is one native call returning every output. Its batches
equal those of the per-output path (views, then each output's plan), a batch the user
holds is never overwritten, slots come back once the outputs (or unconsumed capsules) are
freed, and pipelines with Python steps keep the per-output path."""

import gc

import numpy as np
import pytest

from conftest import as_numpy, expected, fixture, torch_or_skip
from ffcv_rs.fields.decoders import (BytesDecoder, CenterCropRGBImageDecoder, FloatDecoder,
                                     IntDecoder, NDArrayDecoder, SimpleRGBImageDecoder)
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.loader.plan import HAND_CAPSULE, HAND_VIEW
from ffcv_rs.pipeline.operation import Operation
from ffcv_rs.transforms import Convert, Squeeze, ToTensor, ToTorchImage, View


def epoch(loader, one_call):
    """Every batch of one epoch, through the one-call path or the per-output path."""
    it = iter(loader)
    if one_call:
        assert it._hand_over is not None
    else:
        it._hand_over = None  # the per-output path: views, then each OutputPlan
    return list(it)


def assert_same_batches(a, b):
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert len(x) == len(y)
        for u, v in zip(x, y):
            assert type(u) is type(v)
            assert tuple(u.shape) == tuple(v.shape) and u.dtype == v.dtype
            if isinstance(u, np.ndarray):
                assert u.strides == v.strides and u.flags.writeable == v.flags.writeable
            else:
                assert u.stride() == v.stride()
            assert np.array_equal(as_numpy(u), as_numpy(v), equal_nan=True)


def twins(path, pipelines, **kw):
    """Two loaders with the same arguments (so the same epochs), one per path."""
    args = dict(batch_size=4, num_workers=2, order=OrderOption.RANDOM, seed=5, drop_last=False,
                **kw)
    return Loader(path, pipelines=pipelines(), **args), Loader(path, pipelines=pipelines(), **args)


NUMPY_PIPELINES = {
    "scalars": lambda: {"index": [IntDecoder()], "value": [FloatDecoder()]},
    "bytes_ndarray": lambda: {"index": [IntDecoder(), Squeeze()], "blob": [BytesDecoder()],
                              "vec": [NDArrayDecoder(), View(np.uint8)],
                              "mat": [NDArrayDecoder(), Convert(np.float64)]},
    "images_raw": lambda: {"image": [SimpleRGBImageDecoder()], "label": [IntDecoder()],
                           "index": None},
    "images_jpg": lambda: {"image": [CenterCropRGBImageDecoder((16, 16), 1.0)],
                           "label": None, "index": [IntDecoder()]},
}


@pytest.mark.parametrize("name", sorted(NUMPY_PIPELINES))
def test_numpy_outputs_equal_the_per_output_path(name):
    fast, slow = twins(fixture(name), NUMPY_PIPELINES[name])
    for _ in range(2):
        assert_same_batches(epoch(fast, True), epoch(slow, False))


TORCH_PIPELINES = {
    # FFCV's default pipelines: decoder + ToTensor for every field.
    "scalars": lambda: {},
    "bytes_ndarray": lambda: {"index": [IntDecoder(), ToTensor(), Squeeze()],
                              "blob": [BytesDecoder(), ToTensor()],
                              "vec": [NDArrayDecoder(), ToTensor(), View(np.uint8)],
                              "mat": [NDArrayDecoder()]},
    "images_raw": lambda: {"image": [SimpleRGBImageDecoder(), ToTensor(), ToTorchImage()],
                           "label": [IntDecoder(), ToTensor(), Squeeze()], "index": None},
    "images_jpg": lambda: {"image": [CenterCropRGBImageDecoder((16, 16), 1.0), ToTensor(),
                                     ToTorchImage(channels_last=False)],
                           "label": [IntDecoder(), ToTensor(), Convert(np.float32)]},
}


@pytest.mark.parametrize("name", sorted(TORCH_PIPELINES))
def test_torch_outputs_equal_the_per_output_path(name):
    torch_or_skip()
    fast, slow = twins(fixture(name), TORCH_PIPELINES[name])
    for _ in range(2):
        assert_same_batches(epoch(fast, True), epoch(slow, False))


class Double(Operation):
    """A user's operation (Python, on the consumer's thread)."""

    def generate_code(self):
        def double(x, dst):
            dst[:] = 2 * x
            return dst
        return double

    def declare_state_and_memory(self, previous_state):
        from ffcv_rs.pipeline.allocation_query import AllocationQuery
        return previous_state, AllocationQuery(previous_state.shape, previous_state.dtype)


def test_the_one_call_path_is_taken_only_where_python_only_converts():
    simple = Loader(fixture("scalars"), batch_size=4, pipelines=NUMPY_PIPELINES["scalars"]())
    assert iter(simple)._hand_over == ((0, HAND_VIEW, np.asarray), (1, HAND_VIEW, np.asarray))
    user_op = Loader(fixture("scalars"), batch_size=4,
                     pipelines={"index": [IntDecoder()], "value": [FloatDecoder(), Double()]})
    assert iter(user_op)._hand_over is None
    callable_op = Loader(fixture("scalars"), batch_size=4,
                         pipelines={"index": [IntDecoder(), lambda x: x], "value": None})
    assert iter(callable_op)._hand_over is None
    # The per-output path still gives the user's operation its result.
    _, doubled = next(iter(user_op))
    assert np.array_equal(np.asarray(doubled), 2 * np.asarray(next(iter(simple))[1]))


def test_padded_rows_keep_the_per_output_path(tmp_path):
    from ffcv_rs.fields import IntField, VarArrayField
    from ffcv_rs.fields.decoders import VarArrayDecoder
    from ffcv_rs.writer import DatasetWriter

    path = str(tmp_path / "var.beton")
    items = [(i, np.arange(i % 3, dtype=np.int32) + i) for i in range(10)]
    DatasetWriter(path, {"label": IntField(), "tokens": VarArrayField("<i4")},
                  num_workers=1).from_indexed_dataset(items, progress=False)
    loader = Loader(path, batch_size=5, order=OrderOption.SEQUENTIAL,
                    pipelines={"label": [IntDecoder()], "tokens": [VarArrayDecoder()]})
    it = iter(loader)
    assert it._hand_over is None
    label, (rows, lengths) = next(it)
    assert np.asarray(lengths).tolist() == [0, 1, 2, 0, 1]
    assert np.asarray(rows)[2, :2].tolist() == [2, 3]


def test_held_tensors_are_never_overwritten():
    torch = torch_or_skip()
    exp = expected("scalars")
    loader = Loader(fixture("scalars"), batch_size=4, num_workers=2, order=OrderOption.RANDOM,
                    seed=3)
    it = iter(loader)
    assert it._hand_over is not None
    assert all(how == HAND_CAPSULE for _, how, _ in it._hand_over)
    held = list(it)  # all 25 batches, while the loader keeps producing into free slots
    order = loader.order_of(0)
    for b, (index, value) in enumerate(held):
        assert isinstance(index, torch.Tensor) and index.dtype == torch.int64
        ids = order[4 * b: 4 * b + 4]
        assert index[:, 0].tolist() == ids
        bits = [exp["outputs"][1]["bits"][i] for i in ids]
        assert value.numpy().view(np.uint64)[:, 0].tolist() == bits


def test_tensors_view_the_slots_and_free_them():
    torch_or_skip()
    loader = Loader(fixture("scalars"), batch_size=4, num_workers=2)
    addresses = set()
    for _ in range(5):
        for index, value in loader:
            addresses.add((index.data_ptr(), value.data_ptr()))
    s = loader.stats()
    assert s["batches"] == 5 * 25
    # 125 batches in the same few slots: no copy, and each slot comes back once its
    # tensors die.
    assert len(addresses) == s["slots"] == s["slot_allocations"] <= 3 + 3


def test_unconsumed_capsules_give_their_slot_back():
    loader = Loader(fixture("scalars"), batch_size=4, num_workers=2,
                    pipelines={"index": [IntDecoder()], "value": [FloatDecoder()]})
    native = loader._native
    plan = ((0, HAND_CAPSULE, lambda c: c), (1, HAND_CAPSULE, lambda c: c))
    for _ in range(4):
        epoch = native.start_epoch()
        n = 0
        while (batch := native.next_outputs(epoch.id, plan)) is not None:
            assert [type(c).__name__ for c in batch] == ["PyCapsule", "PyCapsule"]
            n += 1
        assert n == 25
        del batch
    gc.collect()
    s = loader.stats()
    # Each capsule's destructor freed its export (the batch), so the pool did not grow.
    assert s["batches"] == 100 and s["slots"] == s["slot_allocations"] <= 3 + 3


def test_a_bad_plan_is_a_clear_error():
    loader = Loader(fixture("scalars"), batch_size=4,
                    pipelines={"index": [IntDecoder()], "value": [FloatDecoder()]})
    native = loader._native
    epoch = native.start_epoch()
    with pytest.raises(IndexError, match="output 7 does not exist"):
        native.next_outputs(epoch.id, ((7, HAND_VIEW, np.asarray),))
    with pytest.raises(ValueError, match="hand-over kind 9"):
        native.next_outputs(epoch.id, ((0, 9, np.asarray),))

    def refuse(_):
        raise RuntimeError("converter failed")
    with pytest.raises(RuntimeError, match="converter failed"):
        native.next_outputs(epoch.id, ((0, HAND_VIEW, refuse),))
    # The epoch goes on with the batches after the three taken above.
    (index,) = native.next_outputs(epoch.id, ((0, HAND_VIEW, np.asarray),))
    assert index[:, 0].tolist() == [12, 13, 14, 15]
