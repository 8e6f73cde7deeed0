"""Several views of one field: FFCV-SSL's ``custom_field_mapper`` on ``Loader``. The batch
holds the file's fields then the mapped names in the mapper's order; the field under its
own name is unchanged (bit-identical to a one-view loader); each view has its own random
draws, the same on every run; views of the test photographs and of FFCV's generated JPEGs;
a ``PipelineSpec`` of another field is a view; a state taken mid-epoch resumes the same
batches; ``filter`` keeps the views; bad mappers are refused."""

import pathlib

import numpy as np
import pytest

from conftest import fixture
from ffcv_rs import ConfigError
from ffcv_rs.fields import IntField, RGBImageField
from ffcv_rs.fields.rgb_image import CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder
from ffcv_rs.libffcv import imdecode
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.pipeline import PipelineSpec
from ffcv_rs.transforms import RandomHorizontalFlip
from ffcv_rs.writer import DatasetWriter

PHOTOS = pathlib.Path(__file__).resolve().parents[2] / "rgb-image" / "tests" / "data" / "photos"


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """The four test photographs (decoded, then written as JPEGs by the writer), 12
    samples with a label."""
    images = []
    for name in ["astronaut", "chelsea", "coffee", "rocket"]:
        data = np.frombuffer((PHOTOS / f"{name}.jpg").read_bytes(), np.uint8)
        # The frame size from the SOF0 marker (baseline photographs).
        sof = bytes(data).index(b"\xff\xc0")
        h = int(data[sof + 5]) << 8 | int(data[sof + 6])
        w = int(data[sof + 7]) << 8 | int(data[sof + 8])
        full = np.zeros((h, w, 3), np.uint8)
        assert imdecode(np.ascontiguousarray(data), full, h, w, h, w) == 0
        images.append(full)
    path = tmp_path_factory.mktemp("views") / "photos.beton"
    samples = [(images[i % 4], i) for i in range(12)]
    DatasetWriter(str(path), {"image": RGBImageField(write_mode="jpg", jpeg_quality=90),
                              "label": IntField()}, num_workers=1).from_indexed_dataset(samples)
    return str(path)


def rrc(side=32):
    return RandomResizedCropRGBImageDecoder((side, side))


def epoch(loader):
    return [tuple(np.asarray(x).copy() for x in batch) for batch in loader]


def column(batches, k):
    return np.concatenate([b[k] for b in batches])


@pytest.mark.parametrize("source", ["photos", "images_jpg"])
def test_two_views_follow_the_fields_and_keep_view_zero_unchanged(source, photos):
    path = photos if source == "photos" else fixture("images_jpg")
    one = Loader(path, batch_size=5, drop_last=False, seed=3, order=OrderOption.RANDOM,
                 pipelines={"image": [rrc(), RandomHorizontalFlip()]})
    two = Loader(path, batch_size=5, drop_last=False, seed=3, order=OrderOption.RANDOM,
                 pipelines={"image": [rrc(), RandomHorizontalFlip()],
                            "image_0": [rrc(), RandomHorizontalFlip()]},
                 custom_field_mapper={"image_0": "image"})
    fields = list(one.output_names)
    assert list(two.output_names) == fields + ["image_0"]
    a, b = epoch(one), epoch(two)
    assert all(len(x) == len(fields) + 1 for x in b)
    for k in range(len(fields)):
        # View 0 (and every other field) is the one-view loader's, bit for bit.
        assert np.array_equal(column(a, k), column(b, k))
    view0, view1 = column(b, 0), column(b, len(fields))
    assert view1.shape == view0.shape
    # Each sample's two views differ (their own crops); every sample comes once.
    assert all(not np.array_equal(x, y) for x, y in zip(view0, view1))
    # The same loader built again gives the same views.
    again = Loader(path, batch_size=5, drop_last=False, seed=3, order=OrderOption.RANDOM,
                   pipelines={"image": [rrc(), RandomHorizontalFlip()],
                              "image_0": [rrc(), RandomHorizontalFlip()]},
                   custom_field_mapper={"image_0": "image"})
    assert np.array_equal(column(epoch(again), len(fields)), view1)


