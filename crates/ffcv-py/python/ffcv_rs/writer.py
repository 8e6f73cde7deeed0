"""FFCV's ``DatasetWriter`` (``ffcv.writer``) over the Rust writer.

``DatasetWriter(fname, fields).from_indexed_dataset(dataset)`` writes ``dataset[i]`` for
every ``i`` (each item a tuple with one value per field, in the order of ``fields``);
``from_webdataset(shards, pipeline)`` writes the samples of WebDataset shards.

``write_webdataset``, ``write_parquet``, ``write_arrow`` and ``write_tfrecord`` (ffcv-rs
additions) convert WebDataset shards, Parquet, Arrow IPC and TFRecord files natively:
the code of ``ffcv write webdataset|parquet|arrow|tfrecord``, with the same options and
the same output, run without the GIL (docs/writing.md).

The dataset is read by the calling thread alone, in order: ``dataset[i]`` is never called
from two threads at once, so a ``__getitem__`` that seeds and draws from NumPy's global
generator (or uses any other global state) writes exactly what it returns. The Rust writer
threads encode images (resize, JPEG) and fill pages in parallel, without the GIL. FFCV reads
the dataset in worker processes instead; reading on one thread and encoding in parallel was
measured faster than reading in processes for arrays, JPEG images and scalars
(docs/python.md, "How the dataset is read"). With ``num_workers=1`` the file is
byte-identical to FFCV 1.0.2's with one worker.

A field whose class is not exactly one of the built-in classes (for instance FFCV's
``class StringField(NDArrayField)`` that overrides ``encode``) is a custom field, written as
FFCV writes it: type id 255, its ``to_binary()`` arguments, and whatever its
``encode(destination, value, malloc)`` puts in its metadata row (``metadata_type``) and in
the buffers ``malloc(size)`` returns. ``malloc``'s pointers are placeholders until the
sample is placed in a page: store them in the metadata as 8-byte integers (as FFCV's own
fields do, ``destination[0] = ptr`` or ``destination['ptr'] = ptr``), unchanged or offset
within the allocations; the writer replaces them with the file addresses. ``malloc`` may be
called any number of times per sample; the allocations of one field's sample are stored
contiguously, in the order made.
"""

import os
import secrets
import sys
from dataclasses import dataclass, field as dataclass_field
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence,
                    Tuple, Union)

import numpy as np

from . import _native
from .fields import (BytesField, Field, FloatField, ImageField, IntField, JSONField,
                     NDArrayField, RGBImageField, TorchTensorField, VarArrayField)

__all__ = ["DatasetWriter", "WriteResult", "write_webdataset", "write_parquet", "write_arrow",
           "write_tfrecord"]

MIN_PAGE_SIZE = 1 << 21  # FFCV's limits on page_size: a power of two in [2 MiB, 4 GiB)
MAX_PAGE_SIZE = 1 << 32

# Exactly these classes are written natively with FFCV's type ids; any other class,
# subclasses of these included, is a custom field (type id 255), as in FFCV's writer.
_BUILT_IN = (IntField, FloatField, BytesField, NDArrayField, JSONField, TorchTensorField,
             RGBImageField, VarArrayField, ImageField)

_ARGS_SIZE = 1024


