"""FFCV 1.0.2's colour operations, ``RandomResizedCrop``, ``View`` and mixup, run natively.

Each is checked three ways: against FFCV's formula written out here in NumPy (always);
against FFCV 1.0.2's own code on the same inputs with its random draws pinned to ours
(FFCV's NumPy code, its generator patched to return the draws ffcv_rs made; where the
reference environment is installed, else skipped); and for the draws themselves, that
they are a function of (seed, epoch, sample), so that a resumed epoch repeats them.
"""

import contextlib

import numpy as np
import pytest

from conftest import fixture
from ffcv_rs import _native
from ffcv_rs.fields.basics import IntDecoder
from ffcv_rs.fields.rgb_image import SimpleRGBImageDecoder
from ffcv_rs.loader import Loader
from ffcv_rs.transforms import (
    Convert, ImageMixup, LabelMixup, RandomBrightness, RandomContrast, RandomHorizontalFlip,
    RandomResizedCrop, RandomSaturation, View,
)
from ffcv_rs.transforms.mixup import lambdas

COLOURS = {"RandomBrightness": RandomBrightness, "RandomContrast": RandomContrast,
           "RandomSaturation": RandomSaturation}
#: The operation index of the first transform after the decoder in a loader's pipeline,
#: and of the first operation of a ``BatchTransforms`` run (``_native.colour_factors``).
LOADER_FIRST, RUN_FIRST = 1, 0


def ffcv_or_skip(module: str):
    return pytest.importorskip(module, reason="FFCV 1.0.2 is not installed (the reference "
                               "environment, where FFCV is installed, runs this comparison)")


@contextlib.contextmanager
def ffcv_uncompiled():
    """FFCV's ``Compiler`` switched off, so its operations run as NumPy code whose draws
    can be pinned."""
    from ffcv.pipeline.compiler import Compiler as TheirCompiler

    was = TheirCompiler.is_enabled
    TheirCompiler.set_enabled(False)
    try:
        yield
    finally:
        TheirCompiler.set_enabled(was)


def images_and_ids(batch_size=16, **kw):
    """The first batch of the images_raw fixture: its ``uint8 [B, 32, 32, 3]`` images,
    labels and sample ids."""
    loader = Loader(fixture("images_raw"), batch_size=batch_size, pipelines={
        "image": [SimpleRGBImageDecoder()], "label": [IntDecoder()], "index": [IntDecoder()]}, **kw)
    image, label, index = next(iter(loader))
    return np.array(image), np.array(label), np.asarray(index)[:, 0].astype(np.uint64)


# -- FFCV's formulas, written out --------------------------------------------------------

def blend(image, other, factor):
    return np.clip(factor * image.astype(np.float64) + (1 - factor) * other, 0, 255).astype(np.uint8)


def grey(image):
    rgb = image.astype(np.float64)
    return (0.2989 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]).astype(np.uint8)


def colour_reference(name, images, factors):
    out = images.copy()
    for i, f in enumerate(factors):
        if f is None:
            continue
        if name == "RandomBrightness":
            out[i] = blend(images[i], 0.0, f)
        elif name == "RandomContrast":
            out[i] = blend(images[i], grey(images[i]).mean(), f)
        else:
            out[i] = blend(images[i], grey(images[i])[..., None], f)
    return out


def run_native(spec, images, ids, seed, epoch, compile=True):
    code = _native.BatchTransforms(list(images.shape[1:]), images.dtype.name, spec, 2, compile)
    out = np.empty((len(images), *code.output_shape), dtype=np.dtype(code.output_dtype))
    x = np.ascontiguousarray(images)
    code.run(x.ctypes.data, x.nbytes, out.ctypes.data, out.nbytes, [int(i) for i in ids],
             seed, epoch)
    return out


