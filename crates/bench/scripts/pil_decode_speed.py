"""libjpeg-turbo's full-resolution decode speed on one thread, through PIL and OpenCV, over the
JPEGs that `cargo run --release -p rgb-image --example photo_decode_speed FILE --dump DIR` wrote
(docs/benchmarking.md, "Decode throughput per core"). Run with the reference environment:
Usage: python pil_decode_speed.py DIR"""
import sys, glob, time, io
from PIL import Image
import cv2, numpy as np
cv2.setNumThreads(1)
files = sorted(glob.glob(sys.argv[1] + "/*.jpg"))
data = [open(f, "rb").read() for f in files]
px = 0
for d in data:
    im = Image.open(io.BytesIO(d)); px += im.size[0] * im.size[1]
def bench(fn):
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        for d in data: fn(d)
        best = min(best, time.perf_counter() - t)
    return best
pil = bench(lambda d: Image.open(io.BytesIO(d)).convert("RGB").load())
ocv = bench(lambda d: cv2.imdecode(np.frombuffer(d, np.uint8), cv2.IMREAD_COLOR))
import PIL.features
print(f"{len(data)} JPEGs, {px/1e6:.1f} Mpx; PIL {PIL.__version__} (libjpeg-turbo {PIL.features.version('libjpeg_turbo')}): {px/1e6/pil:.1f} Mpx/s; OpenCV {cv2.__version__} imdecode: {px/1e6/ocv:.1f} Mpx/s (one thread, best of 3)")
