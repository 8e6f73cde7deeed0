"""Our `ffcv write image-folder` output against FFCV 1.0.2's writer fed with PIL images.

usage (reference env; the commands are in docs/images.md):
  python compare_ffcv_writer.py FOLDER OURS_RAW.beton [OTHER.beton ...]
1. writes FOLDER with FFCV 1.0.2's DatasetWriter (RGBImageField(write_mode='raw',
   max_resolution=256), IntField) from `Image.open(p).convert('RGB')`, as torchvision's
   ImageFolder feeds it (sorted classes and files; files PIL cannot open are left out, as
   --skip-unreadable leaves them out);
2. compares its stored pixels with OURS_RAW.beton's, sample by sample (mean and max |diff|);
3. loads OURS_RAW.beton and every OTHER.beton with FFCV 1.0.2's Loader
   (CenterCropRGBImageDecoder 64x64) and prints what it read."""
import os, sys, tempfile
import numpy as np
from PIL import Image
from ffcv.writer import DatasetWriter
from ffcv.fields import RGBImageField, IntField
from ffcv.fields.decoders import CenterCropRGBImageDecoder, IntDecoder
from ffcv.reader import Reader
from ffcv.loader import Loader, OrderOption

root, ours, others = sys.argv[1], sys.argv[2], sys.argv[3:]
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
        except Exception as e:
            print(f"PIL cannot read {c}/{name}: {e}")
            continue
        items.append((f"{c}/{name}", path, label))

class Folder:
    def __len__(self):
        return len(items)
    def __getitem__(self, i):
        return Image.open(items[i][1]).convert("RGB"), items[i][2]

ref = os.path.join(tempfile.mkdtemp(), "ffcv_raw256.beton")
DatasetWriter(ref, {"image": RGBImageField(write_mode="raw", max_resolution=256), "label": IntField()},
              num_workers=1).from_indexed_dataset(Folder())

def raw_images(path):
    r = Reader(path)
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    m = r.metadata["f0"]
    out = []
    for row in m:
        assert row["mode"] == 1, "not raw"  # FFCV's IMAGE_MODES: jpg 0, raw 1
        h, w, p = int(row["height"]), int(row["width"]), int(row["data_ptr"])
        out.append(np.asarray(mm[p:p + h * w * 3]).reshape(h, w, 3))
    return out

a = raw_images(ref)
b = raw_images(ours)
assert len(a) == len(b), (len(a), len(b))
# 16-bit inputs (named *16.png here) follow a documented rule of their own.
sums = {"8-bit inputs": [0.0, 0, 0, 0], "16-bit inputs": [0.0, 0, 0, 0]}
print(f"{'file':42} {'size':>9} {'mean|d|':>8} {'max':>4}")
for (key, _, _), x, y in zip(items, a, b):
    assert x.shape == y.shape, (key, x.shape, y.shape)
    d = np.abs(x.astype(int) - y.astype(int))
    t = sums["16-bit inputs" if key.endswith("16.png") else "8-bit inputs"]
    t[0] += d.sum(); t[1] += d.size; t[2] = max(t[2], int(d.max())); t[3] += 1
    print(f"{key:42} {x.shape[1]:>4}x{x.shape[0]:<4} {d.mean():8.4f} {int(d.max()):4d}")
for what, (tot, n, worst, count) in sums.items():
    if count:
        print(f"{what}: {count} images, mean |diff| {tot / n:.4f}, max {worst}")

for path in [ours] + others:
    loader = Loader(path, batch_size=8, num_workers=1, order=OrderOption.SEQUENTIAL, drop_last=False,
                    pipelines={"image": [CenterCropRGBImageDecoder((64, 64), 224 / 256)], "label": [IntDecoder()]})
    count, labels = 0, []
    for imgs, lab in loader:
        count += len(imgs); labels += [int(v) for v in np.asarray(lab).reshape(-1)]
        assert imgs.shape[1:] == (64, 64, 3)
    print(f"FFCV 1.0.2 loaded {os.path.basename(path)}: {count} samples, labels {labels}")
