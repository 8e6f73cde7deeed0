"""A decoder driven through FFCV's protocol by the user's own code, as FFCV's tests drive
one (``accept_globals``, ``Compiler.compile(decoder.generate_code())``, then
``decode(indices, buffer, metadata, context.state)`` per batch): ffcv_rs's native batch
function against FFCV 1.0.2's numba-compiled decoder, on the same file, in one process,
in alternating rounds.

    PYTHONPATH=crates/ffcv-py/python ~/.cache/ffcv-anchors/venv/bin/python \\
        crates/ffcv-py/scripts/bench_decoder_protocol.py [--rounds 5] [--threads 1]

The file is written once (by ffcv_rs's ``DatasetWriter``, a file FFCV reads) into
``--data`` from the test photographs of ``crates/rgb-image/tests/data/photos``: 512
samples, each a random crop of one photograph (64 to 100 % of its sides) stored as a JPEG
(quality 90) of at most 256 px. Each decoder decodes the whole file per round in
batches of ``--batch-size`` with ``RandomResizedCropRGBImageDecoder((160, 160))`` and
``CenterCropRGBImageDecoder((160, 160))``; numba's compilation happens in a warm-up pass.
Printed: each round's images per second and the median ratio, ffcv_rs over FFCV.
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
PHOTOS = ROOT / "crates" / "rgb-image" / "tests" / "data" / "photos"
SAMPLES = 512


def write(path: Path) -> None:
    from PIL import Image
    from ffcv_rs.fields import RGBImageField
    from ffcv_rs.writer import DatasetWriter

    photos = [np.asarray(Image.open(PHOTOS / f"{n}.jpg").convert("RGB"))
              for n in ("astronaut", "chelsea", "coffee", "rocket")]
    rng = np.random.default_rng(0)

    def item(i):
        p = photos[i % len(photos)]
        h, w = p.shape[:2]
        ch, cw = int(h * rng.uniform(0.64, 1.0)), int(w * rng.uniform(0.64, 1.0))
        top, left = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        return (np.ascontiguousarray(p[top:top + ch, left:left + cw]),)

    writer = DatasetWriter(str(path), {"image": RGBImageField(write_mode="jpg",
                                                              max_resolution=256)},
                           num_workers=1)
    writer.from_indexed_dataset([item(i) for i in range(SAMPLES)], progress=False)


def driver(package: str, path: str, make: str, batch: int, threads: int):
    """A function that decodes the whole file once with ``package``'s decoder."""
    import importlib

    import torch

    fields = importlib.import_module(f"{package}.fields.rgb_image")
    Reader = importlib.import_module(f"{package}.reader").Reader
    Compiler = importlib.import_module(f"{package}.pipeline.compiler").Compiler
    OSCacheManager = importlib.import_module(f"{package}.memory_managers").OSCacheManager
    State = importlib.import_module(f"{package}.pipeline.state").State

    reader = Reader(path)
    manager = OSCacheManager(reader)
    context = manager.schedule_epoch(np.arange(reader.num_samples).reshape(1, -1))
    cls = getattr(fields, make)
    # FFCV's CenterCropRGBImageDecoder has no default ratio.
    decoder = cls((160, 160), 224 / 256) if make.startswith("Center") else cls((160, 160))
    column = reader.metadata["f0"]
    Compiler.set_num_threads(threads)
    with context:
        decoder.accept_globals(column, manager.compile_reader())
        _, (query, scratch) = decoder.declare_state_and_memory(
            State(jit_mode=True, device=torch.device("cpu"), shape=None, dtype=np.uint8))
    code = Compiler.compile(decoder.generate_code())
    out = np.zeros((batch, *query.shape), query.dtype)
    tmp = np.zeros((batch, *scratch.shape), scratch.dtype)
    ids = np.arange(reader.num_samples, dtype=np.uint64)

    def epoch():
        with context:
            for start in range(0, len(ids), batch):
                chunk = ids[start:start + batch]
                code(chunk, (out, tmp), column, context.state)
    return epoch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.path.expanduser("~/.cache/ffcv-anchors/data"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    path = Path(args.data) / "protocol-photos.beton"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
    for make in ("RandomResizedCropRGBImageDecoder", "CenterCropRGBImageDecoder"):
        runs = {p: driver(p, str(path), make, args.batch_size, args.threads)
                for p in ("ffcv", "ffcv_rs")}
        for run in runs.values():
            run()  # numba compiles here
        rates = {p: [] for p in runs}
        for _ in range(args.rounds):
            for p, run in runs.items():
                start = time.perf_counter()
                run()
                rates[p].append(SAMPLES / (time.perf_counter() - start))
        ratios = [a / b for a, b in zip(rates["ffcv_rs"], rates["ffcv"])]
        print(f"{make} 160x160, batch {args.batch_size}, {args.threads} thread(s), "
              f"load {os.getloadavg()[0]:.1f}")
        for p in runs:
            print(f"  {p:8s} images/s: " + " ".join(f"{r:7.0f}" for r in rates[p]))
        print(f"  ffcv_rs / ffcv: median {statistics.median(ratios):.2f} "
              f"(rounds {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
