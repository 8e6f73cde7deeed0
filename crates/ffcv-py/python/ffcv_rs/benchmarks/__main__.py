"""``python -m ffcv_rs.benchmarks FILE``: a bounded loader benchmark, like FFCV's.

Runs ``--warmup`` untimed epochs (default 0), then ``--epochs`` timed epochs (default 2) of at most ``--max-batches`` batches (default 200)
over FILE with the given knobs, touching every output of every batch from Python, and
prints samples/s per epoch and the loader's counters. Never unbounded by default.
"""

import argparse
import json
import sys
import time
from typing import Dict, List, Optional

import numpy as np

from ..fields.decoders import CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder
from ..loader import Loader, OrderOption


def _decoders(specs: List[str]) -> Dict[str, Optional[list]]:
    pipelines: Dict[str, Optional[list]] = {}
    for spec in specs:
        field, _, kind = spec.partition("=")
        if kind == "none":
            pipelines[field] = None
        elif kind.startswith("center-crop:") or kind.startswith("random-resized-crop:"):
            name, _, size = kind.partition(":")
            h, w = (int(x) for x in size.lower().split("x"))
            cls = CenterCropRGBImageDecoder if name == "center-crop" else RandomResizedCropRGBImageDecoder
            pipelines[field] = [cls((h, w))]
        else:
            raise SystemExit(f"--decoder {spec!r}: expected FIELD=none, FIELD=center-crop:HxW or FIELD=random-resized-crop:HxW")
    return pipelines


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ffcv_rs.benchmarks", description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--num-workers", type=int, default=-1)
    p.add_argument("--order", choices=[o.name.lower() for o in OrderOption], default="random")
    p.add_argument("--os-cache", type=int, choices=[0, 1], default=1)
    p.add_argument("--epochs", type=int, default=2, help="timed epochs")
    p.add_argument("--warmup", type=int, default=0, help="untimed epochs first")
    p.add_argument("--no-drop-last", action="store_true")
    p.add_argument("--max-batches", type=int, default=200, help="per epoch (0: whole epochs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--decoder", action="append", default=[], metavar="FIELD=SPEC")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.epochs < 1:
        p.error("--epochs must be at least 1")

    loader = Loader(
        args.file, batch_size=args.batch_size, num_workers=args.num_workers,
        order=OrderOption[args.order.upper()], os_cache=bool(args.os_cache), seed=args.seed,
        pipelines=_decoders(args.decoder), drop_last=not args.no_drop_last,
    )
    epochs = []
    for epoch in range(args.warmup + args.epochs):
        t0 = time.perf_counter()
        samples = 0
        checksum = 0
        it = iter(loader)
        for b, batch in enumerate(it):
            for out in batch:
                a = np.asarray(out) if not hasattr(out, "numpy") else out.numpy()
                flat = a.reshape(-1)
                if flat.size:
                    # Touch the first and last element of every output.
                    checksum += int(flat[0] != 0) + int(flat[-1] != 0)
            samples += len(batch[0]) if batch else 0
            if args.max_batches and b + 1 >= args.max_batches:
                break
        it.close()
        secs = time.perf_counter() - t0
        if epoch < args.warmup:
            continue
        epochs.append({"epoch": epoch, "samples": samples, "seconds": secs,
                       "samples_per_s": samples / secs if secs > 0 else 0.0})
        if not args.json:
            print(f"epoch {epoch}: {samples} samples in {secs:.3f} s = {samples / secs:,.0f} samples/s")
    median = sorted(e["samples_per_s"] for e in epochs)[len(epochs) // 2]
    result = {"file": args.file, "median_samples_per_s": median, "batch_size": args.batch_size, "num_workers": loader.num_workers,
              "order": args.order, "os_cache": bool(args.os_cache), "epochs": epochs,
              "stats": loader.stats()}
    if args.json:
        print(json.dumps(result))
    else:
        s = result["stats"]
        print(f"median: {median:,.0f} samples/s")
        print(f"stats: wait_pages {s['wait_pages']:.3f} s, decode {s['decode']:.3f} s, "
              f"wait_slot {s['wait_slot']:.3f} s, consumer_wait {s['consumer_wait']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
