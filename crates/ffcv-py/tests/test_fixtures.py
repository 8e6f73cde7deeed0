"""Every FFCV 1.0.2 fixture through ffcv_rs.loader.Loader: the values equal the recorded
ones (ints exactly, floats by bits, bytes by length and content, arrays by hash, JSON by
value), with the OS and the process cache, with 1 and 2 workers, compiled and not."""

import numpy as np
import pytest

from conftest import NAMES, as_numpy, expected, fixture, sha
from ffcv_rs.fields import JSONField
from ffcv_rs.fields.decoders import CenterCropRGBImageDecoder, IntDecoder
from ffcv_rs.loader import Loader, OrderOption


def pipelines_for(name):
    if name == "images_jpg":
        return {"image": [CenterCropRGBImageDecoder((32, 32), ratio=224 / 256)]}
    return {}


def load_all(name, os_cache=True, workers=1, compile=True):
    loader = Loader(fixture(name), batch_size=7, num_workers=workers, os_cache=os_cache,
                    order=OrderOption.SEQUENTIAL, drop_last=False, pipelines=pipelines_for(name),
                    compile=compile)
    rows = {n: [] for n in loader.output_names}
    batches = 0
    for batch in loader:
        batches += 1
        assert len(batch) == len(loader.output_names)
        for n, out in zip(loader.output_names, batch):
            rows[n].extend(as_numpy(out).copy())
    assert batches == len(loader)
    return loader, rows


def check(name, loader, rows):
    exp = expected(name)
    n = exp["header"]["num_samples"]
    assert exp["loader"]["num_batches"] == len(loader)
    for out in exp["outputs"]:
        got = rows[out["name"]]
        assert len(got) == n, f"{name}/{out['name']}: every sample once"
        dtype = np.asarray(got[0]).dtype
        assert dtype.name == out["dtype"], f"{name}/{out['name']} dtype"
        assert list(np.asarray(got[0]).shape) == out["sample_shape"]
        for i in range(n):
            row = np.asarray(got[i])
            if out["kind"] == "scalar" and out["dtype"] == "int64":
                assert int(row[0]) == out["values"][i], f"{name}/{out['name']}[{i}]"
            elif out["kind"] == "scalar":
                assert int(row.view(np.uint64)[0]) == out["bits"][i], f"{name}/{out['name']}[{i}] bits"
            elif out["kind"] == "bytes":
                e = out["samples"][i]
                raw = row.tobytes()
                assert sha(raw[: e["len"]]) == e["sha256"], f"{name}/{out['name']}[{i}]"
                # FFCV leaves the bytes past a sample's length undefined; ours are zeros.
                assert not any(raw[e["len"]:]), f"{name}/{out['name']}[{i}] padding"
            else:
                assert sha(row.tobytes()) == out["samples"][i]["sha256"], f"{name}/{out['name']}[{i}]"
    if "json_values" in exp:
        meta = np.stack(rows["meta"])
        assert JSONField.unpack(meta) == exp["json_values"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("os_cache,workers", [(True, 1), (False, 2)])
def test_fixture_values_equal_ffcv(name, os_cache, workers):
    loader, rows = load_all(name, os_cache=os_cache, workers=workers)
    check(name, loader, rows)


@pytest.mark.parametrize("name", ["scalars", "bytes_ndarray", "images_jpg"])
def test_fixture_values_equal_ffcv_interpreted(name):
    loader, rows = load_all(name, os_cache=True, workers=2, compile=False)
    check(name, loader, rows)


def test_outputs_follow_the_file_field_order_and_skip_disabled_fields():
    loader = Loader(fixture("images_raw"), batch_size=7, pipelines={"label": None,
                    "index": [IntDecoder()]})
    assert loader.output_names == ["image", "index"]
    image, index = next(iter(loader))
    assert as_numpy(image).shape == (7, 32, 32, 3)
    assert isinstance(index, np.ndarray) and index.shape == (7, 1)
    assert index[:, 0].tolist() == list(range(7))


def test_len_seed_batch_size_and_next_epoch():
    loader = Loader(fixture("scalars"), batch_size=32, order=OrderOption.RANDOM, seed=5)
    assert len(loader) == 3 and loader.batch_size == 32 and loader.seed == 5
    assert loader.next_epoch == 0
    orders = []
    for _ in range(2):
        seen = []
        for (index, _value) in loader:
            seen.extend(as_numpy(index)[:, 0].tolist())
        orders.append(seen)
    assert loader.next_epoch == 2
    assert orders[0] == loader.order_of(0)[:96] and orders[1] == loader.order_of(1)[:96]
    assert orders[0] != orders[1]
    loader.next_epoch = 0
    again = [i for (index, _) in loader for i in as_numpy(index)[:, 0].tolist()]
    assert again == orders[0]


def _images(decoder):
    loader = Loader(fixture("images_jpg"), batch_size=7, order=OrderOption.SEQUENTIAL,
                    drop_last=False, pipelines={"image": [decoder]})
    return np.concatenate([as_numpy(batch[0]) for batch in loader]).astype(np.float64)


def test_dct_downscale_is_opt_in_and_close_to_the_exact_decode():
    # Every fixture image's centre square is at least 40 px, so a 16x16 output lets each
    # decode at 1/2 scale or less; the default stays FFCV's pixels.
    exact = _images(CenterCropRGBImageDecoder((16, 16), ratio=1.0))
    assert CenterCropRGBImageDecoder((16, 16)).dct_downscale is False
    reduced = _images(CenterCropRGBImageDecoder((16, 16), ratio=1.0, dct_downscale=True))
    assert reduced.shape == exact.shape == (24, 16, 16, 3)
    assert (reduced != exact).any(), "the option changed no pixel: it did not apply"
    mse = ((reduced - exact) ** 2).mean()
    psnr = 10 * np.log10(255.0 ** 2 / mse)
    # 30.95 dB when written (deterministic: fixed crops); pixel garbage would give ~10.
    assert psnr > 28.0, psnr
    with pytest.raises(TypeError):
        CenterCropRGBImageDecoder((16, 16), 1.0, True)  # keyword-only
