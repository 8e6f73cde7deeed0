"""Files written by ffcv_rs.writer.DatasetWriter load in FFCV 1.0.2 with the written
values. Runs where FFCV itself is importable (e.g. the reference environment), skips
with a message elsewhere."""

import json

import numpy as np
import pytest

from ffcv_rs.fields import (BytesField, FloatField, IntField, JSONField, NDArrayField,
                            RGBImageField)
from ffcv_rs.writer import DatasetWriter


def ffcv_or_skip():
    try:
        import ffcv.loader  # noqa: F401
    except ImportError:
        pytest.skip("FFCV 1.0.2 is not installed here: run this test in the reference FFCV "
                    "environment to check that FFCV reads our files")
    import ffcv
    return ffcv


def test_ffcv_loads_what_we_wrote_with_three_workers(tmp_path):
    ffcv_or_skip()
    from ffcv.fields.decoders import (BytesDecoder, FloatDecoder, IntDecoder, NDArrayDecoder,
                                      SimpleRGBImageDecoder)
    from ffcv.loader import Loader, OrderOption

    rng = np.random.default_rng(7)
    n = 45
    images = [rng.integers(0, 256, size=(12, 10, 3), dtype=np.uint8) for _ in range(n)]
    blobs = [rng.integers(0, 256, size=int(rng.integers(1, 500)), dtype=np.uint8) for _ in range(n)]
    arrays = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(n)]
    items = [(images[i], i, i / 7, blobs[i], arrays[i], {"i": i, "s": "x" * (i % 5)})
             for i in range(n)]
    path = str(tmp_path / "ours.beton")
    fields = {"image": RGBImageField(write_mode="raw"), "label": IntField(), "x": FloatField(),
              "blob": BytesField(), "arr": NDArrayField(np.float32, (2, 3)), "meta": JSONField()}
    DatasetWriter(path, fields, page_size=1 << 21, num_workers=3).from_indexed_dataset(
        items, chunksize=4, progress=False)

    loader = Loader(path, batch_size=9, num_workers=1, order=OrderOption.SEQUENTIAL,
                    drop_last=False, pipelines={
                        "image": [SimpleRGBImageDecoder()], "label": [IntDecoder()],
                        "x": [FloatDecoder()], "blob": [BytesDecoder()], "arr": [NDArrayDecoder()],
                        "meta": [BytesDecoder()]})
    i = 0
    for image, label, x, blob, arr, meta in loader:
        for r in range(len(label)):
            assert np.array_equal(np.asarray(image[r]), images[i])
            assert int(label[r][0]) == i and float(x[r][0]) == i / 7
            assert np.asarray(blob[r])[: len(blobs[i])].tobytes() == blobs[i].tobytes()
            assert np.array_equal(np.asarray(arr[r]), arrays[i])
            text = np.asarray(meta[r]).tobytes().split(b"\0")[0]
            assert json.loads(text) == items[i][5]
            i += 1
    assert i == n


def test_ffcv_decodes_our_jpegs_like_ffcv_rs(tmp_path):
    ffcv_or_skip()
    from ffcv.fields.decoders import SimpleRGBImageDecoder as FfcvSimple
    from ffcv.loader import Loader as FfcvLoader, OrderOption as FfcvOrder

    from ffcv_rs.fields.decoders import SimpleRGBImageDecoder
    from ffcv_rs.loader import Loader

    rng = np.random.default_rng(3)
    yy, xx = np.mgrid[0:48, 0:40]
    items = []
    for i in range(20):
        img = np.stack([(xx * 5 + i) % 256, (yy * 4) % 256, (xx + yy + 9 * i) % 256], -1)
        img = (img + rng.integers(0, 8, size=img.shape)).clip(0, 255).astype(np.uint8)
        items.append((img, i))
    path = str(tmp_path / "jpg.beton")
    DatasetWriter(path, {"image": RGBImageField(write_mode="jpg", jpeg_quality=85),
                         "label": IntField()}, page_size=1 << 21, num_workers=2).from_indexed_dataset(
        items, progress=False)
    theirs = FfcvLoader(path, batch_size=5, num_workers=1, order=FfcvOrder.SEQUENTIAL,
                        drop_last=False, pipelines={"image": [FfcvSimple()], "label": None})
    ours = Loader(path, batch_size=5, num_workers=1, drop_last=False,
                  pipelines={"image": [SimpleRGBImageDecoder()], "label": None})
    n = 0
    for (a,), (b,) in zip(theirs, ours):
        assert np.array_equal(np.asarray(a), np.asarray(b))
        # A JPEG, not the raw pixels: close to the source, not equal.
        src = np.stack([items[n + k][0] for k in range(len(a))])
        assert np.abs(np.asarray(b).astype(int) - src).mean() < 12
        n += len(a)
    assert n == 20
