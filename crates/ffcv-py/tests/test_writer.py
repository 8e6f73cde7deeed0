"""ffcv_rs.writer.DatasetWriter: files written with one worker are byte-identical to the
FFCV 1.0.2 fixtures; files written with several workers load with the written values."""

import hashlib

import numpy as np
import pytest

from conftest import as_numpy, expected, fixture
from ffcv_rs.fields import (BytesField, FloatField, IntField, JSONField, NDArrayField,
                            RGBImageField)
from ffcv_rs.fields.decoders import (BytesDecoder, FloatDecoder, IntDecoder, NDArrayDecoder,
                                     SimpleRGBImageDecoder)
from ffcv_rs.loader import Loader
from ffcv_rs.writer import DatasetWriter

PAGE = 1 << 21


def read_columns(path, pipelines):
    loader = Loader(path, batch_size=7, drop_last=False, num_workers=1, pipelines=pipelines)
    cols = {n: [] for n in loader.output_names}
    lengths = {n: [] for n in loader.output_names}
    for batch in loader:
        for n, out in zip(loader.output_names, batch):
            cols[n].extend(as_numpy(out).copy())
            ls = out.base.lengths() if hasattr(out, "base") and out.base is not None else None
            if ls is not None:
                lengths[n].extend(np.asarray(ls).tolist())
    return cols, lengths


def sha_file(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_scalars_rewrite_is_byte_identical(tmp_beton):
    cols, _ = read_columns(fixture("scalars"), {"index": [IntDecoder()], "value": [FloatDecoder()]})
    items = [(int(i[0]), float(v[0])) for i, v in zip(cols["index"], cols["value"])]
    DatasetWriter(tmp_beton, {"index": IntField(), "value": FloatField()}, page_size=PAGE,
                  num_workers=1).from_indexed_dataset(items, progress=False)
    assert sha_file(tmp_beton) == expected("scalars")["file_sha256"]


def test_bytes_and_ndarrays_rewrite_is_byte_identical(tmp_beton):
    cols, lengths = read_columns(fixture("bytes_ndarray"), {
        "index": [IntDecoder()], "blob": [BytesDecoder()], "vec": [NDArrayDecoder()],
        "mat": [NDArrayDecoder()]})
    items = [(int(i[0]), b[:n].copy(), v, m) for i, b, n, v, m in
             zip(cols["index"], cols["blob"], lengths["blob"], cols["vec"], cols["mat"])]
    fields = {"index": IntField(), "blob": BytesField(), "vec": NDArrayField(np.float32, (3, 4)),
              "mat": NDArrayField(np.int16, (5,))}
    DatasetWriter(tmp_beton, fields, page_size=PAGE, num_workers=1).from_indexed_dataset(items, progress=False)
    assert sha_file(tmp_beton) == expected("bytes_ndarray")["file_sha256"]


def test_json_rewrite_is_byte_identical(tmp_beton):
    exp = expected("json")
    items = [(i, v) for i, v in enumerate(exp["json_values"])]
    DatasetWriter(tmp_beton, {"index": IntField(), "meta": JSONField()}, page_size=PAGE,
                  num_workers=1).from_indexed_dataset(items, progress=False)
    assert sha_file(tmp_beton) == exp["file_sha256"]


def test_raw_images_rewrite_is_byte_identical(tmp_beton):
    cols, _ = read_columns(fixture("images_raw"), {"image": [SimpleRGBImageDecoder()],
                                                   "label": [IntDecoder()], "index": [IntDecoder()]})
    items = list(zip(cols["image"], [int(x[0]) for x in cols["label"]], [int(x[0]) for x in cols["index"]]))
    fields = {"image": RGBImageField(write_mode="raw"), "label": IntField(), "index": IntField()}
    DatasetWriter(tmp_beton, fields, page_size=PAGE, num_workers=1).from_indexed_dataset(items, progress=False)
    assert sha_file(tmp_beton) == expected("images_raw")["file_sha256"]


def test_multipage_rewrite_is_byte_identical(tmp_beton):
    cols, lengths = read_columns(fixture("multipage"), {"index": [IntDecoder()], "blob": [BytesDecoder()]})
    items = [(int(i[0]), b[:n].tobytes()) for i, b, n in zip(cols["index"], cols["blob"], lengths["blob"])]
    DatasetWriter(tmp_beton, {"index": IntField(), "blob": BytesField()}, page_size=PAGE,
                  num_workers=1).from_indexed_dataset(items, progress=False)
    assert sha_file(tmp_beton) == expected("multipage")["file_sha256"]


def test_many_workers_jpeg_and_pil_items_load_back(tmp_beton):
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, size=(20 + i % 7, 30, 3), dtype=np.uint8) for i in range(60)]
    try:
        from PIL import Image
        images[0] = Image.fromarray(images[0])
        pil = True
    except ImportError:
        pil = False
    items = [(img, i, float(i) / 3, {"i": i}) for i, img in enumerate(images)]
    fields = {"image": RGBImageField(write_mode="jpg"), "label": IntField(), "x": FloatField(),
              "meta": JSONField()}
    DatasetWriter(tmp_beton, fields, page_size=PAGE, num_workers=3).from_indexed_dataset(
        items, chunksize=7, progress=False)
    from ffcv_rs.fields.decoders import CenterCropRGBImageDecoder
    loader = Loader(tmp_beton, batch_size=8, drop_last=False,
                    pipelines={"image": [CenterCropRGBImageDecoder((16, 16), 1.0)],
                               "label": [IntDecoder()], "x": [FloatDecoder()], "meta": [BytesDecoder()]})
    labels, xs, metas = [], [], []
    for image, label, x, meta in loader:
        assert as_numpy(image).shape[1:] == (16, 16, 3)
        labels += label[:, 0].tolist()
        xs += x[:, 0].tolist()
        metas += JSONField.unpack(meta)
    assert labels == list(range(60))
    assert xs == [float(i) / 3 for i in range(60)]
    assert metas == [{"i": i} for i in range(60)]
    assert pil in (True, False)