class _Progress:
    """tqdm when installed (FFCV's bar), else a line on stderr every ~5 %."""

    def __init__(self, total: int, enabled: bool):
        self.total = total
        self.bar = None
        self.last = -1
        self.enabled = enabled and total > 0
        if not self.enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self.bar = tqdm(total=total)

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            return
        step = done * 20 // self.total
        if step != self.last:
            self.last = step
            print(f"\rffcv_rs: {done}/{self.total} samples", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            print(file=sys.stderr)


def from_shard(shard: str, pipeline: Callable[[Any], Iterable[Any]]) -> Iterable[Any]:
    """The samples of one WebDataset shard: ``pipeline(webdataset.WebDataset(shard))``."""
    try:
        from webdataset import WebDataset
    except ImportError as e:
        raise ImportError("DatasetWriter.from_webdataset needs the 'webdataset' package "
                          "(pip install webdataset)") from e
    return pipeline(WebDataset(shard))


def count_samples_in_shard(shard: str, pipeline: Callable[[Any], Iterable[Any]]) -> int:
    """How many samples ``from_shard(shard, pipeline)`` yields, by iterating: a pipeline
    need not have a length."""
    return sum(1 for _ in from_shard(shard, pipeline))


def _is_custom(field: Field) -> bool:
    return type(field) not in _BUILT_IN


def _arguments(name: str, field: Field) -> bytes:
    """The field's ``to_binary()`` as the 1024 bytes of its descriptor's arguments."""
    raw = field.to_binary()
    if isinstance(raw, (bytes, bytearray, memoryview)):
        data = bytes(raw)
    else:
        # FFCV's form: a void scalar of ``ARG_TYPE`` (one field of 1024 uint8).
        data = np.ascontiguousarray(np.asarray(raw)).tobytes()
    if len(data) > _ARGS_SIZE:
        raise ValueError(f"field {name!r}: to_binary() gave {len(data)} bytes, "
                         f"a field's arguments hold {_ARGS_SIZE}")
    return data.ljust(_ARGS_SIZE, b"\0")


class _CustomEncoder:
    """Calls a custom field's ``encode`` for one sample and returns what the native writer
    takes: ``(metadata bytes, payload bytes or None, placeholder base)``."""

    def __init__(self, name: str, field: Field, page_size: int, base: int):
        for attr in ("encode", "to_binary", "metadata_type"):
            if not hasattr(field, attr):
                raise TypeError(
                    f"field {name!r}: {type(field).__name__} is not one of ffcv_rs's built-in "
                    f"fields, so it is written as a custom field through its encode, "
                    f"to_binary and metadata_type (FFCV's Field protocol); it has no {attr}")
        self.name = name
        self.field = field
        self.dtype = np.dtype(field.metadata_type)
        self.page_size = page_size
        self.base = base

    def spec(self) -> Dict[str, Any]:
        return {"itemsize": self.dtype.itemsize, "alignment": self.dtype.alignment,
                "arguments": _arguments(self.name, self.field),
                "class_name": type(self.field).__name__}

    def __call__(self, value: Any):
        destination = np.zeros(1, dtype=self.dtype)
        buffers: List[np.ndarray] = []
        used = 0

        def malloc(size):
            nonlocal used
            size = int(size)
            if size < 0:
                raise ValueError(f"field {self.name!r}: malloc({size})")
            if used + size > self.page_size:
                # FFCV's allocator refuses the same; the native writer would too, later.
                raise ValueError(f"field {self.name!r}: tried allocating {used + size} bytes "
                                 f"for one sample but the page size is {self.page_size}")
            ptr = self.base + used
            buffer = np.zeros(size, dtype="<u1")
            buffers.append(buffer)
            used += size
            return ptr, buffer

        self.field.encode(destination, value, malloc)
        payload = b"".join(b.tobytes() for b in buffers) if buffers else None
        return destination.tobytes(), payload, self.base


class DatasetWriter:
    """Writes a ``.beton`` file with ``fields`` (a mapping of names to
    :mod:`ffcv_rs.fields` instances, in order)."""

    def __init__(
        self,
        fname: str,
        fields: Mapping[str, Field],
        page_size: int = 4 * MIN_PAGE_SIZE,
        num_workers: int = -1,
    ):
        if not fields:
            raise ValueError("DatasetWriter needs at least one field")
        for name, field in fields.items():
            if not isinstance(field, Field):
                raise TypeError(f"field {name!r}: {field!r} is not an ffcv_rs.fields field")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int):
            raise TypeError("num_workers must be an int")
        if num_workers == 0 or num_workers < -1:
            raise ValueError(f"num_workers must be -1 (every CPU) or at least 1, got {num_workers}")
        self.fname = os.fspath(fname)
        self.fields: Dict[str, Field] = dict(fields)
        self.page_size = int(page_size)
        self.num_workers = num_workers

    def _write(self, items: Callable[[int], Any], num_samples: int, chunksize: int,
               progress: bool) -> None:
        """Writes ``items(i)`` as sample ``i``; ``items`` is called for 0, 1, … in order, on
        this thread."""
        fields = list(self.fields.items())
        # Placeholder pointers (see the module documentation): a random multiple of 2**32
        # below 2**63, so that they fit ``<u8`` and ``<i8`` and no stored value is taken
        # for one by chance.
        base = (secrets.randbelow((1 << 31) - 1) + 1) << 32
        plain = []
        specs = []
        for name, field in fields:
            if _is_custom(field):
                encoder = _CustomEncoder(name, field, self.page_size, base)
                plain.append(encoder)
                specs.append((name, "custom", encoder.spec()))
            else:
                plain.append(field._plain)
                specs.append((name, field._kind, field._writer_params()))

        def get(i: int):
            item = items(i)
            if not isinstance(item, (tuple, list)):
                item = (item,)
            if len(item) != len(fields):
                raise ValueError(f"sample {i} has {len(item)} values for {len(fields)} fields")
            return [to_plain(value) for to_plain, value in zip(plain, item)]

        bar = _Progress(num_samples, progress)
        try:
            _native.write_dataset(
                self.fname, specs, get, num_samples, self.page_size,
                0 if self.num_workers == -1 else self.num_workers, int(chunksize), bar,
            )
        finally:
            bar.close()

    def from_indexed_dataset(
        self,
        dataset: Any,
        indices: Optional[Sequence[int]] = None,
        chunksize: int = 100,
        shuffle_indices: bool = False,
        progress: bool = True,
    ) -> None:
        """Writes ``dataset[indices[i]]`` as sample ``i`` (all of ``dataset`` by default;
        ``shuffle_indices`` shuffles them first with NumPy's global generator, as FFCV).
        ``dataset[j]`` is called on this thread only, for each sample in order;
        ``chunksize`` consecutive samples are placed in pages by one writer thread."""
        if indices is None:
            order = np.arange(len(dataset))
        else:
            order = np.asarray(indices, dtype=np.int64).reshape(-1)
        if shuffle_indices:
            order = order.copy()
            np.random.shuffle(order)
        order_list = [int(i) for i in order]

        def item(i: int):
            return dataset[order_list[i]]

        self._write(item, len(order_list), chunksize, progress)

    def from_webdataset(self, shards: Iterable[str], pipeline: Callable[[Any], Iterable[Any]],
                        chunksize: int = 100, progress: bool = True) -> None:
        """Writes the samples of WebDataset ``shards``, as FFCV does: each shard is opened
        as ``pipeline(webdataset.WebDataset(shard))``, its samples counted, then all are
        written in shard order. Needs the ``webdataset`` package. The shards are read one
        after the other on this thread (twice: to count, then to write)."""
        shards = list(shards)
        lengths = [count_samples_in_shard(shard, pipeline) for shard in shards]
        samples = _ShardSamples(shards, lengths, lambda shard: from_shard(shard, pipeline))
        self._write(samples.next, sum(lengths), chunksize, progress)


