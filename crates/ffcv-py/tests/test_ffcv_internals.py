"""FFCV's internals as ffcv_rs has them: ``Reader`` (tables equal to FFCV's), the memory
managers' ``schedule_epoch`` / ``compile_reader``, ``libffcv`` (memcpy, imdecode,
resize_crop), ``Compiler``, custom ``TraversalOrder`` subclasses (with resume) and
``Loader.filter``. Where FFCV 1.0.2 is importable (the reference environment) the
Reader's arrays are compared with FFCV's own, field by field."""

import json
import os

import numpy as np
import pytest

from conftest import expected, fixture
from ffcv_rs import BadFileError, ConfigError
from ffcv_rs.fields import BytesField, FloatField, IntField, NDArrayField, RGBImageField
from ffcv_rs.fields.basics import IntDecoder
from ffcv_rs.fields.rgb_image import CenterCropRGBImageDecoder, get_center_crop
from ffcv_rs.libffcv import imdecode, memcpy, resize_crop
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.memory_managers import OSCacheManager, ProcessCacheManager
from ffcv_rs.pipeline.compiler import Compiler
from ffcv_rs.reader import Reader
from ffcv_rs.traversal_order.base import TraversalOrder

NAMES = ["scalars", "bytes_ndarray", "json", "images_raw", "images_jpg", "multipage"]


@pytest.mark.parametrize("name", NAMES)
def test_reader_tables_are_the_files(name):
    exp = expected(name)
    reader = Reader(fixture(name))
    assert reader.num_samples == exp["header"]["num_samples"]
    assert reader.page_size == exp["header"]["page_size"]
    assert reader.field_names == [f["name"] for f in exp["fields"]] or \
        reader.field_names[: len(exp["fields"])] == [f["name"] for f in exp["fields"]]
    assert reader.metadata.dtype.itemsize == exp["layout"]["metadata_itemsize"]
    import base64
    assert reader.metadata.tobytes() == base64.b64decode(exp["metadata_b64"])
    table = [[int(s), int(p), int(z)] for s, p, z in reader.alloc_table]
    assert table == exp["alloc_table"]
    assert not reader.metadata.flags.writeable and not reader.alloc_table.flags.writeable


def test_reader_handlers_are_the_field_types():
    reader = Reader(fixture("bytes_ndarray"))
    kinds = {name: type(h) for name, h in reader.handlers.items()}
    assert kinds["index"] is IntField and kinds["blob"] is BytesField
    arrays = [h for h in reader.handlers.values() if isinstance(h, NDArrayField)]
    for h in arrays:
        assert h.to_binary().tobytes() == reader.field_descriptors[
            list(reader.handlers.values()).index(h)]["arguments"].tobytes()
    assert isinstance(Reader(fixture("images_jpg")).handlers["image"], RGBImageField)
    assert isinstance(Reader(fixture("scalars")).handlers["value"], FloatField)


def test_reader_refuses_corrupt_files_naming_them(tmp_path):
    data = open(fixture("scalars"), "rb").read()
    cut = tmp_path / "cut.beton"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadFileError, match="cut.beton"):
        Reader(str(cut))
    with pytest.raises(BadFileError, match="missing.beton"):
        Reader(str(tmp_path / "missing.beton"))


@pytest.mark.parametrize("name", NAMES)
def test_reader_equals_ffcvs_where_ffcv_is_installed(name):
    ffcv_reader = pytest.importorskip("ffcv.reader", reason="FFCV 1.0.2 is not installed "
                                      "(run in the reference environment to compare)")
    theirs = ffcv_reader.Reader(fixture(name))
    ours = Reader(fixture(name))
    assert (ours.num_samples, ours.page_size) == (theirs.num_samples, theirs.page_size)
    assert ours.field_names == theirs.field_names
    assert ours.metadata.dtype == theirs.metadata.dtype
    for field in theirs.metadata.dtype.names:
        # Byte for byte (NaNs included).
        assert np.ascontiguousarray(ours.metadata[field]).tobytes() == \
            np.ascontiguousarray(theirs.metadata[field]).tobytes()
    assert np.array_equal(ours.alloc_table, theirs.alloc_table)
    assert [type(h).__name__ for h in ours.handlers.values()] == \
        [type(h).__name__ for h in theirs.handlers.values()]


