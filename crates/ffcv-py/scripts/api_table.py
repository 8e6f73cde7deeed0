"""Writes the table of FFCV 1.0.2's Python API in docs/python.md ("FFCV 1.0.2's API, name
by name"), from the committed list (tests/data/ffcv_api.json) and ffcv_rs itself:

    python crates/ffcv-py/scripts/api_table.py            # rewrites the table in place
    python crates/ffcv-py/scripts/api_table.py --check    # exit 1 if it is out of date

Each module gets one row per name it defines, saying what ffcv_rs does: the first line of
the ffcv_rs object's docstring, plus ``DIFFERENCES`` where ffcv_rs behaves otherwise than
FFCV. Names a module only re-exports from another are listed together, with where they
come from. The test suite runs ``--check``.
"""

import argparse
import importlib
import inspect
import json
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
API = ROOT / "crates" / "ffcv-py" / "tests" / "data" / "ffcv_api.json"
DOC = ROOT / "docs" / "python.md"
BEGIN = "<!-- api-table: begin (scripts/api_table.py writes this) -->"
END = "<!-- api-table: end -->"

# What ffcv_rs does differently, by FFCV name. Everything not here behaves as FFCV's.
DIFFERENCES = {
    "ffcv.loader.loader.Loader": "the decoders and built-in transforms run in Rust; `os_cache`, "
        "`batches_ahead` and `num_workers` drive the Rust page caches and workers; `custom_fields` "
        "fields and users' decoders run in Python; extra keyword-only knobs (docs above)",
    "ffcv.loader.loader.OrderOption": "members' values are their names (FFCV's are integers)",
    "ffcv.loader.epoch_iterator.EpochIterator": "not a thread: the Rust loader prepares "
        "batches; the Python steps run when `next` is called",
    "ffcv.writer.DatasetWriter": "the dataset is read on the calling thread, in order, the Rust "
        "writer encodes and fills pages in parallel (FFCV uses worker processes)",
    "ffcv.pipeline.compiler.Compiler": "`set_enabled(False)` also makes the Rust pipelines "
        "interpreted; numba gets at most one thread per CPU; a loader sets numba's threads "
        "but not torch's",
    "ffcv.fields.rgb_image.SimpleRGBImageDecoder": "images of several sizes raise "
        "`ImageSizeError`, a `TypeError` (as FFCV) and a `ConfigError`",
    "ffcv.fields.rgb_image.RandomResizedCropRGBImageDecoder": "crops are drawn from (seed, "
        "epoch, sample), in a loader from its seed; `generate_code()` draws one seed per batch "
        "from NumPy's generator (so `np.random.seed` repeats it), FFCV one crop at a time",
    "ffcv.transforms.normalize.NormalizeImage": "the Rust pipeline outputs float16 directly "
        "(FFCV's CPU path gives its int16 bits); same values",
    "ffcv.transforms.flip.RandomHorizontalFlip": "in the Rust pipeline the draws come from "
        "(seed, epoch, sample), so runs repeat; `generate_code()` gives the native kernel "
        "with a seed from NumPy's generator (FFCV's NumPy code for torch tensors)",
    "ffcv.transforms.cutout.Cutout": "as `RandomHorizontalFlip` for the draws",
    "ffcv.transforms.translate.RandomTranslate": "as `RandomHorizontalFlip` for the draws",
    "ffcv.transforms.random_resized_crop.RandomResizedCrop": "as `RandomHorizontalFlip` for "
        "the draws; the output keeps the input's channel count (FFCV's state says 3)",
    "ffcv.transforms.mixup.ImageMixup": "native, after the per-sample pipeline; `lam` is drawn "
        "from (seed, epoch, sample) (FFCV seeds NumPy with the batch's last sample id, the same "
        "draws every epoch); float images mixed in float64 then rounded once, as FFCV's numba "
        "code (its NumPy code rounds in the image type)",
    "ffcv.transforms.mixup.LabelMixup": "as `ImageMixup` for `lam`",
    "ffcv.transforms.mixup.MixupToOneHot": "does not change its input in place (FFCV's does)",
    "ffcv.transforms.poisoning.Poison": "native in the Rust pipeline; FFCV's float32 steps",
    "ffcv.transforms.color_jitter.RandomBrightness": "as `RandomHorizontalFlip` for the draws",
    "ffcv.transforms.color_jitter.RandomContrast": "as `RandomHorizontalFlip` for the draws",
    "ffcv.transforms.color_jitter.RandomSaturation": "as `RandomHorizontalFlip` for the draws",
    "ffcv.transforms.ops.View": "before a built-in transform it runs in the Rust pipeline (a "
        "copy, the last axis rescaled by the item sizes); otherwise a view of the handed-over "
        "batch",
    "ffcv.memory_managers.process_cache.manager.ProcessCacheManager": "reads the file from "
        "Python through the map; the loader's own process cache is the Rust one",
    "ffcv.reader.Reader": "validates the file with beton-io first; `metadata` and "
        "`alloc_table` are read-only maps of the file (FFCV copies them)",
    "ffcv.libffcv.imdecode": "DCT scale factors other than 1 return -3 (unsupported)",
    "ffcv.traversal_order.quasi_random.QuasiRandom": "FFCV's scheme, not its exact orders "
        "(which depend on numba's generator state)",
    "ffcv.benchmarks.decorator.benchmark": "returns the class (FFCV's returns None)",
    "ffcv.benchmarks.suites.image_read.ImageReadBench": "a registered class (FFCV's name "
        "holds None, what its decorator returns)",
    "ffcv.benchmarks.suites.jpeg_decode.JPEGDecodeBenchmark": "as `ImageReadBench`",
    "ffcv.benchmarks.suites.memory_read.MemoryReadBytesBench": "as `ImageReadBench`",
}


