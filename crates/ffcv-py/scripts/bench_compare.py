"""The Python throughput comparison of docs/benchmarking.md ("From Python against FFCV
1.0.2"): on one file and one set of knobs, ``ffcv bench`` (the Rust loop), ffcv_rs's
Python loop and FFCV 1.0.2's Python loop, interleaved round by round so that a change in
the machine's load hits all three alike.

    python bench_compare.py --cli target/release/ffcv --data DIR [--rounds 3] [--only jpeg]

``python`` must import numpy, torch, ffcv (1.0.2) and ffcv_rs (the reference FFCV venv
with the release wheel of ffcv_rs on PYTHONPATH). The files are those of
the reference FFCV benchmark (small-raw, bytes-128k, jpeg; given with --data). The knobs are that script's:
2 workers, RANDOM order, seed 0, OS page cache, drop_last=False, batches_ahead 3, FFCV's
default pipelines (decoder + ToTensor) except for the JPEG images
(RandomResizedCrop 64x64 + ToTensor). Each run is a fresh process: 1 warm-up epoch, then
``--epochs`` timed epochs; its figure is the median epoch's samples/s. The Python loops
are one and the same function with ``ffcv`` or ``ffcv_rs`` imported, and touch each batch
(one element of every output), as ``ffcv bench`` does.

``--one IMPL NAME FILE`` is the child mode (one Python run, one JSON line).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

BATCH = {"small-raw": 512, "bytes-128k": 64, "jpeg": 128}


def python_run(impl: str, name: str, path: str, epochs: int) -> dict:
    """One Python run with ``impl`` (``ffcv`` or ``ffcv_rs``) imported."""
    if impl == "ffcv":
        from ffcv.fields.decoders import RandomResizedCropRGBImageDecoder
        from ffcv.loader import Loader, OrderOption
        from ffcv.transforms import ToTensor
    else:
        from ffcv_rs.fields.decoders import RandomResizedCropRGBImageDecoder
        from ffcv_rs.loader import Loader, OrderOption
        from ffcv_rs.transforms import ToTensor
    pipelines = {}
    if name == "jpeg":
        pipelines = {"image": [RandomResizedCropRGBImageDecoder((64, 64)), ToTensor()]}
    loader = Loader(path, batch_size=BATCH[name], num_workers=2, os_cache=True,
                    order=OrderOption.RANDOM, seed=0, drop_last=False, batches_ahead=3,
                    pipelines=pipelines)
    rates = []
    sink = 0
    for epoch in range(1 + epochs):
        n = 0
        t = time.perf_counter()
        for batch in loader:
            n += batch[0].shape[0]
            for out in batch:
                sink += int(out.reshape(-1)[0] != 0)  # touch every output
        dt = time.perf_counter() - t
        if epoch:
            rates.append(n / dt)
    return {"impl": impl, "name": name, "samples_per_sec": statistics.median(rates),
            "epochs": rates, "sink": sink}


def cli_run(cli: str, name: str, path: str, epochs: int) -> dict:
    cmd = [cli, "bench", path, "--batch-size", str(BATCH[name]), "--num-workers", "2",
           "--order", "random", "--seed", "0", "--no-drop-last", "--batches-ahead", "3",
           "--warmup", "1", "--epochs", str(epochs), "--json"]
    if name == "jpeg":
        cmd += ["--decoder", "image=random-resized-crop:64x64"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    d = json.loads(out.stdout)
    return {"impl": "ffcv bench", "name": name, "samples_per_sec": d["samples_per_sec"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cli", help="the ffcv binary (release build)")
    p.add_argument("--data", help="directory of small-raw/bytes-128k/jpeg .beton files")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--only", default="small-raw,bytes-128k,jpeg")
    p.add_argument("--one", nargs=3, metavar=("IMPL", "NAME", "FILE"))
    args = p.parse_args()
    if args.one:
        impl, name, path = args.one
        print(json.dumps(python_run(impl, name, path, args.epochs)))
        return 0
    names = args.only.split(",")
    results = {}
    for r in range(args.rounds):
        for name in names:
            path = os.path.join(args.data, f"{name}.beton")
            for impl in ("ffcv bench", "ffcv_rs", "ffcv"):
                if impl == "ffcv bench":
                    res = cli_run(args.cli, name, path, args.epochs)
                else:
                    out = subprocess.run(
                        [sys.executable, __file__, "--epochs", str(args.epochs), "--one", impl,
                         name, path], capture_output=True, text=True, timeout=900, check=True)
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                load = os.getloadavg()[0]
                print(f"round {r} {name:10s} {impl:10s} {res['samples_per_sec']:>10,.0f} "
                      f"samples/s  (load {load:.1f})", flush=True)
                results.setdefault((name, impl), []).append(res["samples_per_sec"])
    print("\nmedian over rounds (samples/s):")
    print(f"{'file':10s} {'ffcv bench':>12s} {'ffcv_rs py':>12s} {'FFCV 1.0.2':>12s} "
          f"{'py/bench':>9s} {'py/FFCV':>8s}")
    for name in names:
        b, rs, f = (statistics.median(results[(name, i)])
                    for i in ("ffcv bench", "ffcv_rs", "ffcv"))
        print(f"{name:10s} {b:>12,.0f} {rs:>12,.0f} {f:>12,.0f} {rs / b:>9.2f} {rs / f:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