@pytest.mark.parametrize("manager", [OSCacheManager, ProcessCacheManager])
@pytest.mark.parametrize("compiled", [True, False])
def test_memory_managers_read_every_allocation(manager, compiled):
    reader = Reader(fixture("bytes_ndarray"))
    m = manager(reader)
    context = m.schedule_epoch(np.arange(reader.num_samples))
    Compiler.set_enabled(compiled)
    try:
        read = m.compile_reader()
    finally:
        Compiler.set_enabled(True)
    raw = open(fixture("bytes_ndarray"), "rb").read()
    with context:
        for _sample, ptr, size in reader.alloc_table:
            got = read(ptr, context.state)
            # The allocation's bytes (a zero-length one gives the next one's at its address).
            assert len(got) >= size and got.tobytes()[: int(size)] == raw[int(ptr): int(ptr) + int(size)]
    assert set(m.sample_to_pages) == set(int(s) for s in reader.alloc_table["sample_id"])


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64, np.float32, np.float64])
def test_memcpy(dtype):
    src = np.arange(99 * 7, dtype=dtype).reshape(99, 7)
    dst = np.zeros_like(src)
    assert memcpy(src, dst) == 0
    assert np.array_equal(src, dst)


def test_imdecode_and_resize_crop_give_the_loaders_pixels():
    reader = Reader(fixture("images_jpg"))
    raw = np.memmap(fixture("images_jpg"), dtype=np.uint8, mode="r")
    loader = Loader(fixture("images_jpg"), batch_size=24, drop_last=False,
                    pipelines={"image": [CenterCropRGBImageDecoder((32, 32))], "label": None,
                               "index": None})
    (want,) = next(iter(loader))
    want = np.asarray(want)
    for i, (entry, (_, ptr, size)) in enumerate(zip(reader.metadata["f0"], reader.alloc_table)):
        h, w = int(entry["height"]), int(entry["width"])
        full = np.zeros((h, w, 3), np.uint8)
        assert imdecode(np.ascontiguousarray(raw[ptr: ptr + size]), full, h, w, h, w) == 0
        top, left, ch, cw = get_center_crop(h, w, None, 224 / 256)
        out = np.zeros((32, 32, 3), np.uint8)
        assert resize_crop(full, top, top + ch, left, left + cw, out) == 0
        assert np.array_equal(out, want[i]), f"sample {i}"
        # A crop and a flip in the decode: the same pixels as cropping the full decode.
        crop = np.zeros((ch, cw, 3), np.uint8)
        assert imdecode(np.ascontiguousarray(raw[ptr: ptr + size]), crop, h, w, ch, cw,
                        left, top, 1, 1, True, True) == 0
        assert np.array_equal(crop, full[top: top + ch, left: left + cw][:, ::-1])


def test_libffcv_refuses_bad_arguments_with_negative_codes():
    jpeg = np.zeros(10, np.uint8)
    out = np.zeros((4, 4, 3), np.uint8)
    assert imdecode(jpeg, out, 4, 4, 4, 4) == -2  # not a JPEG
    assert imdecode(jpeg, out, 4, 4, 4, 4, 0, 0, 1, 2) == -3  # DCT scaling unsupported
    assert imdecode(jpeg, out, 4, 4, 8, 8, 0, 0, 1, 1, True, False) == -1  # crop outside
    assert resize_crop(out, 0, 5, 0, 4, np.zeros((2, 2, 3), np.uint8)) == -1


class EveryOtherReversed(TraversalOrder):
    """A custom order: even epochs ascending, odd descending; counts its calls."""

    calls = []

    def sample_order(self, epoch):
        EveryOtherReversed.calls.append(epoch)
        ids = np.asarray(self.indices)
        return ids if epoch % 2 == 0 else ids[::-1]


def test_custom_order_is_asked_once_per_epoch_and_followed():
    EveryOtherReversed.calls = []
    loader = Loader(fixture("scalars"), batch_size=10, order=EveryOtherReversed,
                    pipelines={"index": [IntDecoder()], "value": None})
    assert len(loader) == 10
    asked = len(EveryOtherReversed.calls)
    epochs = []
    for _ in range(3):
        epochs.append(np.concatenate([np.asarray(i)[:, 0] for (i,) in loader]).tolist())
    assert epochs[0] == list(range(100)) and epochs[1] == list(range(99, -1, -1))
    assert epochs[2] == epochs[0]
    assert EveryOtherReversed.calls[asked:] == [0, 1, 2]


def test_custom_order_resumes_exactly_and_refuses_another_order():
    loader = Loader(fixture("scalars"), batch_size=10, order=EveryOtherReversed,
                    pipelines={"index": [IntDecoder()], "value": None})
    list(loader)
    it = iter(loader)  # epoch 1, descending
    first = [np.asarray(next(it)[0])[:, 0].tolist() for _ in range(3)]
    state = json.loads(json.dumps(loader.state_dict()))
    del it
    assert "custom_order_sha256" in state
    again = Loader(fixture("scalars"), batch_size=10, order=EveryOtherReversed,
                   pipelines={"index": [IntDecoder()], "value": None})
    again.load_state_dict(state)
    rest = [np.asarray(b[0])[:, 0].tolist() for b in again]
    assert sum(first + rest, []) == list(range(99, -1, -1))

    class Shuffled(EveryOtherReversed):
        def sample_order(self, epoch):
            return np.random.default_rng(epoch).permutation(np.asarray(self.indices))

    other = Loader(fixture("scalars"), batch_size=10, order=Shuffled,
                   pipelines={"index": [IntDecoder()], "value": None})
    with pytest.raises(ConfigError, match="another order"):
        other.load_state_dict(state)