def ffcv_colour(name, images, factors):
    """FFCV 1.0.2's operation ``name`` on ``images`` with its draws pinned: applied where
    ``factors`` has a factor, with that factor."""
    module = ffcv_or_skip("ffcv.transforms.color_jitter")
    applied = np.array([f is not None for f in factors])
    values = np.array([1.0 if f is None else f for f in factors])
    with ffcv_uncompiled(), pytest.MonkeyPatch.context() as mp:
        code = getattr(module, name)(0.5, 0.5).generate_code()
        # FFCV applies where rand < p (p = 0.5 here) and draws the factors with uniform.
        mp.setattr(np.random, "rand", lambda n: np.where(applied, 0.0, 1.0)[:n])
        mp.setattr(np.random, "uniform", lambda lo, hi, n: values[:n])
        return code(images.copy(), None)


# -- colour operations ---------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(COLOURS))
def test_colour_operations_are_ffcvs_formula_with_the_drawn_factors(name):
    images, _, ids = images_and_ids()
    spec = [(name, {"magnitude": 0.8, "p": 0.5})]
    out = run_native(spec, images, ids, seed=5, epoch=2)
    factors = _native.colour_factors(0.5, 0.8, 5, 2, [int(i) for i in ids], RUN_FIRST)
    assert any(f is None for f in factors) and any(f is not None for f in factors)
    assert all(f is None or 0.2 <= f <= 1.8 for f in factors)
    assert np.array_equal(out, colour_reference(name, images, factors))
    # The interpreter gives the same bytes as the JIT.
    assert np.array_equal(run_native(spec, images, ids, 5, 2, compile=False), out)


@pytest.mark.parametrize("name", sorted(COLOURS))
def test_colour_operations_equal_ffcvs_code_with_pinned_draws(name):
    images, _, ids = images_and_ids()
    factors = _native.colour_factors(0.5, 0.8, 9, 0, [int(i) for i in ids], RUN_FIRST)
    ours = run_native([(name, {"magnitude": 0.8, "p": 0.5})], images, ids, seed=9, epoch=0)
    assert np.array_equal(ours, ffcv_colour(name, images, factors))


@pytest.mark.parametrize("name", sorted(COLOURS))
def test_colour_operations_run_natively_in_the_loader_with_draws_by_seed_epoch_sample(name):
    images, _, ids = images_and_ids()
    loader = Loader(fixture("images_raw"), batch_size=16, seed=3, pipelines={
        "image": [SimpleRGBImageDecoder(), COLOURS[name](0.6, p=0.7)],
        "label": None, "index": None})
    assert loader.code[0][1] == ("SimpleRGBImageDecoder", name) and loader.code[0][2] == ()
    epochs = []
    for epoch in range(2):
        (out,) = next(iter(loader))
        factors = _native.colour_factors(0.7, 0.6, 3, epoch, [int(i) for i in ids], LOADER_FIRST)
        assert np.array_equal(np.asarray(out), colour_reference(name, images, factors))
        epochs.append(np.array(out))
    assert not np.array_equal(epochs[0], epochs[1])  # new draws each epoch


def test_colour_operations_refuse_bad_parameters_and_grey_images():
    with pytest.raises(ValueError):
        RandomBrightness(-0.1)
    with pytest.raises(ValueError):
        RandomContrast(0.5, p=1.5)
    grey_images = np.zeros((2, 8, 8, 1), dtype=np.uint8)
    with pytest.raises(Exception, match="RandomSaturation"):
        run_native([("RandomSaturation", {"magnitude": 0.5})], grey_images, [0, 1], 0, 0)


# -- RandomResizedCrop (the transform) -----------------------------------------------------

def test_random_resized_crop_of_the_whole_image_equals_ffcvs():
    images, _, ids = images_and_ids()
    loader = Loader(fixture("images_raw"), batch_size=16, pipelines={
        "image": [SimpleRGBImageDecoder(), RandomResizedCrop((1.0, 1.0), (1.0, 1.0), 20)],
        "label": None, "index": None})
    assert loader.code[0][1] == ("SimpleRGBImageDecoder", "RandomResizedCrop")
    (ours,) = next(iter(loader))
    ours = np.asarray(ours)
    assert ours.shape == (16, 20, 20, 3) and ours.dtype == np.uint8
    # The crop is the whole (square) image, so its resize is fixed: FFCV's code gives it.
    module = ffcv_or_skip("ffcv.transforms.random_resized_crop")
    theirs = np.empty_like(ours)
    with ffcv_uncompiled():
        code = module.RandomResizedCrop((1.0, 1.0), (1.0, 1.0), 20).generate_code()
        code(images, theirs)
    assert np.array_equal(ours, theirs)


