"""FFCV's Operation protocol in ffcv_rs pipelines: users' operations anywhere after the
decoder (between built-ins too), operations that take the batch's indices, reused output
buffers that never overwrite a batch the user holds, ``recompile`` and ``Loader.code``,
the built-ins driven through the protocol, and FFCV's error types.

Without numba (CI) the operations run as Python; the reference environment runs the same
tests with numba."""

import gc
from dataclasses import replace

import numpy as np
import pytest

from conftest import expected, fixture
from ffcv_rs import ImageSizeError
from ffcv_rs.fields.basics import FloatDecoder, IntDecoder
from ffcv_rs.fields.rgb_image import CenterCropRGBImageDecoder, SimpleRGBImageDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.pipeline.allocation_query import AllocationQuery
from ffcv_rs.pipeline.compiler import Compiler
from ffcv_rs.pipeline.operation import Operation
from ffcv_rs.pipeline.state import State
from ffcv_rs.transforms import Convert, NormalizeImage, RandomHorizontalFlip, ReplaceLabel, Squeeze


class Doubler(Operation):
    """FFCV's own test operation: a new buffer of the same state, twice the input."""

    def generate_code(self):
        def code(x, dst):
            dst[:] = x * 2
            return dst
        return code

    def declare_state_and_memory(self, previous_state):
        return previous_state, AllocationQuery(previous_state.shape, previous_state.dtype)


class AddIndex(Operation):
    """Writes each sample's id into its row, in place (FFCV's ``with_indices``)."""

    def generate_code(self):
        loop = Compiler.get_iterator()

        def code(x, _dst, indices):
            for i in loop(x.shape[0]):
                x[i] = indices[i]
            return x
        code.is_parallel = True
        code.with_indices = True
        return code

    def declare_state_and_memory(self, previous_state):
        return previous_state, None


class Invert(Operation):
    """255 - x into a new uint8 buffer: an image operation of the user's."""

    def generate_code(self):
        def code(images, dst):
            dst[:] = 255 - images
            return dst
        return code

    def declare_state_and_memory(self, previous_state):
        return replace(previous_state, jit_mode=True), AllocationQuery(previous_state.shape, np.uint8)


def values():
    """The scalars fixture's float values as the Rust loader decodes them (NaN included:
    compare with ``equal_nan``)."""
    loader = Loader(fixture("scalars"), batch_size=100, drop_last=False,
                    pipelines={"value": [FloatDecoder()], "index": None})
    return np.concatenate([np.asarray(v)[:, 0] for (v,) in loader])


def test_a_users_operation_after_the_decoder():
    loader = Loader(fixture("scalars"), batch_size=10, order=OrderOption.SEQUENTIAL,
                    pipelines={"value": [FloatDecoder(), Doubler()], "index": None})
    got = np.concatenate([np.asarray(v)[:, 0] for (v,) in loader])
    with np.errstate(over="ignore"):
        assert np.array_equal(got, 2 * values()[: len(got)], equal_nan=True)


def test_built_ins_after_a_users_operation_run_in_python_with_their_semantics():
    # Doubler, then Convert and Squeeze: the last two run after it, through the protocol.
    loader = Loader(fixture("scalars"), batch_size=10,
                    pipelines={"value": [FloatDecoder(), Doubler(), Convert(np.float32), Squeeze()],
                               "index": None})
    (v,) = next(iter(loader))
    v = np.asarray(v)
    assert v.dtype == np.float32 and v.shape == (10,)
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.array_equal(v, (2 * values()[:10]).astype(np.float32), equal_nan=True)


def test_operations_with_indices_get_the_batchs_sample_ids():
    loader = Loader(fixture("scalars"), batch_size=8, order=OrderOption.RANDOM, seed=3,
                    pipelines={"index": [IntDecoder(), AddIndex()], "value": None})
    order = loader.order_of(0)
    got = np.concatenate([np.asarray(i)[:, 0] for (i,) in loader])
    assert got.tolist() == order[: len(got)]


def test_replace_label_after_a_users_operation_matches_the_native_one():
    ids = [1, 5, 6, 40]
    # The index field holds each sample's id, so the expected rows are known.
    native = Loader(fixture("scalars"), batch_size=8, pipelines={
        "index": [IntDecoder(), ReplaceLabel(ids, -7)], "value": None})
    python = Loader(fixture("scalars"), batch_size=8, pipelines={
        "index": [IntDecoder(), Doubler(), ReplaceLabel(ids, -7)], "value": None})
    start = 0
    for (a,), (b,) in zip(native, python):
        sample = np.arange(start, start + 8)
        start += 8
        assert np.array_equal(np.asarray(a)[:, 0], np.where(np.isin(sample, ids), -7, sample))
        assert np.array_equal(np.asarray(b)[:, 0], np.where(np.isin(sample, ids), -7, 2 * sample))


def test_a_users_operation_between_decoder_and_built_in_transforms():
    # Invert in Python, then a certain flip and the normalisation, also in Python.
    mean, std = [10.0, 20.0, 30.0], [2.0, 4.0, 8.0]
    plain = Loader(fixture("images_raw"), batch_size=4,
                   pipelines={"image": [SimpleRGBImageDecoder()], "label": None, "index": None})
    mixed = Loader(fixture("images_raw"), batch_size=4, pipelines={
        "image": [SimpleRGBImageDecoder(), Invert(), RandomHorizontalFlip(1.0),
                  NormalizeImage(mean, std, np.float32)],
        "label": None, "index": None})
    table = ((np.arange(256)[:, None] - np.array(mean)) / np.array(std)).astype(np.float32)
    for (a,), (b,) in zip(plain, mixed):
        flipped = (255 - np.asarray(a))[:, :, ::-1]
        want = table[flipped, np.arange(3)]
        assert np.asarray(b).dtype == np.float32
        assert np.array_equal(np.asarray(b), want)


