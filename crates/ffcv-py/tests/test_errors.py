"""Errors: the Rust messages as ffcv_rs exceptions; bad arguments as TypeError/ValueError."""

import shutil

import numpy as np
import pytest

from conftest import fixture
from ffcv_rs import BadFileError, ConfigError, DecodeError, FFCVError
from ffcv_rs.fields.decoders import CenterCropRGBImageDecoder, IntDecoder, SimpleRGBImageDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.transforms import NormalizeImage, RandomHorizontalFlip


def test_missing_file_is_a_bad_file_error_naming_it(tmp_path):
    path = str(tmp_path / "nope.beton")
    with pytest.raises(BadFileError) as e:
        Loader(path, batch_size=4)
    assert "nope.beton" in str(e.value)
    assert isinstance(e.value, FFCVError)


def test_truncated_file_is_a_bad_file_error(tmp_path):
    path = tmp_path / "cut.beton"
    data = open(fixture("json"), "rb").read()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadFileError, match="cut.beton"):
        Loader(str(path), batch_size=4)


def test_variable_size_images_with_simple_decoder_are_a_config_error():
    with pytest.raises(ConfigError) as e:
        Loader(fixture("images_jpg"), batch_size=4, pipelines={"image": [SimpleRGBImageDecoder()]})
    assert isinstance(e.value, ValueError)
    assert "image" in str(e.value)


def test_corrupt_jpeg_is_a_decode_error_naming_field_and_sample(tmp_path):
    import json
    exp = json.load(open(fixture("images_jpg").replace(".beton", ".expected.json")))
    sample, ptr, size = exp["alloc_table"][5]
    data = bytearray(open(fixture("images_jpg"), "rb").read())
    # Keep the SOI/headers, wipe the entropy-coded data: the decoder must fail.
    for i in range(ptr + size // 2, ptr + size):
        data[i] = 0xFF
    data[ptr + 2: ptr + 40] = b"\x00" * 38  # break the first segments too
    path = tmp_path / "bad.beton"
    path.write_bytes(bytes(data))
    loader = Loader(str(path), batch_size=4, num_workers=1,
                    pipelines={"image": [CenterCropRGBImageDecoder((32, 32))]})
    with pytest.raises(DecodeError) as e:
        for _ in loader:
            pass
    assert e.value.field == "image" and e.value.sample == sample
    assert "sample 5" in str(e.value)
    # The failed epoch ended cleanly; the loader is still usable.
    assert loader.live_threads() == 0


@pytest.mark.parametrize("kwargs,exc", [
    ({"batch_size": 0}, ValueError),
    ({"batch_size": "8"}, TypeError),
    ({"batch_size": 4, "num_workers": 0}, ValueError),
    ({"batch_size": 4, "order": "sideways"}, ValueError),
    ({"batch_size": 4, "order": 3}, TypeError),
    ({"batch_size": 4, "seed": -1}, ValueError),
    ({"batch_size": 4, "indices": [1, -2]}, ValueError),
    ({"batch_size": 4, "custom_fields": {"x": object()}}, ValueError),
    ({"batch_size": 4, "pipelines": {"index": []}}, ValueError),
    # FFCV's rule: a pipeline that does not start with the field's kind of decoder gets
    # the default one in front; the flip then meets an int field.
    ({"batch_size": 4, "pipelines": {"index": [RandomHorizontalFlip()]}}, ConfigError),
    ({"batch_size": 4, "pipelines": {"index": [IntDecoder(), 42]}}, TypeError),
])
def test_bad_arguments_raise_at_construction(kwargs, exc):
    with pytest.raises(exc):
        Loader(fixture("scalars"), **kwargs)


def test_out_of_range_indices_are_a_config_error():
    with pytest.raises(ConfigError):
        Loader(fixture("scalars"), batch_size=4, indices=[0, 1000])


def test_bad_transform_parameters_raise_value_error():
    with pytest.raises(ValueError):
        RandomHorizontalFlip(1.5)
    with pytest.raises(ValueError):
        NormalizeImage([1, 2], [1, 2, 3])
    with pytest.raises(ValueError):
        CenterCropRGBImageDecoder((0, 32))


def test_to_device_without_to_tensor_is_refused():
    from ffcv_rs.transforms import ToDevice
    with pytest.raises(ValueError, match="ToTensor"):
        Loader(fixture("scalars"), batch_size=4, pipelines={"index": [IntDecoder(), ToDevice("cpu")]})


def test_normalize_on_an_int_field_is_a_config_error():
    with pytest.raises(ConfigError):
        Loader(fixture("scalars"), batch_size=4,
               pipelines={"index": [IntDecoder(), NormalizeImage([0, 0, 0], [1, 1, 1])]})


def test_max_image_pixels_caps_what_a_sample_may_claim():
    from ffcv_rs.fields.decoders import RandomResizedCropRGBImageDecoder
    pipelines = {"image": [RandomResizedCropRGBImageDecoder((16, 16))], "label": None,
                 "index": None}
    # Every image of the fixture is larger than 100 pixels: the first batch fails, naming
    # the field and the sample, before anything is sized from the claim.
    capped = Loader(fixture("images_jpg"), batch_size=2, pipelines=pipelines,
                    max_image_pixels=100)
    with pytest.raises(DecodeError) as info:
        next(iter(capped))
    assert info.value.field == "image"
    assert "image" in str(info.value)
    # The default cap lets the same file through.
    (image,) = next(iter(Loader(fixture("images_jpg"), batch_size=2, pipelines=pipelines)))
    assert np.asarray(image).shape == (2, 16, 16, 3)
    with pytest.raises(ValueError, match="max_image_pixels"):
        Loader(fixture("images_jpg"), batch_size=2, max_image_pixels=0)


def test_the_native_loader_takes_keywords_only():
    # Its ~30 arguments by position would let one inserted argument shift the rest.
    from ffcv_rs import _native

    with pytest.raises(TypeError):
        _native.Loader([fixture("scalars.beton")], 4)