def test_random_resized_crop_boxes_follow_seed_epoch_and_sample():
    images, _, ids = images_and_ids()
    spec = [("RandomResizedCrop", {"scale": (0.2, 0.9), "ratio": (0.75, 4 / 3), "size": 12})]
    a = run_native(spec, images, ids, seed=1, epoch=0)
    assert a.shape == (16, 12, 12, 3)
    assert np.array_equal(run_native(spec, images, ids, 1, 0, compile=False), a)
    # The same samples in another order get the same crops.
    order = np.arange(16)[::-1]
    assert np.array_equal(run_native(spec, images[order], ids[order], 1, 0), a[order])
    assert not np.array_equal(run_native(spec, images, ids, 1, 1), a)


# -- View ----------------------------------------------------------------------------------

def test_view_before_a_built_in_runs_natively_and_at_the_end_is_a_view():
    images, _, _ = images_and_ids()
    native = Loader(fixture("images_raw"), batch_size=16, pipelines={
        "image": [SimpleRGBImageDecoder(), View(np.uint8), RandomHorizontalFlip(1.0)],
        "label": None, "index": None})
    assert native.code[0][1] == ("SimpleRGBImageDecoder", "View", "RandomHorizontalFlip")
    (out,) = next(iter(native))
    assert np.array_equal(np.asarray(out), images[:, :, ::-1])
    handed = Loader(fixture("images_raw"), batch_size=16, pipelines={
        "image": [SimpleRGBImageDecoder(), View(np.int8)], "label": None, "index": None})
    assert handed.code[0][1] == ("SimpleRGBImageDecoder",)
    (out,) = next(iter(handed))
    assert out.dtype == np.int8 and np.array_equal(out, images.view(np.int8))


def test_native_view_rescales_the_last_axis_and_refuses_what_does_not_divide():
    x = np.arange(2 * 4 * 8, dtype=np.uint8).reshape(2, 4, 8)
    out = run_native([("View", {"dtype": "float32"})], x, [0, 1], 0, 0)
    assert out.shape == (2, 4, 2) and np.array_equal(out, x.view(np.float32))
    with pytest.raises(Exception, match="View"):
        run_native([("View", {"dtype": "float32"})], x[:, :, :6].copy(), [0, 1], 0, 0)


# -- mixup ---------------------------------------------------------------------------------

def mixup_loader(alpha, same, seed=0, image_ops=(), **kw):
    return Loader(fixture("images_raw"), batch_size=16, seed=seed, pipelines={
        "image": [SimpleRGBImageDecoder(), *image_ops, ImageMixup(alpha, same)],
        "label": [IntDecoder(), LabelMixup(alpha, same)], "index": [IntDecoder()]}, **kw)


def mix_reference(images, lam):
    w = lam.reshape((-1,) + (1,) * (images.ndim - 1))
    return w * images.astype(np.float64) + (1 - w) * np.roll(images, 1, axis=0).astype(np.float64)


@pytest.mark.parametrize("same", [False, True])
def test_mixup_is_ffcvs_formula_with_lambdas_by_seed_epoch_sample(same):
    images, labels, ids = images_and_ids()
    loader = mixup_loader(0.4, same, seed=11)
    for epoch in range(2):
        mixed, rows, index = next(iter(loader))
        assert np.array_equal(np.asarray(index)[:, 0], ids)
        lam = lambdas(11, epoch, ids, 0.4, same)
        assert np.all((lam > 0) & (lam < 1))
        assert same == bool(np.all(lam == lam[-1]))
        assert np.array_equal(np.asarray(mixed), mix_reference(images, lam).astype(np.uint8))
        rows = np.asarray(rows)
        assert rows.dtype == np.float32 and rows.shape == (16, 3)
        assert np.array_equal(rows[:, 0], labels[:, 0]) and np.array_equal(rows[:, 1], np.roll(labels[:, 0], 1))
        assert np.array_equal(rows[:, 2], lam.astype(np.float32))
    assert not np.array_equal(lambdas(11, 0, ids, 0.4, same), lambdas(11, 1, ids, 0.4, same))
    # A sample's lambda does not depend on its batch (without same_lambda).
    if not same:
        assert np.array_equal(lambdas(11, 0, ids[::-1], 0.4, False), lambdas(11, 0, ids, 0.4, False)[::-1])