def test_output_buffers_are_reused_but_never_while_held():
    loader = Loader(fixture("scalars"), batch_size=10,
                    pipelines={"value": [FloatDecoder(), Doubler()], "index": None})
    held = [(v, np.array(v, copy=True)) for (v,) in loader]
    # Every batch kept its own values although all were alive at once.
    assert all(np.array_equal(v, copy, equal_nan=True) for v, copy in held)
    pool = loader._output_plans[0].steps[0].pools
    assert len(pool.buffers) == len(held) == len(loader)
    del held
    gc.collect()
    # Nothing held any more: later epochs reuse those buffers, allocating none.
    for _ in range(3):
        for (v,) in loader:
            del v
    assert len(pool.buffers) == len(loader)


def test_code_is_kept_between_epochs_and_regenerated_with_recompile():
    kept = Loader(fixture("scalars"), batch_size=10,
                  pipelines={"value": [FloatDecoder(), Doubler()]})
    iter(kept)
    first = kept.code
    iter(kept)
    assert kept.code is first
    names = {name: (native, python) for name, native, python in first}
    assert names["value"][0] == ("FloatDecoder",) and len(names["value"][1]) == 1
    assert names["index"] == (("IntDecoder",), ())

    again = Loader(fixture("scalars"), batch_size=10, recompile=True,
                   pipelines={"value": [FloatDecoder(), Doubler()]})
    iter(again)
    before = again.code
    iter(again)
    assert again.code != before


def test_variable_size_images_under_simple_decoder_are_ffcvs_type_error():
    with pytest.raises(TypeError) as info:
        Loader(fixture("images_jpg"), batch_size=4, pipelines={"image": [SimpleRGBImageDecoder()]})
    assert isinstance(info.value, ImageSizeError) and isinstance(info.value, ValueError)


def test_a_decoder_driven_through_the_protocol_matches_the_loader():
    # FFCV's tests drive a decoder by hand: accept_globals, generate_code, Compiler.compile.
    from ffcv_rs.memory_managers import OSCacheManager
    from ffcv_rs.reader import Reader

    reader = Reader(fixture("images_jpg"))
    manager = OSCacheManager(reader)
    context = manager.schedule_epoch(np.arange(4))
    decoder = CenterCropRGBImageDecoder((32, 32))
    decoder.accept_globals(reader.metadata["f0"], manager.compile_reader())
    state, (query, scratch) = decoder.declare_state_and_memory(
        State(jit_mode=True, device="cpu", shape=None, dtype=np.uint8))
    assert state.shape == (32, 32, 3) and query.shape == (32, 32, 3)
    decode = Compiler.compile(decoder.generate_code())
    out = np.zeros((4, 32, 32, 3), np.uint8)
    tmp = np.zeros((4, int(scratch.shape[0])), np.uint8)
    with context:
        got = decode(np.arange(4, dtype=np.uint64), (out, tmp), reader.metadata["f0"], context.state)
    loader = Loader(fixture("images_jpg"), batch_size=4,
                    pipelines={"image": [CenterCropRGBImageDecoder((32, 32))], "label": None,
                               "index": None})
    (want,) = next(iter(loader))
    assert np.array_equal(got, np.asarray(want))


def test_compile_off_interprets_the_rust_pipeline_with_the_same_result():
    Compiler.set_enabled(False)
    try:
        interpreted = Loader(fixture("images_raw"), batch_size=4, pipelines={
            "image": [SimpleRGBImageDecoder(), RandomHorizontalFlip(1.0)]})
        assert interpreted._native_args["compile"] is False
    finally:
        Compiler.set_enabled(True)
    compiled = Loader(fixture("images_raw"), batch_size=4, pipelines={
        "image": [SimpleRGBImageDecoder(), RandomHorizontalFlip(1.0)]})
    assert compiled._native_args["compile"] is True
    for a, b in zip(interpreted, compiled):
        for x, y in zip(a, b):
            assert np.array_equal(np.asarray(x), np.asarray(y))


def test_mixup_pairs_each_sample_with_the_previous_one_of_its_batch():
    from ffcv_rs.transforms import ImageMixup, LabelMixup

    plain = Loader(fixture("images_raw"), batch_size=4, pipelines={
        "image": [SimpleRGBImageDecoder()], "label": [IntDecoder()], "index": None})
    mixed = Loader(fixture("images_raw"), batch_size=4, pipelines={
        "image": [SimpleRGBImageDecoder(), ImageMixup(0.5, True)],
        "label": [IntDecoder(), LabelMixup(0.5, True)], "index": None})
    for (x, y), (mx, my) in zip(plain, mixed):
        x, y, mx, my = (np.asarray(a) for a in (x, y, mx, my))
        assert my.dtype == np.float32 and my.shape == (len(y), 3)
        assert np.array_equal(my[:, 0], y[:, 0]) and np.array_equal(my[:, 1], np.roll(y[:, 0], 1))
        lam = float(my[0, 2])
        assert 0.0 < lam < 1.0 and np.all(my[:, 2] == my[0, 2])  # one lambda per batch
        want = lam * x.astype(np.float64) + (1 - lam) * np.roll(x, 1, axis=0)
        # lam went through float32 in the labels: at most one unit apart after truncation.
        assert np.abs(mx.astype(np.int64) - want.astype(np.uint8).astype(np.int64)).max() <= 1