def test_indices_and_dataset_errors(tmp_beton):
    items = [(i,) for i in range(10)]
    DatasetWriter(tmp_beton, {"v": IntField()}, page_size=PAGE, num_workers=1).from_indexed_dataset(
        items, indices=[9, 3, 3], progress=False)
    loader = Loader(tmp_beton, batch_size=3, pipelines={"v": [IntDecoder()]})
    (v,) = next(iter(loader))
    assert v[:, 0].tolist() == [9, 3, 3]

    class Broken:
        def __len__(self):
            return 5

        def __getitem__(self, i):
            if i == 3:
                raise KeyError("sample three is missing")
            return (i,)

    with pytest.raises(KeyError, match="sample three"):
        DatasetWriter(tmp_beton + "2", {"v": IntField()}, page_size=PAGE,
                      num_workers=2).from_indexed_dataset(Broken(), progress=False)
    with pytest.raises(ValueError):
        DatasetWriter(tmp_beton, {"v": IntField()}, page_size=12345).from_indexed_dataset(items, progress=False)
    with pytest.raises(ValueError):
        DatasetWriter(tmp_beton, {"v": NDArrayField(np.float32, (2,))}, num_workers=1).from_indexed_dataset(
            [(np.zeros(3),)], progress=False)


def test_page_retry_rewrite_is_byte_identical(tmp_beton):
    cols, lengths = read_columns(fixture("page_retry"), {"index": [IntDecoder()], "a": [BytesDecoder()],
                                                         "b": [BytesDecoder()]})
    items = [(int(i[0]), a[:la].tobytes(), b[:lb].tobytes()) for i, a, la, b, lb in
             zip(cols["index"], cols["a"], lengths["a"], cols["b"], lengths["b"])]
    DatasetWriter(tmp_beton, {"index": IntField(), "a": BytesField(), "b": BytesField()},
                  page_size=PAGE, num_workers=1).from_indexed_dataset(items, progress=False)
    assert sha_file(tmp_beton) == expected("page_retry")["file_sha256"]