def ffcv_mixer(cls_name, batch, lam, same):
    """FFCV 1.0.2's mixup code on ``batch`` with its lambda draws pinned to ``lam``."""
    module = ffcv_or_skip("ffcv.transforms.mixup")
    from ffcv.pipeline.state import State as TheirState

    op = getattr(module, cls_name)(0.4, same)
    import torch

    state = TheirState(jit_mode=True, device=torch.device("cpu"), shape=batch.shape[1:],
                       dtype=batch.dtype)
    _, query = op.declare_state_and_memory(state)
    dst = np.empty((len(batch), *query.shape), dtype=query.dtype)
    with ffcv_uncompiled(), pytest.MonkeyPatch.context() as mp:
        code = op.generate_code()
        mp.setattr(np.random, "seed", lambda s: None)
        mp.setattr(np.random, "beta", lambda a, b, n=None: lam[-1] if n is None else lam[:n])
        return code(batch, dst, np.arange(len(batch)))


@pytest.mark.parametrize("same", [False, True])
def test_mixup_equals_ffcvs_code_with_pinned_lambdas(same):
    images, labels, ids = images_and_ids()
    mixed, rows, _ = next(iter(mixup_loader(0.4, same, seed=2)))
    lam = lambdas(2, 0, ids, 0.4, same)
    assert np.array_equal(np.asarray(mixed), ffcv_mixer("ImageMixup", images, lam, same))
    assert np.array_equal(np.asarray(rows), ffcv_mixer("LabelMixup", labels, lam, same))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_mixup_of_float_images_is_within_one_unit_in_the_last_place_of_ffcvs(dtype):
    images, _, ids = images_and_ids()
    loader = mixup_loader(0.4, False, seed=4, image_ops=(Convert(np.dtype(dtype)),))
    mixed = np.asarray(next(iter(loader))[0])
    assert mixed.dtype == np.dtype(dtype)
    lam = lambdas(4, 0, ids, 0.4, False)
    # Ours: float64 arithmetic then one rounding (what FFCV's numba code does).
    assert np.array_equal(mixed, mix_reference(images.astype(dtype), lam).astype(dtype))
    # FFCV's NumPy code (its draws pinned here) rounds in the image's type: float16
    # arithmetic for float16 images, and for float32 NumPy's value-based casting rounds
    # lam, 1 - lam and each product to float32 before the sum (FFCV's numba code, what it
    # runs by default, computes in float64 as ffcv_rs does). Every value of the pixels
    # mixed: within one unit in the last place for float16, two for float32.
    theirs = ffcv_mixer("ImageMixup", images.astype(dtype), lam, False)
    ulps = np.abs(mixed.view(f"u{mixed.itemsize}").astype(np.int64)
                  - theirs.view(f"u{mixed.itemsize}").astype(np.int64))
    assert ulps.max() <= (1 if dtype == "float16" else 2)


def test_mixup_to_one_hot_equals_ffcvs():
    torch = pytest.importorskip("torch", reason="MixupToOneHot works on torch tensors")
    from ffcv_rs.transforms import MixupToOneHot, ToTensor

    loader = Loader(fixture("images_raw"), batch_size=16, seed=6, pipelines={
        "image": None, "index": None,
        "label": [IntDecoder(), LabelMixup(0.4, False), ToTensor(), MixupToOneHot(10)]})
    (targets,) = next(iter(loader))
    _, labels, ids = images_and_ids()
    lam = lambdas(6, 0, ids, 0.4, False).astype(np.float32)
    want = np.zeros((16, 10), dtype=np.float32)
    want[np.arange(16), labels[:, 0]] = lam
    want[np.arange(16), np.roll(labels[:, 0], 1)] = 1 - lam
    assert isinstance(targets, torch.Tensor) and np.array_equal(targets.numpy(), want)
    module = ffcv_or_skip("ffcv.transforms.mixup")
    rows = torch.from_numpy(np.stack([labels[:, 0], np.roll(labels[:, 0], 1), lam], 1).astype(np.float32))
    theirs = module.MixupToOneHot(10).generate_code()(rows.clone(), torch.empty(16, 10))
    assert np.array_equal(targets.numpy(), theirs.numpy())


