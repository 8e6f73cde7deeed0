"""What the resume tests share: the JPEG fixture's loader with random crops and flips
(every draw must come back on resume), batch copies, and batch-for-batch equality."""

import numpy as np

from conftest import fixture
from ffcv_rs.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.transforms import RandomHorizontalFlip


def jpeg_loader(**kw):
    args = dict(batch_size=3, num_workers=2, order=OrderOption.RANDOM, seed=11,
                drop_last=False,
                pipelines={"image": [RandomResizedCropRGBImageDecoder((24, 24)),
                                     RandomHorizontalFlip()],
                           "label": [IntDecoder()], "index": [IntDecoder()]})
    args.update(kw)
    return Loader(fixture("images_jpg"), **args)


def copies(batches):
    return [tuple(np.array(np.asarray(x), copy=True) for x in b) for b in batches]


def assert_same(got, want):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and a.shape == b.shape, f"batch {i}"
            assert np.array_equal(a, b), f"batch {i} differs"
