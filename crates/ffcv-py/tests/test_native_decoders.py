"""The built-in decoders' ``generate_code()``: one native call per batch (the loader's own
decoder, ``_native.BatchDecoder``) when driven through FFCV's protocol over a built-in
memory manager, as FFCV's own tests drive them; FFCV's Python code under a memory manager
of the user's or for a subclass that changes the crop rule.

Every comparison is with the loader's output for the same samples: the same bytes for
the deterministic decoders, and for RandomResizedCrop the same crops once the loader is
given the seed the batch function drew from NumPy's generator."""

import numpy as np
import pytest

from conftest import fixture
from ffcv_rs import DecodeError
from ffcv_rs.fields.basics import FloatDecoder, IntDecoder
from ffcv_rs.fields.bytes import BytesDecoder
from ffcv_rs.fields.image import (CenterCropImageDecoder, RandomResizedCropImageDecoder,
                                  SimpleImageDecoder)
from ffcv_rs.fields.ndarray import NDArrayDecoder
from ffcv_rs.fields.rgb_image import (CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder,
                                      SimpleRGBImageDecoder, get_center_crop)
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.memory_managers import OSCacheManager, ProcessCacheManager
from ffcv_rs.memory_managers.base import MemoryManager
from ffcv_rs.pipeline.compiler import Compiler
from ffcv_rs.pipeline.state import State
from ffcv_rs.reader import Reader

START = State(jit_mode=True, device="cpu", shape=None, dtype=np.uint8)

# (fixture, field, decoder factory)
CASES = [
    ("scalars", "index", IntDecoder),
    ("scalars", "value", FloatDecoder),
    ("bytes_ndarray", "blob", BytesDecoder),
    ("bytes_ndarray", "vec", NDArrayDecoder),
    ("bytes_ndarray", "mat", NDArrayDecoder),
    ("json", "meta", BytesDecoder),
    ("multipage", "blob", BytesDecoder),
    ("images_raw", "image", lambda: CenterCropRGBImageDecoder((24, 20))),
    ("images_jpg", "image", lambda: CenterCropRGBImageDecoder((32, 32))),
    ("images_jpg", "image", lambda: CenterCropRGBImageDecoder((40, 28), ratio=0.5)),
]


def driven(name, field, decoder, manager=OSCacheManager, indices=None, parallel=1, shape=None):
    """``decoder`` driven as FFCV's tests drive one: ``(code, output)``. ``shape``: one
    row's shape where the decoder's declared one is open (``SimpleImageDecoder``)."""
    reader = Reader(name if name.endswith(".beton") else fixture(name))
    m = manager(reader)
    column = reader.metadata[f"f{reader.field_names.index(field)}"]
    decoder.accept_field(reader.handlers[field])
    decoder.accept_globals(column, m.compile_reader())
    _, query = decoder.declare_state_and_memory(START)
    queries = query if isinstance(query, tuple) else (query,)
    ids = np.arange(reader.num_samples) if indices is None else np.asarray(indices)
    buffers = tuple(np.zeros((len(ids) + 3, *(shape or q.shape)), q.dtype) for q in queries)
    Compiler.set_num_threads(parallel)
    try:
        code = Compiler.compile(decoder.generate_code())
        context = m.schedule_epoch(ids.reshape(1, -1))
        with context:
            got = code(ids, buffers if isinstance(query, tuple) else buffers[0], column,
                       context.state)
    finally:
        Compiler.set_num_threads(1)
    return code, np.array(got)


def loaded(name, field, decoder, seed=None, indices=None):
    """The loader's decoded rows of ``field`` for ``indices`` (all samples by default)."""
    path = name if name.endswith(".beton") else fixture(name)
    reader = Reader(path)
    n = reader.num_samples if indices is None else len(indices)
    pipelines = {f: None for f in reader.field_names}
    pipelines[field] = [decoder]
    kwargs = {} if seed is None else {"seed": seed}
    loader = Loader(path, batch_size=n, order=OrderOption.SEQUENTIAL,
                    pipelines=pipelines, indices=indices, **kwargs)
    (rows,) = next(iter(loader))
    return np.asarray(rows)