class _ShardSamples:
    """The samples of shards in order, checked against the counts taken before."""

    def __init__(self, shards: List[str], lengths: List[int],
                 open_shard: Callable[[str], Iterable[Any]]):
        self.shards = shards
        self.lengths = lengths
        self.open_shard = open_shard
        self.shard = -1
        self.taken = 0
        self.it: Optional[Iterator[Any]] = None

    def _differs(self, got: str) -> ValueError:
        shard = self.shards[self.shard]
        return ValueError(f"shard {shard!r} gave {got} samples the second time it was read, "
                          f"{self.lengths[self.shard]} when counted")

    def next(self, i: int) -> Any:
        while self.it is None or self.taken == self.lengths[self.shard]:
            self.shard += 1
            self.taken = 0
            self.it = iter(self.open_shard(self.shards[self.shard]))
        try:
            sample = next(self.it)
        except StopIteration:
            raise self._differs(str(self.taken)) from None
        self.taken += 1
        if self.taken == self.lengths[self.shard] and next(self.it, _END) is not _END:
            # Checked before the shard's last sample is handed on, so the write fails.
            raise self._differs("more")
        return sample


_END = object()


# FFCV's module-level names of ffcv.writer. The format's dtypes and helpers are the same
# objects as in ffcv_rs.types / ffcv_rs.utils; FFCV's worker-process internals have no
# counterpart (the Rust writer does their work) and raise, naming what to use.
from ._compat import unsupported_function as _unsupported_function  # noqa: E402
from .memory_allocator import MemoryAllocator  # noqa: E402,F401
from .types import (  # noqa: E402,F401
    ALLOC_TABLE_TYPE, CURRENT_VERSION, TYPE_ID_HANDLER, FieldDescType, HeaderType,
    get_metadata_type,
)
from .utils import chunks, is_power_of_2  # noqa: E402,F401