def ours(module: str) -> str:
    return "ffcv_rs" + module[len("ffcv"):]


def theirs(module: str, api: dict) -> str:
    """FFCV's name of an ffcv_rs module, or the ffcv_rs name of one FFCV has not."""
    name = "ffcv" + module[len("ffcv_rs"):]
    return name if name in api["modules"] else module


def summary(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    first = doc.split("\n\n")[0].replace("\n", " ").strip()
    return first.replace("|", "\\|")


def table() -> str:
    api = json.loads(API.read_text())
    lines = [BEGIN, "",
             f"{sum(len(v) for v in api['modules'].values())} names in "
             f"{len(api['modules'])} modules of FFCV {api['version']}, every one importable "
             "at the same path under `ffcv_rs` (`tests/test_ffcv_api.py`).", ""]
    for module, names in sorted(api["modules"].items()):
        mod = importlib.import_module(ours(module))
        own, reexported = [], {}
        for name, kind in sorted(names.items()):
            obj = getattr(mod, name)
            if inspect.ismodule(obj):
                reexported.setdefault(theirs(obj.__name__, api), []).append(name)
                continue
            ours_kind = ("class" if inspect.isclass(obj)
                         else "type alias" if typing.get_origin(obj) is not None
                         else "function" if callable(obj) else "value")
            home = getattr(obj, "__module__", None) if ours_kind != "value" else None
            if home and home != mod.__name__ and home.startswith("ffcv_rs"):
                reexported.setdefault(theirs(home, api), []).append(name)
            else:
                own.append((name, ours_kind, obj))
        lines.append(f"**`{module}`**" + ("" if names else ": no public names (a package)"))
        lines.append("")
        if own:
            lines += ["| name | kind | in ffcv_rs |", "| --- | --- | --- |"]
            for name, kind, obj in own:
                text = summary(obj) if kind in ("class", "function") else "as FFCV's"
                if kind == "class" and text.startswith("FFCV's "):
                    text = text  # an internal without counterpart: its own words say so
                diff = DIFFERENCES.get(f"{module}.{name}")
                if diff:
                    text = f"{text} **Differs:** {diff}." if text else f"**Differs:** {diff}."
                lines.append(f"| `{name}` | {kind} | {text or 'as FFCV'} |")
            lines.append("")
        for home, group in sorted(reexported.items()):
            lines.append(f"Re-exported from `{home}`: " + ", ".join(f"`{n}`" for n in group) + ".")
            lines.append("")
    lines.append(END)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        print(f"{DOC}: no table markers ({BEGIN!r})", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + table() + tail
    if args.check:
        if new != text:
            print("docs/python.md's API table is out of date: run "
                  "crates/ffcv-py/scripts/api_table.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
