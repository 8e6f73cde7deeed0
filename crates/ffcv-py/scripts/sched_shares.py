"""How a run's threads shared the CPUs over its timed epochs, from the scheduler's trace:
each thread's run time, its share of all CPUs' time, its number of slices and their
length, and the idle time (docs/benchmarking.md, "Small-raw: the touch against the
hand-over").

    perf sched record -k CLOCK_MONOTONIC -o sched.data \\
        python bench_compare.py --epochs 10 --one ffcv_rs small-raw FILE > one.json
    perf sched timehist -i sched.data > timehist.txt
    python sched_shares.py timehist.txt one.json [--cpus 2]

``one.json`` is the run's JSON line; its ``timed_monotonic`` window (CLOCK_MONOTONIC, the
clock ``-k`` gives the trace) selects the scheduler switches that count. A switch's
whole slice is counted at its end, so the window's edges are off by one slice at most.
"""

import argparse
import collections
import json
import os
import statistics


def read_timehist(path: str):
    """``(time, task, run_ms)`` per line of ``perf sched timehist``; header lines skipped."""
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6:
                continue
            try:
                rows.append((float(parts[0]), parts[2].split("[")[0], float(parts[-1])))
            except ValueError:
                continue  # the header
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("timehist")
    p.add_argument("one_json")
    p.add_argument("--cpus", type=int, default=os.cpu_count())
    args = p.parse_args()
    with open(args.one_json) as f:
        start, end = json.loads(f.read().strip().splitlines()[-1])["timed_monotonic"]
    window_ms = (end - start) * 1e3
    run = collections.defaultdict(list)
    for t, task, ms in read_timehist(args.timehist):
        if start <= t <= end:
            run[task].append(ms)
    total = window_ms * args.cpus
    print(f"timed window {window_ms:.1f} ms x {args.cpus} CPUs")
    for task, slices in sorted(run.items(), key=lambda kv: -sum(kv[1]))[:6]:
        ms = sum(slices)
        print(f"  {task:16s} {ms:8.1f} ms {100 * ms / total:5.1f} %  {len(slices):6d} slices, "
              f"median {1e3 * statistics.median(slices):7.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