_WRITER = "DatasetWriter.from_indexed_dataset / from_webdataset write in Rust: call those"
handle_sample = _unsupported_function("ffcv.writer.handle_sample", _WRITER)
worker_job_indexed_dataset = _unsupported_function("ffcv.writer.worker_job_indexed_dataset", _WRITER)
worker_job_webdataset = _unsupported_function("ffcv.writer.worker_job_webdataset", _WRITER)


@dataclass
class WriteResult:
    """What a native conversion (``write_webdataset`` & co.) did."""

    #: The fields, in file order: name -> ``"SOURCE:KIND"`` (``{"image": "jpg:image"}``),
    #: inferred or as given; pass it back as ``fields=`` to repeat the conversion.
    fields: Dict[str, str]
    #: Columns inference left out, with the reason (Parquet, Arrow, TFRecord).
    left_out: List[Tuple[str, str]]
    #: The input files (URLs for objects), in the order read.
    inputs: List[str]
    #: Records in the inputs, before any was skipped.
    records: int
    #: The files written (URLs for uploaded shards).
    files: List[str]
    #: Each file's samples as ``(start, end)`` of the whole set.
    samples: List[Tuple[int, int]]
    #: Records left out with ``skip_unreadable``: dicts of ``input``, ``record`` (a key or
    #: a row number as text; ``None`` for an input's broken tail) and ``error``.
    skipped: List[Dict[str, Optional[str]]]
    #: Where the skip report went (``OUT.skipped.json``), with ``skip_unreadable``.
    skip_report: Optional[str]
    #: The first image field's images stored raw, as JPEG, and as the source's bytes.
    images: Dict[str, int] = dataclass_field(default_factory=dict)
    #: The lines ``ffcv write`` prints for the same conversion.
    lines: List[str] = dataclass_field(default_factory=list)


def _field_flags(fields: Union[None, Mapping[str, str], Iterable[str]]) -> List[str]:
    """The mapping as ``NAME=SOURCE:KIND`` strings: a dict ``{name: "SOURCE:KIND"}`` or
    the strings themselves; ``None`` infers the fields."""
    if fields is None:
        return []
    if isinstance(fields, str):
        raise TypeError("fields: a dict {name: 'SOURCE:KIND'} or a list of "
                        "'NAME=SOURCE:KIND' strings, not one string")
    if isinstance(fields, Mapping):
        out = []
        for name, source in fields.items():
            if not isinstance(name, str) or not isinstance(source, str):
                raise TypeError(f"fields: {name!r}: {source!r}: names and sources are strings "
                                "('label': 'cls:int')")
            out.append(f"{name}={source}")
        return out
    out = list(fields)
    for flag in out:
        if not isinstance(flag, str):
            raise TypeError(f"fields: {flag!r} is not a 'NAME=SOURCE:KIND' string")
    return out