def same(a, b):
    """Equal dtype, shape and bytes (NaNs included)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("name,field,make", CASES)
def test_a_built_in_decoders_generate_code_is_the_loaders_decoder(name, field, make):
    code, got = driven(name, field, make())
    assert code._ffcv_rs_native == type(make())._native_name
    assert same(got, loaded(name, field, make()))


@pytest.mark.parametrize("manager", [OSCacheManager, ProcessCacheManager])
@pytest.mark.parametrize("parallel", [1, 2])
def test_samples_in_any_order_under_either_manager_and_thread_count(manager, parallel):
    ids = [17, 3, 3, 39, 0, 38, 22]
    _, got = driven("multipage", "blob", BytesDecoder(), manager, ids, parallel)
    want = loaded("multipage", "blob", BytesDecoder())
    assert np.array_equal(got, want[ids])
    _, images = driven("images_jpg", "image", CenterCropRGBImageDecoder((16, 16)), manager,
                       [5, 1, 23], parallel)
    assert np.array_equal(images, loaded("images_jpg", "image",
                                         CenterCropRGBImageDecoder((16, 16)))[[5, 1, 23]])
    with pytest.raises(IndexError, match="outside the 40 samples"):
        driven("multipage", "blob", BytesDecoder(), manager, [3, 40], parallel)


def test_simple_decoder_over_one_size_images():
    code, got = driven("images_raw", "image", SimpleRGBImageDecoder())
    assert code._ffcv_rs_native == "SimpleRGBImageDecoder"
    assert np.array_equal(got, loaded("images_raw", "image", SimpleRGBImageDecoder()))


@pytest.mark.parametrize("name", ["images_jpg", "images_raw"])
def test_random_resized_crop_draws_its_seed_from_numpys_generator(name):
    make = lambda: RandomResizedCropRGBImageDecoder((24, 24), scale=(0.2, 1.0))  # noqa: E731
    np.random.seed(11)
    _, first = driven(name, "image", make())
    np.random.seed(11)
    seed = int(np.random.randint(0, 2**62))
    np.random.seed(11)
    _, again = driven(name, "image", make())
    _, other = driven(name, "image", make())  # the generator moved on: other crops
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)
    # The seed it drew, given to a loader: the loader's crops of epoch 0.
    assert np.array_equal(first, loaded(name, "image", make(), seed=seed))


def test_image_field_decoders_are_native_too(tmp_path):
    from test_image_kinds import write

    path = str(tmp_path / "kinds.beton")
    write(path, tmp_path)
    for field, row in (("depth", (7, 6, 1)), ("rgba", (5, 4, 4))):
        code, got = driven(path, field, SimpleImageDecoder(), shape=row)
        assert code._ffcv_rs_native == "SimpleImageDecoder"
        assert same(got, loaded(path, field, SimpleImageDecoder()))
        _, got = driven(path, field, CenterCropImageDecoder((3, 2), ratio=0.9))
        assert same(got, loaded(path, field, CenterCropImageDecoder((3, 2), ratio=0.9)))
        np.random.seed(5)
        seed = int(np.random.randint(0, 2**62))
        np.random.seed(5)
        _, got = driven(path, field, RandomResizedCropImageDecoder((4, 4)))
        assert same(got, loaded(path, field, RandomResizedCropImageDecoder((4, 4)), seed=seed))
    # Rows of another size than the images': the decoder says so, naming the sample.
    with pytest.raises(DecodeError, match="sample 0"):
        driven(path, "depth", SimpleImageDecoder(), shape=(6, 6, 1))
    # No Python version: under a memory manager of the user's it raises.
    with pytest.raises(NotImplementedError, match="no Python version"):
        driven(path, "depth", SimpleImageDecoder(), PlainManager, shape=(7, 6, 1))


class FullImage(RandomResizedCropRGBImageDecoder):
    """FFCV lets a subclass replace the crop rule: here the whole image, always."""

    @property
    def get_crop_generator(self):
        def whole(height, width, scale, ratio):
            return 0, 0, height, width
        return whole


def test_a_subclass_with_its_own_crop_rule_runs_its_python_code_everywhere():
    code, got = driven("images_raw", "image", FullImage((20, 20)))
    assert not hasattr(code, "_ffcv_rs_native")
    # The whole image resized: the centre crop with ratio 1 of these square images.
    reader = Reader(fixture("images_raw"))
    h, w = int(reader.metadata["f0"]["height"][0]), int(reader.metadata["f0"]["width"][0])
    assert get_center_crop(h, w, None, 1.0) == (0, 0, h, w)
    want = loaded("images_raw", "image", CenterCropRGBImageDecoder((20, 20), ratio=1.0))
    assert np.array_equal(got, want)
    # The loader runs the subclass in Python too, with its rule.
    assert np.array_equal(loaded("images_raw", "image", FullImage((20, 20))), want)


class PlainManager(MemoryManager):
    """A memory manager of the user's: the bytes come from its own read function."""

    def __init__(self, reader):
        super().__init__(reader)
        self.data = np.fromfile(reader.file_name, dtype=np.uint8)

    def schedule_epoch(self, batches):
        manager = self

        class Context:
            state = (manager.data, manager.ptrs, manager.sizes)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False
        return Context()

    def compile_reader(self):
        def read(address, state):
            data, ptrs, sizes = state
            return data[address: address + sizes[np.searchsorted(ptrs, address)]]
        return Compiler.compile(read)

    @property
    def state_type(self):
        return None


