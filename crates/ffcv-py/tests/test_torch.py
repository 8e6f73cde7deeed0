"""The torch path: tensors that view the slot's memory, FFCV's ImageNet pipeline with only
the imports changed, and 2 processes under torchrun. Skipped when torch is absent."""

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import fixture, torch_or_skip
from ffcv_rs.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.transforms import (NormalizeImage, RandomHorizontalFlip, Squeeze, ToDevice,
                                ToTensor, ToTorchImage)

MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255


def test_torch_is_not_imported_unless_asked():
    code = textwrap.dedent(f"""
        import sys
        from ffcv_rs.loader import Loader
        from ffcv_rs.fields.decoders import IntDecoder
        l = Loader({fixture('scalars')!r}, batch_size=10, pipelines={{'index': [IntDecoder()], 'value': None}})
        next(iter(l))
        assert 'torch' not in sys.modules, 'torch was imported'
    """)
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


def test_to_tensor_yields_tensors_over_the_slot():
    torch = torch_or_skip()
    loader = Loader(fixture("scalars"), batch_size=10, pipelines={
        "index": [IntDecoder(), ToTensor()], "value": None})
    (index,) = next(iter(loader))
    assert isinstance(index, torch.Tensor) and index.dtype == torch.int64
    assert index[:, 0].tolist() == list(range(10))


def test_imagenet_pipeline_runs_with_only_the_imports_changed():
    torch = torch_or_skip()
    res = 64
    # FFCV's ImageNet example's pipelines, with the device being the CPU here.
    device = torch.device("cpu")
    image_pipeline = [RandomResizedCropRGBImageDecoder((res, res)), RandomHorizontalFlip(),
                      ToTensor(), ToDevice(device, non_blocking=True), ToTorchImage(),
                      NormalizeImage(MEAN, STD, np.float16)]
    label_pipeline = [IntDecoder(), ToTensor(), Squeeze(), ToDevice(device, non_blocking=True)]
    loader = Loader(fixture("images_jpg"), batch_size=8, num_workers=2, order=OrderOption.RANDOM,
                    seed=1, os_cache=True, drop_last=True,
                    pipelines={"image": image_pipeline, "label": label_pipeline, "index": None})
    reference = Loader(fixture("images_jpg"), batch_size=8, num_workers=1, order=OrderOption.RANDOM,
                       seed=1, pipelines={"image": [RandomResizedCropRGBImageDecoder((res, res)),
                                                    RandomHorizontalFlip()],
                                          "label": [IntDecoder()], "index": None})
    n = 0
    for (images, labels), (raw, raw_labels) in zip(loader, reference):
        assert images.shape == (8, 3, res, res) and images.dtype == torch.float16
        assert images.is_contiguous(memory_format=torch.channels_last)
        assert labels.shape == (8,) and labels.tolist() == raw_labels[:, 0].tolist()
        want = ((raw.astype(np.float32) - MEAN.astype(np.float32)) / STD.astype(np.float32))
        got = images.permute(0, 2, 3, 1).float().numpy()
        assert np.allclose(got, want.astype(np.float16).astype(np.float32), atol=1e-2)
        n += 1
    assert n == len(loader) == 3


def test_torch_from_dlpack_pointer_is_the_slot():
    torch = torch_or_skip()
    loader = Loader(fixture("scalars"), batch_size=10, pipelines={"index": [IntDecoder()], "value": None})
    (index,) = next(iter(loader))
    t = torch.from_dlpack(index.base)
    assert t.data_ptr() == index.base.data_ptr == index.ctypes.data


TORCHRUN_SCRIPT = """
import sys, torch, torch.distributed as dist
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.fields.decoders import IntDecoder
dist.init_process_group("gloo")
loader = Loader(sys.argv[1], batch_size=10, order=OrderOption.RANDOM, distributed=True,
                num_workers=1, drop_last=False, pipelines={"index": [IntDecoder()], "value": None})
mine = [i for (index,) in loader for i in index[:, 0].tolist()]
seeds = [None] * dist.get_world_size()
dist.all_gather_object(seeds, loader.seed)
everyone = [None] * dist.get_world_size()
dist.all_gather_object(everyone, mine)
if dist.get_rank() == 0:
    assert len(set(seeds)) == 1, seeds
    flat = sorted(i for part in everyone for i in part)
    assert flat == list(range(100)), flat
    print("EXACTLY-ONCE OK")
dist.destroy_process_group()
"""


def test_torchrun_two_ranks_cover_every_sample_exactly_once(tmp_path):
    torch_or_skip()
    script = tmp_path / "rank.py"
    script.write_text(TORCHRUN_SCRIPT)
    out = subprocess.run(
        # --standalone: a rendezvous on a free local port, so runs never collide on one.
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(script), fixture("scalars")],
        capture_output=True, text=True, timeout=240, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "EXACTLY-ONCE OK" in out.stdout