# -- Poison --------------------------------------------------------------------------------

@pytest.mark.parametrize("alpha_dtype", ["float32", "float64"])
def test_poison_runs_natively_and_equals_ffcvs_and_the_python_code(alpha_dtype):
    from ffcv_rs.transforms import Poison

    rng = np.random.default_rng(0)
    mask = rng.integers(0, 256, (32, 32, 3)).astype(np.uint8)
    alpha = rng.uniform(0, 1, (32, 32)).astype(alpha_dtype)
    images, _, ids = images_and_ids()
    targets = [1, 4, 5, 11, 40]
    loader = Loader(fixture("images_raw"), batch_size=16, pipelines={
        "image": [SimpleRGBImageDecoder(), Poison(mask, alpha, targets)],
        "label": None, "index": None})
    assert loader.code[0][1] == ("SimpleRGBImageDecoder", "Poison")
    (ours,) = next(iter(loader))
    ours = np.asarray(ours)
    untouched = [i for i in range(16) if i not in targets]
    assert np.array_equal(ours[untouched], images[untouched])
    assert not np.array_equal(ours[[1, 4, 5, 11]], images[[1, 4, 5, 11]])
    # The same operation's Python code (FFCV's steps, float32 buffer) gives the same bytes.
    op = Poison(mask, alpha, targets)
    scratch = np.empty((16, 32, 32, 3), dtype=np.float32)
    assert np.array_equal(op.generate_code()(images.copy(), scratch, ids.astype(np.int64)), ours)
    module = ffcv_or_skip("ffcv.transforms.poisoning")
    with ffcv_uncompiled():
        code = module.Poison(mask, alpha, targets).generate_code()
        theirs = code(images.copy(), scratch, ids.astype(np.int64))
    assert np.array_equal(theirs, ours)


# -- built-ins driven through FFCV's protocol ----------------------------------------------

def test_a_built_ins_generate_code_is_its_native_kernel():
    from ffcv_rs.transforms import Cutout, NormalizeImage

    images, _, ids = images_and_ids()
    flip = RandomHorizontalFlip(1.0).generate_code()
    assert flip.with_indices
    assert np.array_equal(flip(images, np.empty_like(images), ids), images[:, :, ::-1])
    # Draws: from a seed NumPy's generator gives, so np.random.seed repeats them.
    cut = Cutout(8).generate_code()
    runs = []
    for seed in (1, 1, 2):
        np.random.seed(seed)
        x = images.copy()
        assert cut(x, None, ids) is x  # in place, as FFCV's
        runs.append(x)
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])
    assert all(((r == 0).all(axis=-1).sum(axis=(1, 2)) >= 64).all() for r in runs)
    # The same values as the loader's pipeline.
    mean, std = [120.0, 110.0, 100.0], [60.0, 50.0, 40.0]
    norm = NormalizeImage(np.array(mean), np.array(std), np.float32).generate_code()
    out = norm(images, np.empty(images.shape, np.float32), ids)
    loader = Loader(fixture("images_raw"), batch_size=16, pipelines={
        "image": [SimpleRGBImageDecoder(), NormalizeImage(np.array(mean), np.array(std), np.float32)],
        "label": None, "index": None})
    assert np.array_equal(out, np.asarray(next(iter(loader))[0]))


def test_a_built_ins_generate_code_falls_back_to_numpy_for_what_the_kernel_refuses():
    # int16 is no pipeline-jit type: FFCV's NumPy code runs instead.
    x = np.arange(2 * 4 * 4 * 3, dtype=np.int16).reshape(2, 4, 4, 3)
    out = RandomHorizontalFlip(1.0).generate_code()(x, np.empty_like(x), np.arange(2))
    assert np.array_equal(out, x[:, :, ::-1])
