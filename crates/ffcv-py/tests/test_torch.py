"""The torch path: tensors that view the slot's memory, FFCV's ImageNet pipeline with only
the imports changed, and 2 processes under torchrun. Skipped when torch is absent."""

import json
import os
import pathlib
import signal
import socket
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
        # FFCV's NormalizeImage: a float64 table rounded once to the output type.
        want = ((raw.astype(np.float64) - MEAN) / STD).astype(np.float16)
        got = images.permute(0, 2, 3, 1).numpy()
        assert got.dtype == np.float16 and np.array_equal(got, want)
        n += 1
    assert n == len(loader) == 3


def test_torch_from_dlpack_pointer_is_the_slot():
    torch = torch_or_skip()
    loader = Loader(fixture("scalars"), batch_size=10, pipelines={"index": [IntDecoder()], "value": None})
    (index,) = next(iter(loader))
    t = torch.from_dlpack(index.base)
    assert t.data_ptr() == index.base.data_ptr == index.ctypes.data


WORKER = pathlib.Path(__file__).resolve().parent / "torchrun_worker.py"
# Whole torchrun launches (torch import, rendezvous, loader, exit) on a loaded machine.
TORCHRUN_TIMEOUT = 240


def free_port():
    """A TCP port nobody listens on now (the OS's pick), for torchrun's store."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(mode, out, *extra):
    """Runs torchrun_worker.py MODE on 2 ranks (gloo, CPU) and returns the ranks' records.

    The rendezvous is static on 127.0.0.1 and a port picked here (no hostname lookup, no
    c10d rendezvous), and gloo talks over the loopback device. torchrun runs in its own
    session: on a timeout the whole group (agent and both ranks) is killed, so no rank is
    left behind holding the port, and the test fails with their output."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
           "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), "--max_restarts", "0",
           str(WORKER), mode, fixture("scalars"), str(out), *map(str, extra)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=TORCHRUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"torchrun {mode} still running after {TORCHRUN_TIMEOUT} s:\n{output}")
    assert proc.returncode == 0, output
    records = []
    for rank in (0, 1):
        with open(out / f"{mode}-{rank}.json") as f:
            records.append(json.load(f))
    return records


def test_torchrun_two_ranks_cover_every_sample_exactly_once(tmp_path):
    torch_or_skip()
    ranks = torchrun("full", tmp_path)
    seeds = ranks[0]["seeds"]
    assert len(seeds) == 2 and seeds[0] == seeds[1]  # agreed without a seed
    assert ranks[0]["everyone"] == ranks[1]["everyone"] == [r["ids"] for r in ranks]
    flat = sorted(i for r in ranks for i in r["ids"])
    assert flat == list(range(100))
    assert [r["live_threads"] for r in ranks] == [0, 0]
    assert abs(len(ranks[0]["ids"]) - len(ranks[1]["ids"])) <= 10


def test_torchrun_mid_epoch_state_resumes_exactly_after_a_restart(tmp_path):
    torch_or_skip()
    k = 2
    first = torchrun("stop", tmp_path, k)
    # A new torchrun: a new process group, which agrees on another seed; the state's seed
    # must win (no seed was given).
    second = torchrun("resume", tmp_path)
    seed = first[0]["seeds"][0]
    assert first[0]["seeds"] == [seed, seed] and second[0]["seeds"] == [seed, seed]
    for rank in (0, 1):
        before, after = first[rank]["ids"], second[rank]["ids"]
        assert len(before) == 10 * k
        # Exactly what an uninterrupted epoch with that seed gives this rank.
        whole = Loader(fixture("scalars"), batch_size=10, order=OrderOption.RANDOM, seed=seed,
                       distributed=True, rank=rank, world_size=2, drop_last=False,
                       pipelines={"index": [IntDecoder()], "value": None})
        assert before + after == whole.order_of(0)
    union = sorted(i for r in (0, 1) for i in first[r]["ids"] + second[r]["ids"])
    assert union == list(range(100))
    assert [r["live_threads"] for r in first + second] == [0, 0, 0, 0]
