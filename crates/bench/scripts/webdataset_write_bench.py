"""WebDataset -> .beton conversion speed: FFCV 1.0.2's `DatasetWriter.from_webdataset` on
shards of photograph JPEGs, the same shards `ffcv write webdataset` converts in
docs/writing.md ("Conversion speed"). Run with the reference environment (FFCV 1.0.2, and
the `webdataset` package installed into it with its pip).

  python webdataset_write_bench.py make DIR [--samples 2000] [--shards 8] [--seed 0]
      writes DIR/photos-NNNN.tar: `NNNNNN.jpg` (a 2x2 mosaic of crops of the test
      photographs in crates/rgb-image/tests/data/photos, 440..500 x 330..375, at their
      native resolution, saved by Pillow at quality 90, baseline 4:2:0) and `NNNNNN.cls`
  python webdataset_write_bench.py ffcv DIR OUT --workers N [--max-resolution R]
      converts them with FFCV's writer (write_mode='jpg', jpeg_quality=90) and prints one
      JSON line: wall seconds and CPU seconds of `from_webdataset` (its process and its
      worker processes; imports excluded), images per second and per CPU second
  python webdataset_write_bench.py check FILE
      decodes every image of FILE with FFCV's loader (CenterCropRGBImageDecoder 160x160,
      ratio 0.875, in order) and prints the sha256 of the crops' sha256s in hex, joined:
      the same digest as `ffcv dump FILE --fields image --decoder
      image=center-crop:160x160:0.875` gives, piped through the same join
"""
import argparse, glob, io, json, multiprocessing, os, random, resource, sys, time

PHOTOS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "../../rgb-image/tests/data/photos")


def make(args):
    import webdataset as wds
    from PIL import Image
    names = ["astronaut.jpg", "chelsea.jpg", "coffee.jpg", "rocket.jpg"]
    photos = [Image.open(os.path.join(PHOTOS, n)).convert("RGB") for n in names]
    rng = random.Random(args.seed)
    os.makedirs(args.dir, exist_ok=True)
    per_shard = -(-args.samples // args.shards)
    k = 0
    for s in range(args.shards):
        with wds.TarWriter(os.path.join(args.dir, f"photos-{s:04d}.tar")) as sink:
            for _ in range(min(per_shard, args.samples - k)):
                w, h = rng.randint(440, 500), rng.randint(330, 375)
                sx, sy = rng.randint(w // 4, 3 * w // 4), rng.randint(h // 4, 3 * h // 4)
                canvas = Image.new("RGB", (w, h))
                for x0, x1 in ((0, sx), (sx, w)):
                    for y0, y1 in ((0, sy), (sy, h)):
                        tw, th = x1 - x0, y1 - y0
                        p = rng.choice([p for p in photos if p.width >= tw and p.height >= th])
                        ox, oy = rng.randint(0, p.width - tw), rng.randint(0, p.height - th)
                        tile = p.crop((ox, oy, ox + tw, oy + th))
                        if rng.random() < 0.5:
                            tile = tile.transpose(Image.FLIP_LEFT_RIGHT)
                        canvas.paste(tile, (x0, y0))
                buf = io.BytesIO()
                canvas.save(buf, "JPEG", quality=90)
                sink.write({"__key__": f"{k:06d}", "jpg": buf.getvalue(),
                            "cls": str(k % 1000).encode()})
                k += 1
    print(json.dumps({"samples": k, "shards": args.shards, "dir": args.dir}))


def pipeline(ds):
    return ds.decode("rgb8").to_tuple("jpg", "cls")


def convert(args):
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter
    shards = sorted(glob.glob(os.path.join(args.dir, "*.tar")))
    if not shards:
        sys.exit(f"no .tar shards in {args.dir}")
    fields = {"image": RGBImageField(write_mode="jpg", max_resolution=args.max_resolution,
                                     jpeg_quality=90),
              "label": IntField()}
    writer = DatasetWriter(args.out, fields, num_workers=args.workers)
    def cpu():
        # This process (the counting pass runs in its threads) and its reaped workers.
        return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
                   for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    start, cpu_start = time.perf_counter(), cpu()
    writer.from_webdataset(shards, pipeline)
    # FFCV leaves its worker processes to exit on their own: join (reap) them, so that
    # their CPU time is counted.
    for p in multiprocessing.active_children():
        p.join()
    seconds, cpu_seconds = time.perf_counter() - start, cpu() - cpu_start
    from ffcv.reader import Reader
    n = int(Reader(args.out).num_samples)
    print(json.dumps({"writer": "ffcv-1.0.2 from_webdataset", "samples": n,
                      "workers": args.workers, "max_resolution": args.max_resolution,
                      "seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2),
                      "images_per_s": round(n / seconds, 1),
                      "images_per_cpu_s": round(n / cpu_seconds, 1)}))


def check(args):
    import hashlib
    import numpy as np
    from ffcv.fields.decoders import CenterCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    loader = Loader(args.file, batch_size=100, num_workers=2, order=OrderOption.SEQUENTIAL,
                    pipelines={"image": [CenterCropRGBImageDecoder((160, 160), 0.875)]})
    digests = [hashlib.sha256(np.ascontiguousarray(im).tobytes()).hexdigest()
               for batch in loader for im in batch[0]]
    print(json.dumps({"images": len(digests),
                      "sha256": hashlib.sha256("".join(digests).encode()).hexdigest()}))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--samples", type=int, default=2000)
    m.add_argument("--shards", type=int, default=8)
    m.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("ffcv")
    c.add_argument("dir")
    c.add_argument("out")
    c.add_argument("--workers", type=int, required=True)
    c.add_argument("--max-resolution", type=int, default=None)
    k = sub.add_parser("check")
    k.add_argument("file")
    args = parser.parse_args()
    {"make": make, "ffcv": convert, "check": check}[args.command](args)


if __name__ == "__main__":
    main()
