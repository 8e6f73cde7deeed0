"""Writing a `.beton` shard set from Ray tasks: task I runs `ffcv write ... --shards N
--shard-index I`, so N tasks (on one machine or many) write the N shards of one set
between them, the same set one `ffcv write ... --shards N` writes.

    python ray_write_shards.py OUT_DIR [--shards N] [--ffcv PATH] -- WRITE_ARGS...

WRITE_ARGS are those of `ffcv write` before OUT (e.g. `webdataset 's3://bucket/wds/*.tar'
--field image=jpg:image --field label=cls:int`); OUT is OUT_DIR/train.beton, which may
also be an `s3://` prefix. Each task needs the `ffcv` binary and the inputs where it runs.
"""

import argparse
import os
import subprocess
import sys

import ray


@ray.remote(num_cpus=1)
def write_shard(ffcv, write_args, out, index, count):
    """Shard `index` of `count`: its file name in the set, and the command's output."""
    command = [ffcv, "write", *write_args, out, "--shards", str(count),
               "--shard-index", str(index), "--workers", "1"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"shard {index}: {' '.join(command)}: {done.stderr.strip()}")
    return done.stdout.strip()


def write_set(ffcv, write_args, out, count):
    """Runs the `count` tasks and waits for all; their outputs in shard order."""
    return ray.get([write_shard.remote(ffcv, write_args, out, i, count) for i in range(count)])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--ffcv", default=os.environ.get("FFCV_BIN", "ffcv"))
    args = parser.parse_args(argv[:split])
    ray.init(num_cpus=min(args.shards, os.cpu_count() or 1), include_dashboard=False)
    try:
        out = args.out_dir.rstrip("/") + "/train.beton"
        for line in write_set(args.ffcv, argv[split + 1:], out, args.shards):
            print(line)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