class _Counts:
    """``progress=True``: one ``_Progress`` per count (records checked, records)."""

    def __init__(self):
        self.unit = None
        self.bar = None

    def __call__(self, unit: str, done: int, total: int) -> None:
        if unit != self.unit:
            self.close()
            self.unit = unit
            self.bar = _Progress(total, True)
        self.bar(done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _ingest(format: str, inputs: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]],
            out: Union[str, os.PathLike], fields, *, num_workers: Optional[int], shards: int,
            shard_index: Optional[int], progress, **options) -> WriteResult:
    # Every option travels by name, from the public function's parameters to the native
    # call's, so a parameter added to one place and not the others is a TypeError, never
    # a value taken for its neighbour.
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = [os.fspath(i) for i in inputs]
    if num_workers is not None and (not isinstance(num_workers, int) or num_workers < 1):
        raise ValueError(f"num_workers={num_workers!r}: give a number of threads >= 1, or None "
                         "for one per CPU")
    if not isinstance(shards, int) or shards < 1:
        raise ValueError(f"shards={shards!r}: give a number of files >= 1")
    if shard_index is not None and (not isinstance(shard_index, int) or shard_index < 0):
        raise ValueError(f"shard_index={shard_index!r}: give a shard number >= 0, or None")
    counts = None
    if progress is True:
        counts = _Counts()
        progress = counts
    elif progress is False or progress is None:
        progress = None
    elif not callable(progress):
        raise TypeError("progress: True, False, or a function progress(unit, done, total)")
    try:
        got = _native.ingest(format, inputs, os.fspath(out), _field_flags(fields),
                             num_workers=num_workers or 0, shards=shards,
                             shard_index=shard_index, progress=progress, **options)
    finally:
        if counts is not None:
            counts.close()
    raw, jpg, unchanged = got["images"]
    return WriteResult(
        fields=dict(got["fields"]), left_out=[tuple(x) for x in got["left_out"]],
        inputs=list(got["inputs"]), records=got["records"],
        files=[f["path"] for f in got["files"]],
        samples=[tuple(f["samples"]) for f in got["files"]], skipped=list(got["skipped"]),
        skip_report=got["skip_report"], images={"raw": raw, "jpg": jpg, "unchanged": unchanged},
        lines=list(got["lines"]))


_OPTIONS_DOC = """
    ``inputs`` is a path, a glob pattern (``"data/*.tar"``), a brace list
    (``"shard-{000..009}.tar"``) or an object URL (``"s3://bucket/train-*.tar"``), or a list
    of them: expanded and sorted byte-wise, each file read once. ``out`` is the ``.beton``
    file (or the name shards are named after), a path or an ``s3://``, ``gs://``, ``az://``
    URL (each shard uploaded as soon as it is written). ``fields`` maps fields to sources,
    in file order: a dict ``{"image": "jpg:image", "label": "cls:int"}`` or a list of
    ``"NAME=SOURCE:KIND"`` strings (``ffcv write``'s ``--field``); ``None`` infers them from
    the first record (``WriteResult.fields`` says what was used).

    The options are ``ffcv write``'s flags: ``write_mode`` (``"raw"``, ``"jpg"``,
    ``"smart"``, ``"proportion"``), ``max_resolution``, ``jpeg_quality``,
    ``smart_threshold``, ``compress_probability``, ``seed`` (of the ``proportion`` draws),
    ``jpeg_passthrough`` (a JPEG that needs no change is stored as its bytes),
    ``skip_unreadable`` (records that cannot be converted are left out, listed in the
    result and in ``OUT.skipped.json``, instead of raising), ``num_workers`` (writer
    threads; ``None``: one per CPU), ``page_size``, ``shards`` (N files written in
    parallel) and ``shard_index`` (only shard I of the N). ``progress``: ``True`` for a bar
    on stderr, or a function ``progress(unit, done, total)`` called on this thread.

    The conversion runs natively with the GIL released, and writes the bytes ``ffcv write``
    writes from the same inputs and options. A record that cannot be converted raises
    ``ffcv_rs.errors.InputError`` naming the input (``.path``) and the record
    (``.record``: a WebDataset key, or a row number); options that do not fit raise
    ``ConfigError`` (a ``ValueError``). Returns a ``WriteResult``.
"""


