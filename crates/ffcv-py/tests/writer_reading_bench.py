"""How DatasetWriter should read a dataset: on one thread (what ffcv_rs does) or in worker
processes (what FFCV does). Not a test; run by hand:

    python crates/ffcv-py/tests/writer_reading_bench.py [WORKERS]

Writes 4,096 samples of (index, float32[2048]) drawn from NumPy's global generator,
3,000 photo-like 256x256 RGB images as JPEG and 600,000 (int, float) samples (FFCV's
test_super_long), five times each (the ways taking turns), and prints the best time of:
- "one thread": ffcv_rs's DatasetWriter (the dataset read on the calling thread, the
  encoding on WORKERS native threads);
- "processes": a fork Pool of WORKERS processes reading chunks of 100 samples and returning
  their plain values to the same native writer (FFCV's way of reading, same encoder);
- "reading alone": dataset[i] and the plain conversion, no writing (the most one reading
  thread can feed);
- "FFCV 1.0.2": FFCV's own DatasetWriter (processes reading and encoding), where ffcv is
  importable, e.g. in the reference environment with PYTHONPATH=crates/ffcv-py/python.
"""

import collections
import multiprocessing as mp
import os
import sys
import tempfile
import time

import numpy as np


class Arrays:
    """FFCV's test_array_field.py dataset: seeds the global generator, then draws."""

    def __init__(self, n=4096, size=2048):
        self.n, self.size = n, size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        np.random.seed(i)
        return i, np.random.randn(self.size).astype("<f4")


class Scalars:
    """FFCV's tests/test_writer.py dataset: (index, sin(index))."""

    def __len__(self):
        return 600_000

    def __getitem__(self, i):
        return i, np.sin(i)


class Images:
    """(256x256 RGB image, label): 16 smooth noisy base images, each sample shifted."""

    def __init__(self, n=3000, side=256):
        rng = np.random.default_rng(0)
        self.base = []
        for _ in range(16):
            small = rng.integers(0, 256, (side // 16, side // 16, 3)).astype(np.float32)
            big = np.kron(small, np.ones((16, 16, 1), np.float32))
            self.base.append(np.clip(big + rng.normal(0, 12, big.shape), 0, 255).astype(np.uint8))
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.ascontiguousarray(np.roll(self.base[i % 16], i, axis=1)), i % 1000


ROUNDS = 5

_DS = _FIELDS = None


def _read_chunk(chunk):
    return [[f._plain(v) for f, v in zip(_FIELDS, _DS[j])] for j in chunk]


def processes(ds, fields, path, workers, chunksize=100):
    from ffcv_rs import _native
    global _DS, _FIELDS
    _DS, _FIELDS = ds, list(fields.values())
    chunks = [range(s, min(s + chunksize, len(ds))) for s in range(0, len(ds), chunksize)]
    with mp.get_context("fork").Pool(workers) as pool:
        results = pool.imap(_read_chunk, chunks)
        ready = collections.deque()

        def get(i):
            if not ready:
                ready.extend(next(results))
            return ready.popleft()

        specs = [(n, f._kind, f._writer_params()) for n, f in fields.items()]
        _native.write_dataset(path, specs, get, len(ds), 8 << 20, workers, chunksize, None)


def one_thread(ds, fields, path, workers):
    from ffcv_rs.writer import DatasetWriter
    DatasetWriter(path, fields, num_workers=workers).from_indexed_dataset(ds, progress=False)


def reading_alone(ds, fields, path, workers):
    plain = list(fields.values())
    for i in range(len(ds)):
        [f._plain(v) for f, v in zip(plain, ds[i])]


def timed(fn, *args):
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def main():
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    from ffcv_rs.fields import FloatField, IntField, NDArrayField, RGBImageField
    cases = [("arrays", Arrays(), lambda m: {"index": m.IntField(),
                                            "values": m.NDArrayField(np.dtype("<f4"), (2048,))}),
             ("jpeg", Images(), lambda m: {"image": m.RGBImageField(write_mode="jpg"),
                                          "label": m.IntField()}),
             ("scalars", Scalars(), lambda m: {"index": m.IntField(), "value": m.FloatField()})]
    ours = type("ours", (), {"IntField": IntField, "FloatField": FloatField,
                             "NDArrayField": NDArrayField, "RGBImageField": RGBImageField})
    try:
        import ffcv.fields as theirs
        from ffcv.writer import DatasetWriter as FFCVWriter
    except ImportError:
        theirs = None
    print(f"workers={workers}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.beton")
        for name, ds, fields in cases:
            ways = {"one thread": lambda: one_thread(ds, fields(ours), path, workers),
                    "processes": lambda: processes(ds, fields(ours), path, workers),
                    "reading alone": lambda: reading_alone(ds, fields(ours), path, workers)}
            if theirs is not None:
                ways["FFCV 1.0.2"] = lambda: FFCVWriter(
                    path, fields(theirs), num_workers=workers).from_indexed_dataset(ds)
            # Rounds alternate the ways, so that a busy spell of the machine hits them all.
            runs = {how: [] for how in ways}
            for _ in range(ROUNDS):
                for how, fn in ways.items():
                    runs[how].append(timed(fn))
            for how, times in runs.items():
                best = min(times)
                print(f"{name:7s} {how:14s} best {best:6.2f} s  {len(ds) / best:8.0f} samples/s"
                      f"  (runs {' '.join(f'{t:.2f}' for t in times)})", flush=True)


if __name__ == "__main__":
    main()