def test_the_source_may_be_left_out_and_views_chain(photos):
    loader = Loader(photos, batch_size=4, seed=1,
                    pipelines={"image": None, "image_0": [rrc(24)],
                               "image_1": [CenterCropRGBImageDecoder((16, 16))]},
                    custom_field_mapper={"image_0": "image", "image_1": "image_0"})
    assert loader.output_names == ["label", "image_0", "image_1"]
    label, view0, view1 = next(iter(loader))
    assert np.asarray(view0).shape == (4, 24, 24, 3)
    assert np.asarray(view1).shape == (4, 16, 16, 3)
    # Whether the source is in the batch or not, its view 1 keeps its draws.
    with_source = Loader(photos, batch_size=4, seed=1,
                         pipelines={"image": [rrc()], "image_0": [rrc(24)]},
                         custom_field_mapper={"image_0": "image"})
    _, _, again = next(iter(with_source))
    assert np.array_equal(np.asarray(again), np.asarray(view0))


def test_a_view_without_a_pipeline_gets_the_default_one_and_a_pipeline_spec_is_a_view(photos):
    loader = Loader(photos, batch_size=4, seed=1, pipelines={"image": [rrc()]},
                    custom_field_mapper={"label_0": "label"})
    image, label, label_0 = next(iter(loader))
    assert np.array_equal(np.asarray(label), np.asarray(label_0))
    spec = Loader(photos, batch_size=4, seed=1,
                  pipelines={"image": [rrc()], "image_0": PipelineSpec("image", rrc())})
    mapped = Loader(photos, batch_size=4, seed=1,
                    pipelines={"image": [rrc()], "image_0": [rrc()]},
                    custom_field_mapper={"image_0": "image"})
    assert spec.output_names == mapped.output_names == ["image", "label", "image_0"]
    for x, y in zip(next(iter(spec)), next(iter(mapped))):
        assert np.array_equal(np.asarray(x), np.asarray(y))


def test_a_two_view_state_resumes_the_same_batches(photos):
    def make():
        return Loader(photos, batch_size=3, seed=5, order=OrderOption.RANDOM,
                      pipelines={"image": [rrc(), RandomHorizontalFlip()],
                                 "image_0": [rrc(), RandomHorizontalFlip()]},
                      custom_field_mapper={"image_0": "image"})
    whole = epoch(make())
    loader = make()
    it = iter(loader)
    first = [tuple(np.asarray(x).copy() for x in next(it)) for _ in range(2)]
    state = loader.state_dict()
    del it
    resumed = make()
    resumed.load_state_dict(state)
    rest = epoch(resumed)
    assert len(first) + len(rest) == len(whole)
    for got, want in zip(first + rest, whole):
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
    labels = np.concatenate([b[1].reshape(-1) for b in whole]).tolist()
    assert sorted(labels) == list(range(12)), "every sample exactly once"


def test_filter_keeps_the_views(photos):
    loader = Loader(photos, batch_size=4, seed=1, drop_last=False,
                    pipelines={"image": [rrc()], "image_0": [rrc(16)]},
                    custom_field_mapper={"image_0": "image"})
    even = loader.filter("label", lambda label: int(label[0]) % 2 == 0)
    assert even.output_names == ["image", "label", "image_0"]
    labels = np.concatenate([np.asarray(b[1]).reshape(-1) for b in even])
    assert sorted(labels.tolist()) == list(range(0, 12, 2))


def test_bad_mappers_are_refused(photos):
    base = dict(batch_size=4, pipelines={"image": [rrc()]})
    with pytest.raises(ConfigError, match="maps to 'picture'"):
        Loader(photos, custom_field_mapper={"image_0": "picture"}, **base)
    with pytest.raises(ValueError, match="has the name of a field"):
        Loader(photos, custom_field_mapper={"label": "image"}, **base)
    with pytest.raises(TypeError):
        Loader(photos, custom_field_mapper=[("image_0", "image")], **base)
    # A view's decoder is checked against the source's type, as the field's own would be.
    with pytest.raises(Exception) as as_field:
        Loader(photos, pipelines={"image": [rrc()], "label": [rrc()]}, batch_size=4)
    with pytest.raises(as_field.type):
        Loader(photos, custom_field_mapper={"label_0": "label"},
               pipelines={"image": [rrc()], "label_0": [rrc()]}, batch_size=4)