def write_webdataset(inputs, out, fields=None, *, write_mode: str = "raw",
                     max_resolution: Optional[int] = None, jpeg_quality: int = 90,
                     smart_threshold: Optional[int] = None, compress_probability: float = 0.5,
                     seed: int = 0, jpeg_passthrough: bool = False,
                     skip_unreadable: bool = False, num_workers: Optional[int] = None,
                     page_size: int = 1 << 23, shards: int = 1,
                     shard_index: Optional[int] = None, progress=False) -> WriteResult:
    # locals() is exactly this function's parameters here: each option passed by name.
    return _ingest("webdataset", **locals())


def write_parquet(inputs, out, fields=None, *, write_mode: str = "raw",
                  max_resolution: Optional[int] = None, jpeg_quality: int = 90,
                  smart_threshold: Optional[int] = None, compress_probability: float = 0.5,
                  seed: int = 0, jpeg_passthrough: bool = False, skip_unreadable: bool = False,
                  num_workers: Optional[int] = None, page_size: int = 1 << 23, shards: int = 1,
                  shard_index: Optional[int] = None, progress=False) -> WriteResult:
    return _ingest("parquet", **locals())


def write_arrow(inputs, out, fields=None, *, write_mode: str = "raw",
                max_resolution: Optional[int] = None, jpeg_quality: int = 90,
                smart_threshold: Optional[int] = None, compress_probability: float = 0.5,
                seed: int = 0, jpeg_passthrough: bool = False, skip_unreadable: bool = False,
                num_workers: Optional[int] = None, page_size: int = 1 << 23, shards: int = 1,
                shard_index: Optional[int] = None, progress=False) -> WriteResult:
    return _ingest("arrow", **locals())


def write_tfrecord(inputs, out, fields=None, *, write_mode: str = "raw",
                   max_resolution: Optional[int] = None, jpeg_quality: int = 90,
                   smart_threshold: Optional[int] = None, compress_probability: float = 0.5,
                   seed: int = 0, jpeg_passthrough: bool = False,
                   skip_unreadable: bool = False, num_workers: Optional[int] = None,
                   page_size: int = 1 << 23, shards: int = 1,
                   shard_index: Optional[int] = None, progress=False) -> WriteResult:
    return _ingest("tfrecord", **locals())


write_webdataset.__doc__ = ("Converts WebDataset tar shards to a ``.beton`` file, as "
                            "``ffcv write webdataset`` does (fields: ``NAME=EXT:KIND``).\n"
                            + _OPTIONS_DOC)
write_parquet.__doc__ = ("Converts Parquet files (``datasets``' ``to_parquet``) to a "
                         "``.beton`` file, as ``ffcv write parquet`` does (fields: "
                         "``NAME=COLUMN:KIND``; a folder stands for its ``*.parquet``).\n"
                         + _OPTIONS_DOC)
write_arrow.__doc__ = ("Converts Arrow IPC files (``datasets``' ``save_to_disk`` folder, "
                       "Feather v2) to a ``.beton`` file, as ``ffcv write arrow`` does "
                       "(fields: ``NAME=COLUMN:KIND``).\n" + _OPTIONS_DOC)
write_tfrecord.__doc__ = ("Converts TFRecord files of ``tf.train.Example`` to a ``.beton`` "
                          "file, as ``ffcv write tfrecord`` does (fields: "
                          "``NAME=FEATURE:KIND``).\n" + _OPTIONS_DOC)
