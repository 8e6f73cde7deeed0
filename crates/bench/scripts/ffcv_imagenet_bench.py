"""FFCV 1.0.2's ImageNet training pipeline on the CPU over a .beton, for docs/benchmarking.md
("Photographs to 224: FFCV's ImageNet pipeline"): median epoch samples/s as one JSON line.
Run with the reference FFCV 1.0.2 environment, installed outside the project (torch, numpy 1.26):
Usage: python ffcv_imagenet_bench.py FILE [--epochs 3] [--workers 2] [--batch 128] [--decoder-only]
       [--dtype float32|float16]   (NormalizeImage's output type)"""
import sys, time, argparse, json
import numpy as np
from ffcv.loader import Loader, OrderOption
from ffcv.fields.decoders import RandomResizedCropRGBImageDecoder, IntDecoder
from ffcv.transforms import RandomHorizontalFlip, NormalizeImage, ToTensor, ToTorchImage, Squeeze

p = argparse.ArgumentParser()
p.add_argument("file"); p.add_argument("--epochs", type=int, default=3)
p.add_argument("--workers", type=int, default=2); p.add_argument("--batch", type=int, default=128)
p.add_argument("--decoder-only", action="store_true")
p.add_argument("--dtype", choices=["float32", "float16"], default="float32")
a = p.parse_args()
MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255
image = [RandomResizedCropRGBImageDecoder((224, 224))]
if not a.decoder_only:
    image += [RandomHorizontalFlip(), NormalizeImage(MEAN, STD, getattr(np, a.dtype)), ToTensor(), ToTorchImage()]
loader = Loader(a.file, batch_size=a.batch, num_workers=a.workers, order=OrderOption.RANDOM,
                os_cache=True, drop_last=False, seed=0,
                pipelines={"image": image, "label": [IntDecoder(), ToTensor(), Squeeze()]})
rates = []
for e in range(a.epochs + 1):
    t = time.perf_counter(); n = 0
    for img, lab in loader:
        n += img.shape[0]
    dt = time.perf_counter() - t
    if e > 0:
        rates.append(n / dt)
print(json.dumps({"file": a.file, "decoder_only": a.decoder_only, "dtype": a.dtype, "workers": a.workers,
                  "batch": a.batch, "samples_per_s": sorted(rates)[len(rates) // 2], "rounds": rates}))
