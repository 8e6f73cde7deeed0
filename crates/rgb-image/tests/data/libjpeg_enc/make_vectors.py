"""Writes the reference vectors of crates/rgb-image/tests/it/image_encode_libjpeg.rs.

Run with the reference FFCV 1.0.2 environment (opencv-python-headless 4.10.0,
its bundled libjpeg-turbo 3.0.3):

    ~/.cache/ffcv-anchors/venv/bin/python make_vectors.py

from this folder. Sources are generated from splitmix64 streams (the same
functions are in the Rust and Python tests), so only the outputs are stored.
"""

import hashlib
import json
import os
import tempfile

import cv2
import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def sm64(seed, n):
    """The first n splitmix64 outputs for state `seed`, as uint64."""
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(seed) + i * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def gen_bytes(seed, n):
    return sm64(seed, (n + 7) // 8).astype("<u8").view(np.uint8)[:n]


def source(kind, w, h, seed):
    """An h x w x 3 uint8 image of one of four kinds."""
    if kind == "noise":
        return gen_bytes(seed, w * h * 3).reshape(h, w, 3)
    if kind == "gray":
        return np.repeat(gen_bytes(seed, w * h).reshape(h, w, 1), 3, axis=2)
    if kind == "binary":
        return ((gen_bytes(seed, w * h * 3) & 1) * 255).astype(np.uint8).reshape(h, w, 3)
    assert kind == "scene"
    # Gradients, a solid rectangle, mild noise: photo-like smooth content.
    y, x = np.mgrid[0:h, 0:w].astype(np.int64)
    img = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 7 % 256], axis=2)
    img[h // 3:(2 * h) // 3, w // 4:(3 * w) // 4] = (200, 40, 90)
    noise = gen_bytes(seed, w * h * 3).reshape(h, w, 3).astype(np.int64) % 7 - 3
    return np.clip(img + noise, 0, 255).astype(np.uint8)


def imencode(rgb, quality):
    """What FFCV 1.0.2's RGBImageField stores (its `encode_jpeg`)."""
    ok, out = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR),
                           [int(cv2.IMWRITE_JPEG_QUALITY), quality])
    assert ok
    return out.tobytes()


KINDS = ["noise", "scene", "gray", "binary"]
SIZES = [(1, 1), (2, 1), (1, 2), (3, 5), (8, 8), (9, 7), (16, 16), (17, 15), (15, 17),
         (33, 31), (40, 120), (121, 47)]
QUALITIES = [1, 10, 50, 75, 90, 95, 100]
# Cases also stored as whole files, to diff byte by byte when a test fails.
FILES = [("scene", 40, 120, 90), ("scene", 121, 47, 75), ("noise", 17, 15, 100),
         ("gray", 9, 7, 50), ("binary", 33, 31, 95), ("noise", 1, 1, 90)]


def seed_of(kind, w, h):
    return KINDS.index(kind) * 1_000_003 + w * 1000 + h


def dataset_items(n=24):
    """The images of the FFCV-written datasets: scenes 40..120 px a side."""
    dims = sm64(4242, 2 * n) % np.uint64(81) + np.uint64(40)
    return [(source("scene", int(dims[2 * i]), int(dims[2 * i + 1]), 7000 + i), i % 5)
            for i in range(n)]


def ffcv_dataset(path, field_args):
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    items = dataset_items()

    class Items:
        def __len__(self):
            return len(items)

        def __getitem__(self, i):
            return items[i]

    DatasetWriter(path, {"image": RGBImageField(**field_args), "label": IntField()},
                  page_size=1 << 21, num_workers=1).from_indexed_dataset(Items(), chunksize=100)
    data = open(path, "rb").read()
    return {"field": field_args, "file_size": len(data),
            "file_sha256": hashlib.sha256(data).hexdigest()}


def main():
    cases = []
    for kind in KINDS:
        for w, h in SIZES:
            img = source(kind, w, h, seed_of(kind, w, h))
            for q in QUALITIES:
                jpg = imencode(img, q)
                cases.append({"kind": kind, "width": w, "height": h, "quality": q,
                              "len": len(jpg), "sha256": hashlib.sha256(jpg).hexdigest()})
    for kind, w, h, q in FILES:
        jpg = imencode(source(kind, w, h, seed_of(kind, w, h)), q)
        open(f"{kind}_{w}x{h}_q{q}.jpg", "wb").write(jpg)
    # A real photograph: a 40x30 crop of chelsea.jpg as cv2 decodes it.
    photo = cv2.imread("../photos/chelsea.jpg")[100:130, 200:240, ::-1].copy()
    open("chelsea_40x30.rgb", "wb").write(photo.tobytes())
    for q in (75, 90, 100):
        open(f"chelsea_40x30_q{q}.jpg", "wb").write(imencode(photo, q))
    datasets = {}
    with tempfile.TemporaryDirectory() as d:
        datasets["jpg_q90"] = ffcv_dataset(os.path.join(d, "a.beton"),
                                           {"write_mode": "jpg", "jpeg_quality": 90})
        datasets["jpg_q75_max64"] = ffcv_dataset(
            os.path.join(d, "b.beton"),
            {"write_mode": "jpg", "jpeg_quality": 75, "max_resolution": 64})
    manifest = {"schema": "libjpeg-enc-vectors/1", "opencv": cv2.__version__,
                "seed_rule": "kind_index * 1000003 + width * 1000 + height",
                "cases": cases, "datasets": datasets}
    # One case per line keeps the file small and its diffs readable.
    body = json.dumps({k: v for k, v in manifest.items() if k != "cases"}, indent=1)
    lines = ",\n".join(json.dumps(c, separators=(",", ":")) for c in cases)
    with open("manifest.json", "w") as f:
        f.write(body[:-2] + ',\n "cases": [\n' + lines + "\n]\n}\n")


if __name__ == "__main__":
    main()