def test_filter_keeps_the_samples_whose_value_passes():
    loader = Loader(fixture("scalars"), batch_size=5, order=OrderOption.RANDOM, seed=1,
                    pipelines={"index": [IntDecoder()]})
    kept = loader.filter("index", lambda row: int(np.asarray(row)[0]) % 3 == 0)
    assert kept.indices.tolist() == [i for i in range(100) if i % 3 == 0]
    got = np.concatenate([np.asarray(i)[:, 0] for i, *_ in kept]).tolist()
    # drop_last as the loader's: 34 samples in 6 whole batches of 5, in random order.
    assert len(got) == 30 and len(set(got)) == 30 and all(i % 3 == 0 for i in got)


class ClassBalanced(TraversalOrder):
    """docs/python.md's class-balanced sampler, as written there."""

    def __init__(self, loader, labels_field="label"):
        super().__init__(loader)
        column = loader.reader.field_names.index(labels_field)
        labels = np.asarray(loader.reader.metadata[f"f{column}"])[self.indices]
        classes, counts = np.unique(labels, return_counts=True)
        weight = 1.0 / counts[np.searchsorted(classes, labels)]
        self.p = weight / weight.sum()

    def sample_order(self, epoch):
        rng = np.random.default_rng((self.seed, epoch))
        ids = rng.choice(self.indices, size=len(self.indices), p=self.p)
        if self.distributed:
            ids = ids[self.loader.rank::self.loader.world_size]
        return ids


def test_the_documented_class_balanced_sampler():
    # images_jpg: 24 samples, labels 0..9 (three classes have 3 samples, seven have 2).
    loader = Loader(fixture("images_jpg"), batch_size=4, seed=5, order=ClassBalanced,
                    order_kwargs={"labels_field": "label"},
                    pipelines={"label": [IntDecoder()], "image": None, "index": None})
    epoch0 = np.concatenate([np.asarray(b[0])[:, 0] for b in loader])
    epoch1 = np.concatenate([np.asarray(b[0])[:, 0] for b in loader])
    assert len(epoch0) == len(epoch1) == 24
    assert not np.array_equal(epoch0, epoch1)  # a new draw each epoch
    again = Loader(fixture("images_jpg"), batch_size=4, seed=5, order=ClassBalanced,
                   pipelines={"label": [IntDecoder()], "image": None, "index": None})
    assert np.array_equal(np.concatenate([np.asarray(b[0])[:, 0] for b in again]), epoch0)
    # Every sample's probability is 1 / (10 classes * its class's count).
    order = ClassBalanced(loader)
    labels = np.array(expected("images_jpg")["metadata_columns"]["label"]["value"])
    counts = np.bincount(labels)
    assert np.allclose(order.p, 1.0 / (10 * counts[labels]))


def test_a_custom_field_ffcv_wrote_reads_here_with_the_same_class(tmp_path):
    pytest.importorskip("ffcv", reason="FFCV 1.0.2 is not installed (the reference "
                        "environment writes the file)")
    from ffcv.fields.ndarray import NDArrayField as TheirArray
    from ffcv.writer import DatasetWriter as TheirWriter
    from ffcv_rs.fields.ndarray import NDArrayDecoder, NDArrayField as OurArray

    def string_field(base):
        class StringField(base):
            def __init__(self, max_len):
                self.max_len = max_len
                super().__init__(np.dtype("uint8"), (max_len,))

            def encode(self, destination, field, malloc):
                padded = (field + "\0" * self.max_len)[: self.max_len]
                return super().encode(destination, np.frombuffer(padded.encode("ascii"), np.uint8), malloc)
        return StringField

    captions = [f"caption {i} " + "x" * (i % 37) for i in range(300)]
    name = str(tmp_path / "captions.beton")
    TheirWriter(name, {"label": string_field(TheirArray)(64)}, num_workers=2).from_indexed_dataset(
        [(c,) for c in captions])
    loader = Loader(name, batch_size=32, drop_last=False, pipelines={"label": [NDArrayDecoder()]},
                    custom_fields={"label": string_field(OurArray)})
    got = [row.tobytes().decode("ascii").rstrip("\0") for (batch,) in loader for row in np.asarray(batch)]
    assert got == captions
