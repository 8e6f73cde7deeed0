"""The Python throughput comparison of docs/benchmarking.md ("From Python against FFCV
1.0.2"): on one file and one set of knobs, ``ffcv bench`` (the Rust loop), ffcv_rs's
Python loop and FFCV 1.0.2's Python loop, interleaved round by round so that a change in
the machine's load hits all three alike.

    python bench_compare.py --cli target/release/ffcv --data DIR [--rounds 3] [--only jpeg]

``python`` must import numpy, torch, ffcv (1.0.2) and ffcv_rs (the reference FFCV venv
with the release wheel of ffcv_rs on PYTHONPATH). The files are those of the reference
FFCV benchmark (small-raw, bytes-128k, jpeg; given with --data), written by its
``bench_ffcv.py`` into ``$ANCHORS/data``. The knobs are that script's: 2 workers (``--workers``
changes it for every loader), RANDOM
order, seed 0, OS page cache, drop_last=False, batches_ahead 3, FFCV's default pipelines
(decoder + ToTensor) except for the JPEG images (RandomResizedCrop 64x64 + ToTensor).
Each run is a fresh process: 1 warm-up epoch, then ``--epochs`` timed epochs; its figure
is the median epoch's samples/s. The Python loops are one and the same function with
``ffcv`` or ``ffcv_rs`` imported, and touch each batch (one element of every output), as
``ffcv bench`` does. They also report the consumer thread's CPU time per batch
(``time.thread_time_ns`` over the timed epoch's loop, divided by its batches; median
epoch): what the loop, the hand-over and the waits cost the thread that trains, which on
a machine whose cores the workers fill is taken from the workers. ``timed_monotonic``
gives the timed epochs' start and end on ``CLOCK_MONOTONIC``, the clock of
``perf record -k CLOCK_MONOTONIC`` and ``perf sched record -k CLOCK_MONOTONIC``, to cut a
profile to them.

The end of the output is a markdown table (per file and touch: each implementation's
rounds, the ratio of ffcv_rs's Python loop to ``ffcv bench`` per round and of the
medians, ffcv_rs to FFCV 1.0.2, and both Python loops' consumer microseconds per batch),
with the load average before and after.

``--touches element,none`` also runs each Python loop without its per-output touch
(``none``: the loop only counts the samples), interleaved in the same rounds; the table
then has a row per file and touch. The difference between the two rows is what the
touch (four torch operations per output) costs, against what the hand-over costs.

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


TOUCHES = ("element", "none")


def python_run(impl: str, name: str, path: str, epochs: int, workers: int = 2,
               touch: str = "element") -> dict:
    """One Python run with ``impl`` (``ffcv`` or ``ffcv_rs``) imported; ``touch`` is
    ``element`` (read one element of every output) or ``none``."""
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
    loader = Loader(path, batch_size=BATCH[name], num_workers=workers, os_cache=True,
                    order=OrderOption.RANDOM, seed=0, drop_last=False, batches_ahead=3,
                    pipelines=pipelines)
    rates = []
    consumer = []
    sink = 0
    touch_each = touch == "element"
    timed_from = None
    for epoch in range(1 + epochs):
        if epoch == 1:
            timed_from = time.monotonic()
        n = batches = 0
        t = time.perf_counter()
        cpu = time.thread_time_ns()
        for batch in loader:
            n += batch[0].shape[0]
            batches += 1
            if touch_each:
                for out in batch:
                    sink += int(out.reshape(-1)[0] != 0)  # touch every output
        cpu = time.thread_time_ns() - cpu
        dt = time.perf_counter() - t
        if epoch:
            rates.append(n / dt)
            consumer.append(cpu / 1e3 / batches)
    return {"impl": impl, "name": name, "touch": touch,
            "samples_per_sec": statistics.median(rates),
            "epochs": rates, "consumer_us_per_batch": statistics.median(consumer),
            "sink": sink, "timed_monotonic": [timed_from, time.monotonic()]}


def cli_run(cli: str, name: str, path: str, epochs: int, workers: int = 2) -> dict:
    cmd = [cli, "bench", path, "--batch-size", str(BATCH[name]), "--num-workers", str(workers),
           "--order", "random", "--seed", "0", "--no-drop-last", "--batches-ahead", "3",
           "--warmup", "1", "--epochs", str(epochs), "--json"]
    if name == "jpeg":
        cmd += ["--decoder", "image=random-resized-crop:64x64"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    d = json.loads(out.stdout)
    return {"impl": "ffcv bench", "name": name, "samples_per_sec": d["samples_per_sec"]}


def rate_text(x: float) -> str:
    """Samples/s as the docs write them: 1,986 k, 80.8 k, 3,170."""
    if x >= 1e5:
        return f"{x / 1e3:,.0f} k"
    if x >= 1e4:
        return f"{x / 1e3:.1f} k"
    return f"{x:,.0f}"


def rounds_text(xs: list) -> str:
    return ", ".join(rate_text(x) for x in xs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cli", help="the ffcv binary (release build)")
    p.add_argument("--data", help="directory of small-raw/bytes-128k/jpeg .beton files")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--only", default="small-raw,bytes-128k,jpeg")
    p.add_argument("--workers", type=int, default=2,
                   help="decoding threads of every loader (the comparison's knob is 2)")
    p.add_argument("--touches", default="element",
                   help="comma-separated touches of the Python loops: element, none "
                        "(--one takes the first)")
    p.add_argument("--one", nargs=3, metavar=("IMPL", "NAME", "FILE"))
    args = p.parse_args()
    touches = args.touches.split(",")
    if any(t not in TOUCHES for t in touches):
        p.error(f"--touches: each one of {', '.join(TOUCHES)}")
    if args.one:
        impl, name, path = args.one
        print(json.dumps(python_run(impl, name, path, args.epochs, args.workers, touches[0])))
        return 0
    names = args.only.split(",")
    impls = ["ffcv bench"] + [(i, t) for t in touches for i in ("ffcv_rs", "ffcv")]
    results = {}
    consumer = {}
    load_before = os.getloadavg()
    for r in range(args.rounds):
        for name in names:
            path = os.path.join(args.data, f"{name}.beton")
            for impl in impls:
                if impl == "ffcv bench":
                    res = cli_run(args.cli, name, path, args.epochs, args.workers)
                else:
                    out = subprocess.run(
                        [sys.executable, __file__, "--epochs", str(args.epochs), "--workers",
                         str(args.workers), "--touches", impl[1], "--one", impl[0], name, path],
                        capture_output=True, text=True, timeout=900, check=True)
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    consumer.setdefault((name, impl), []).append(res["consumer_us_per_batch"])
                load = os.getloadavg()[0]
                us = res.get("consumer_us_per_batch")
                us = f"  consumer {us:7.1f} us/batch" if us is not None else ""
                label = impl if isinstance(impl, str) else f"{impl[0]} ({impl[1]})"
                print(f"round {r} {name:10s} {label:18s} {res['samples_per_sec']:>10,.0f} "
                      f"samples/s{us}  (load {load:.1f})", flush=True)
                results.setdefault((name, impl), []).append(res["samples_per_sec"])
    load_after = os.getloadavg()
    print(f"\n{args.rounds} rounds, {args.epochs} timed epochs each, {args.workers} workers; "
          f"load average (1, 5, 15 min) "
          f"{', '.join(f'{x:.1f}' for x in load_before)} at the start, "
          f"{', '.join(f'{x:.1f}' for x in load_after)} at the end\n")
    print("| file | touch | `ffcv bench` (rounds) | `ffcv_rs` Python loop (rounds) | FFCV 1.0.2 "
          "Python loop (rounds) | `ffcv_rs` / `ffcv bench`, per round | median ratio | `ffcv_rs` / "
          "FFCV 1.0.2 (medians) | consumer µs/batch, `ffcv_rs` | consumer µs/batch, FFCV 1.0.2 |")
    print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|")
    med = statistics.median
    for name in names:
        b = results[(name, "ffcv bench")]
        for t in touches:
            rs, f = results[(name, ("ffcv_rs", t))], results[(name, ("ffcv", t))]
            per_round = ", ".join(f"{x / y:.2f}" for x, y in zip(rs, b))
            print(f"| {name} | {t} | {rounds_text(b)} | {rounds_text(rs)} | {rounds_text(f)} | "
                  f"{per_round} | {med(rs) / med(b):.2f} | {med(rs) / med(f):.2f} | "
                  f"{med(consumer[(name, ('ffcv_rs', t))]):.1f} | "
                  f"{med(consumer[(name, ('ffcv', t))]):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