@pytest.mark.parametrize("name,field,make", [CASES[2], CASES[3], CASES[8]])
def test_a_users_memory_manager_gets_ffcvs_python_code_with_the_same_rows(name, field, make):
    _, got = driven(name, field, make(), PlainManager)
    assert np.array_equal(got, loaded(name, field, make()))


def test_a_sample_outside_the_allocations_is_a_decode_error_naming_it():
    reader = Reader(fixture("images_jpg"))
    m = OSCacheManager(reader)
    decoder = CenterCropRGBImageDecoder((16, 16))
    column = reader.metadata["f0"].copy()
    column["data_ptr"][2] += 1  # no allocation starts there
    decoder.accept_globals(column, m.compile_reader())
    code = decoder.generate_code()
    out = np.zeros((4, 16, 16, 3), np.uint8)
    with pytest.raises(DecodeError, match="sample 2: .*no allocation starts") as info:
        code(np.arange(4), out, column, m.schedule_epoch([[0]]).state)
    assert info.value.sample == 2


def test_a_bytes_field_longer_than_its_allocation_is_a_decode_error():
    reader = Reader(fixture("multipage"))
    m = OSCacheManager(reader)
    column = reader.metadata["f1"].copy()
    column["size"][5] += 1
    decoder = BytesDecoder()
    decoder.accept_globals(column, m.compile_reader())
    code = decoder.generate_code()
    out = np.zeros((8, int(column["size"].max())), np.uint8)
    with pytest.raises(DecodeError, match="sample 5: .*allocation holds") as info:
        code(np.arange(8), out, column, m.schedule_epoch([[0]]).state)
    assert info.value.sample == 5


def test_an_undecodable_jpeg_is_a_decode_error_naming_the_sample(tmp_path):
    raw = bytearray(open(fixture("images_jpg"), "rb").read())
    reader = Reader(fixture("images_jpg"))
    entry = reader.metadata["f0"][3]
    start = int(entry["data_ptr"])
    raw[start + 2: start + 40] = bytes(38)  # the markers after SOI are gone
    bad = tmp_path / "bad.beton"
    bad.write_bytes(bytes(raw))
    reader = Reader(str(bad))
    m = OSCacheManager(reader)
    decoder = CenterCropRGBImageDecoder((16, 16))
    decoder.accept_globals(reader.metadata["f0"], m.compile_reader())
    code = decoder.generate_code()
    out = np.zeros((5, 16, 16, 3), np.uint8)
    with pytest.raises(DecodeError, match="sample 3") as info:
        code(np.arange(5), out, reader.metadata["f0"], m.schedule_epoch([[0]]).state)
    assert info.value.sample == 3
