"""ToDevice('cuda:N') through the Rust loader's GPU stage (gpu-stage): batches are CUDA
tensors exported through DLPack (kDLCUDA, device N), with DLPack's stream handshake.

The GPU tests skip with a message where torch has no CUDA device; the error path runs
where there is no CUDA driver (every development machine of this project so far)."""

import numpy as np
import pytest

from conftest import expected, fixture, torch_or_skip
from ffcv_rs import FFCVError
from ffcv_rs.fields.decoders import FloatDecoder, IntDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.transforms import ToDevice, ToTensor


def pipelines(device):
    return {"index": [IntDecoder(), ToTensor(), ToDevice(device)],
            "value": [FloatDecoder(), ToTensor(), ToDevice(device, non_blocking=True)]}


def cuda_or_skip():
    torch = torch_or_skip()
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch: the gpu-stage ToDevice path is only "
                    "tested on a machine with a GPU (and torch built with CUDA)")
    return torch


def test_gpu_stage_without_cuda_is_a_clear_error_and_the_default_falls_back():
    try:
        Loader(fixture("scalars"), batch_size=10, pipelines=pipelines("cuda:0"), gpu_stage=True)
    except FFCVError as e:
        assert "cuda:0" in str(e)
    else:
        pytest.skip("a CUDA device is present: the no-CUDA error cannot happen here")
    torch = torch_or_skip()
    with pytest.warns(RuntimeWarning, match="GPU stage is not available"):
        loader = Loader(fixture("scalars"), batch_size=10, pipelines=pipelines("cuda:0"))
    assert loader.device == "cpu"
    assert loader._torch is torch  # ToDevice is torch's .to(device) on the consumer's thread


def test_gpu_stage_needs_every_output_on_one_cuda_device():
    with pytest.raises(ValueError, match="every output"):
        Loader(fixture("scalars"), batch_size=10, gpu_stage=True,
               pipelines={"index": [IntDecoder(), ToTensor(), ToDevice("cuda:0")],
                          "value": [FloatDecoder()]})
    with pytest.raises(TypeError, match="gpu_stage"):
        Loader(fixture("scalars"), batch_size=10, gpu_stage="yes")


def test_cuda_batches_are_device_tensors_exported_through_dlpack():
    torch = cuda_or_skip()
    n = torch.cuda.device_count() - 1  # the last device: the ordinal must be carried
    dev = f"cuda:{n}"
    exp = expected("scalars")["outputs"][1]["bits"]
    loader = Loader(fixture("scalars"), batch_size=10, num_workers=2, order=OrderOption.RANDOM,
                    seed=5, pipelines=pipelines(dev), gpu_stage=True)
    assert loader.device == dev
    order = loader.order_of(0)

    # The native views: device pointer, DLPack device, the stream handshake.
    it = iter(loader)
    views = it._native.next_batch(it._id)
    index_view = views[0]
    assert index_view.__dlpack_device__() == (2, n) and index_view.device == dev
    with pytest.raises(ValueError, match="ambiguous"):
        index_view.__dlpack__(stream=0)
    with pytest.raises(TypeError, match="torch.from_dlpack"):
        np.asarray(index_view)  # device memory: no host array interface
    side = torch.cuda.Stream(device=n)
    with torch.cuda.stream(side):
        # torch passes `side` as the consumer stream: it must wait for the loader's copy.
        t = torch.from_dlpack(index_view)
        total = t.sum()
    assert t.is_cuda and t.device.index == n and t.dtype == torch.int64
    assert t.data_ptr() == index_view.data_ptr  # the slot's device memory, no copy
    side.synchronize()
    assert total.item() == sum(order[:10])
    del t, total, views, index_view, it

    # Through the Loader: 5 batches held on the device while the epoch goes on.
    held = []
    for index, value in loader:
        assert index.is_cuda and index.device.index == n and value.dtype == torch.float64
        if len(held) < 5:
            held.append((index, value))
        else:
            (index[:, 0] * 2).sum().item()  # device work on the current stream
    torch.cuda.synchronize(n)
    for b, (index, value) in enumerate(held):
        ids = order[10 * b: 10 * b + 10]
        assert index[:, 0].cpu().tolist() == ids
        bits = value.cpu().numpy().view(np.uint64)[:, 0].tolist()
        assert bits == [exp[i] for i in ids]
    s = loader.stats()
    assert s["h2d_bytes"] > 0 and s["slot_allocations"] == s["slots"]
