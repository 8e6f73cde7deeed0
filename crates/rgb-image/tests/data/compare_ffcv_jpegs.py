"""The JPEGs of our `ffcv write image-folder --write-mode jpg` output against FFCV 1.0.2's.

usage (reference env; the commands are in docs/images.md):
  python compare_ffcv_jpegs.py FOLDER OURS_JPG.beton
Writes FOLDER with FFCV 1.0.2's DatasetWriter (RGBImageField(write_mode='jpg',
max_resolution=256), IntField, one worker) from `Image.open(p).convert('RGB')` in sorted
class and file order (files PIL cannot open left out, as --skip-unreadable leaves them out),
then compares the stored JPEG bytes sample by sample."""
import os
import sys
import tempfile

import numpy as np
from PIL import Image
from ffcv.fields import IntField, RGBImageField
from ffcv.reader import Reader
from ffcv.writer import DatasetWriter

root, ours = sys.argv[1], sys.argv[2]
classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
items = []
for label, c in enumerate(classes):
    for name in sorted(os.listdir(os.path.join(root, c))):
        if not name.lower().endswith((".jpg", ".jpeg", ".png")):
            continue
        path = os.path.join(root, c, name)
        try:
            with Image.open(path) as im:
                im.convert("RGB")
        except Exception:
            continue
        items.append((f"{c}/{name}", path, label))


class Folder:
    def __len__(self):
        return len(items)

    def __getitem__(self, i):
        return Image.open(items[i][1]).convert("RGB"), items[i][2]


def stored_jpegs(path):
    r = Reader(path)
    data = np.memmap(path, np.uint8, mode="r")
    size = dict(zip(r.alloc_table["ptr"].tolist(), r.alloc_table["size"].tolist()))
    return [bytes(data[p:p + size[p]]) for p in r.metadata["f0"]["data_ptr"].tolist()]


with tempfile.TemporaryDirectory() as d:
    theirs = os.path.join(d, "ffcv_jpg.beton")
    DatasetWriter(theirs, {"image": RGBImageField(write_mode="jpg", max_resolution=256),
                           "label": IntField()}, num_workers=1).from_indexed_dataset(Folder())
    a, b = stored_jpegs(theirs), stored_jpegs(ours)
assert len(a) == len(b), (len(a), len(b))
same = 0
for (name, _, _), x, y in zip(items, a, b):
    same += x == y
    if x != y:
        print(f"differs: {name} ({len(x)} bytes from FFCV, {len(y)} ours)")
print(f"{same}/{len(a)} JPEGs byte-identical")
