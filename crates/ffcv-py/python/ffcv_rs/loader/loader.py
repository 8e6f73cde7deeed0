"""FFCV's ``Loader`` (``ffcv.loader.loader``) over the Rust loader.

``Loader(fname, batch_size, ...)`` takes FFCV's arguments; iterating it runs one epoch
and yields, per batch, a tuple with one entry per output (the file's fields that have a
pipeline, in the file's order). The decoders and built-in transforms run in the Rust
loader; operations of the user's and every step after one run in Python through FFCV's
``Operation`` protocol (``loader.code`` shows the split, ``loader/plan.py`` the rules).
Entries share the loader's batch memory: nothing is copied, and a batch's memory is
reused only once every array or tensor viewing it has been freed.
"""

import enum
import hashlib
import json
import os
import sys
import warnings
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _native
from ..errors import ConfigError, FFCVError
from ..fields.base import Field
from ..memory_managers import MemoryManager, OSCacheManager, ProcessCacheManager
from ..pipeline import Compiler, Pipeline, PipelineSpec
from ..pipeline.graph import INITIAL_STATE, Graph
from ..pipeline.operation import Operation
from ..reader import Reader
from ..traversal_order import QuasiRandom, Random, Sequential
from ..traversal_order.base import TraversalOrder
from ..transforms import ToTensor
from .epoch_iterator import EpochIterator
from .plan import NativeRun, OutputPlan, Step, as_operation, native_builtin, native_run_fits, split

__all__ = [
    "Loader", "OrderOption", "ORDER_TYPE", "ORDER_MAP", "DEFAULT_OS_CACHE",
    "DEFAULT_PROCESS_CACHE", "Compiler", "EpochIterator", "Field", "Graph", "MemoryManager",
    "OSCacheManager", "Operation", "Pipeline", "PipelineSpec", "ProcessCacheManager",
    "QuasiRandom", "Random", "Reader", "Sequential", "TraversalOrder",
]

# The outer format of state_dict's dict (the inner LoaderState has its own version).
_STATE_KEY = "ffcv_rs_loader_state"
_STATE_DICT_VERSION = 1


class OrderOption(enum.Enum):
    """The sample order of each epoch (FFCV's names)."""

    SEQUENTIAL = "SEQUENTIAL"
    RANDOM = "RANDOM"
    QUASI_RANDOM = "QUASI_RANDOM"


ORDER_TYPE = Union[TraversalOrder, Literal[OrderOption.SEQUENTIAL, OrderOption.RANDOM]]

ORDER_MAP: Mapping[Any, Any] = {
    OrderOption.RANDOM: Random,
    OrderOption.SEQUENTIAL: Sequential,
    OrderOption.QUASI_RANDOM: QuasiRandom,
}

DEFAULT_PROCESS_CACHE = int(os.environ.get("FFCV_DEFAULT_CACHE_PROCESS", "0"))
DEFAULT_OS_CACHE = not DEFAULT_PROCESS_CACHE


def _torch() -> Any:
    """torch, imported on first need, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _cuda_ordinal(device: Any) -> Optional[int]:
    """The CUDA ordinal ``ToDevice(device)`` names (``'cuda:N'``, ``torch.device``, an int),
    or None for any other device."""
    if isinstance(device, bool):
        return None
    if isinstance(device, (int, np.integer)):
        return int(device)  # torch reads an int as cuda:N
    text = str(device)
    if text == "cuda":
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            return int(torch.cuda.current_device())
        return 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    return None


def _distributed_rank_world() -> Tuple[int, int]:
    """Rank and world size from an initialised torch.distributed, else from torchrun's
    ``RANK`` / ``WORLD_SIZE`` environment."""
    torch = sys.modules.get("torch")  # initialised only if the user imported it
    if torch is not None:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    try:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except KeyError:
        raise ValueError(
            "distributed=True needs torch.distributed initialised or the RANK and WORLD_SIZE "
            "environment variables (torchrun sets them)"
        ) from None
    except ValueError:
        raise ValueError("RANK and WORLD_SIZE must be integers") from None


def _agreed_seed() -> Optional[int]:
    """A seed every rank agrees on, when none was given: rank 0's, broadcast through
    torch.distributed, or one derived from torchrun's run id; else ``None`` (the loader
    then uses seed 0 on every rank)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            seed = [int.from_bytes(os.urandom(4), "little") >> 1]
            dist.broadcast_object_list(seed, src=0)
            return int(seed[0])
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if run_id is not None:
        return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:4], "little") >> 1
    # Nothing to agree through: the Rust loader's rule applies (seed 0 on every rank for
    # the orders that depend on it, with a warning), so the ranks still agree.
    return None


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return int(value)


def _order_hash(ids: Any) -> str:
    return hashlib.sha256(np.asarray(ids, dtype="<u8").tobytes()).hexdigest()


def _is_local_file(name: str) -> bool:
    return "://" not in name or name.startswith("file://")


class Loader:
    """FFCV's loader over one ``.beton`` file, or several read as one.

    ``fname`` is a path, a ``file://``, ``s3://`` or ``http(s)://`` URL, or a list of them:
    shards with the same fields, read as one dataset whose sample ids are the
    concatenation in the order given (an entry may be a glob pattern or an ``s3://``
    prefix, which expand sorted; see ``docs/remote.md``).

    The positional and keyword arguments are FFCV's. ``pipelines`` maps field names to a
    list (a decoder, then transforms), a ``PipelineSpec``, or ``None`` to leave the field
    out; fields without an entry get their default decoder and ``ToTensor``, as in FFCV.
    A pipeline whose first entry is not the field's kind of decoder gets the default
    decoder in front (FFCV's rule). ``custom_fields`` maps the names of fields written by
    a ``Field`` class of the user's to that class. ``order`` is an ``OrderOption`` or a
    ``TraversalOrder`` subclass (built with the loader and ``order_kwargs``) or instance.

    Keyword-only knobs of ffcv-rs: ``max_memory`` (bytes of page slots the process cache
    may use), ``compile`` (False interprets the Rust pipelines; default
    ``Compiler.is_enabled``), the process-cache knobs ``prefetch_ahead``,
    ``reader_threads``, ``direct_io``, ``retain_pages`` and ``hold_all_pages``,
    ``max_image_pixels`` (the largest decoded image area a sample may claim; default
    134,217,728), ``rank`` / ``world_size`` to set the distributed share by hand, and
    ``page_cache_dir`` / ``page_cache_size`` (bytes, default 10 GiB) to keep a remote
    dataset's pages on the local disk for later epochs and processes.

    ``weights``: ``fname`` is a list of sources (each a path, URL or pattern, or a list of
    shards) mixed with these weights, one per source (see ``docs/mixtures.md``): each
    epoch has ``samples_per_epoch`` positions (default: the sum of the sources' lengths),
    drawn from the sources in proportion to the weights, each source walked in ``order``
    without replacement; ``when_exhausted`` is ``"cycle"`` (a source that runs out starts
    a new pass; the default) or ``"stop"`` (the epoch ends). Batch sample ids are global:
    the sources' samples numbered one source after another. Without ``weights`` a list
    still means shards read as one.

    ``gpu_stage``: when every output ends with ``ToDevice`` to one CUDA device (and no
    output has Python steps), the copy is the Rust loader's GPU stage (gpu-stage: pinned
    slots, one stream per slot) and batches are CUDA tensors exported through DLPack.
    ``None`` (default) uses it when it can be built and falls back, with a warning, to
    torch's ``tensor.to(device)`` otherwise; ``True`` requires it; ``False`` never uses it.

    ``custom_field_mapper`` (FFCV-SSL's): ``{name: source}`` adds output ``name``, field
    ``source`` of the file (or an earlier name of the mapper) decoded again with
    ``pipelines[name]`` (default: the source's default pipeline), with its own random
    draws; batches hold the file's fields, then the mapped names in the mapper's order. A
    ``PipelineSpec(source, ...)`` under another name does the same. See ``docs/python.md``
    ("Several views of one field").
    """

    def __init__(
        self,
        fname: Any,
        batch_size: int,
        num_workers: int = -1,
        os_cache: bool = DEFAULT_OS_CACHE,
        order: Any = OrderOption.SEQUENTIAL,
        distributed: bool = False,
        seed: Optional[int] = None,
        indices: Optional[Sequence[int]] = None,
        pipelines: Optional[Mapping[str, Any]] = None,
        custom_fields: Optional[Mapping[str, Any]] = None,
        drop_last: bool = True,
        batches_ahead: int = 3,
        recompile: bool = False,
        order_kwargs: Optional[Dict[str, Any]] = None,
        *,
        max_memory: Optional[int] = None,
        compile: Optional[bool] = None,
        prefetch_ahead: Optional[int] = None,
        reader_threads: Optional[int] = None,
        direct_io: bool = False,
        retain_pages: bool = True,
        hold_all_pages: bool = False,
        max_image_pixels: Optional[int] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        gpu_stage: Optional[bool] = None,
        page_cache_dir: Optional[Any] = None,
        page_cache_size: Optional[int] = None,
        weights: Optional[Sequence[float]] = None,
        samples_per_epoch: Optional[int] = None,
        when_exhausted: str = "cycle",
        custom_field_mapper: Optional[Mapping[str, str]] = None,
    ):
        # FFCV's `filter` rebuilds a loader from the arguments it was given.
        self._args = dict(
            fname=fname, batch_size=batch_size, num_workers=num_workers, os_cache=os_cache,
            order=order, distributed=distributed, seed=seed, indices=indices,
            pipelines=pipelines, custom_fields=custom_fields, drop_last=drop_last,
            batches_ahead=batches_ahead, recompile=recompile, order_kwargs=order_kwargs,
            max_memory=max_memory, compile=compile, prefetch_ahead=prefetch_ahead,
            reader_threads=reader_threads, direct_io=direct_io, retain_pages=retain_pages,
            hold_all_pages=hold_all_pages, max_image_pixels=max_image_pixels, rank=rank,
            world_size=world_size, gpu_stage=gpu_stage, page_cache_dir=page_cache_dir,
            page_cache_size=page_cache_size, weights=weights,
            samples_per_epoch=samples_per_epoch, when_exhausted=when_exhausted,
            custom_field_mapper=custom_field_mapper,
        )
        mixture = self._mixture_args(fname, weights, samples_per_epoch, when_exhausted,
                                     order, indices, custom_fields)
        if mixture is not None:
            fname = [s[0] if len(s) == 1 else s for s in mixture[0]]
            names = [n for source in mixture[0] for n in source]
        elif isinstance(fname, (list, tuple)):
            # Shards: several files (or URLs, patterns, s3:// prefixes) read as one.
            names = [os.fspath(f) for f in fname]
            if not names:
                raise ValueError("fname: an empty list of shards")
            fname = list(names)
        else:
            fname = os.fspath(fname)
            names = [fname]
        if page_cache_size is not None:
            page_cache_size = _check_int("page_cache_size", page_cache_size, 1)
            if page_cache_dir is None:
                raise ValueError("page_cache_size needs page_cache_dir")
        self._page_cache = {
            "page_cache_dir": None if page_cache_dir is None else os.fspath(page_cache_dir),
            "page_cache_size": page_cache_size,
        }
        batch_size = _check_int("batch_size", batch_size, 1)
        num_workers = _check_int("num_workers", num_workers, -1)
        if num_workers == 0:
            raise ValueError("num_workers must be -1 (every CPU) or at least 1, got 0")
        batches_ahead = _check_int("batches_ahead", batches_ahead, 1)
        custom_order = self._order_object(order)
        if custom_order is None:
            order = self._order_option(order)
        custom_fields = dict(custom_fields or {})
        for name, cls in custom_fields.items():
            if not (isinstance(cls, type) and issubclass(cls, Field)):
                raise ConfigError(f"custom_fields[{name!r}]: {cls!r} is not a Field class")
        if seed is not None:
            seed = _check_int("seed", seed, 0)
        if indices is not None:
            indices = [int(i) for i in np.asarray(indices).reshape(-1)]
            if any(i < 0 for i in indices):
                raise ValueError("indices must not be negative")
        if compile is None:
            compile = Compiler.is_enabled
        # Whether the seed is the user's: a state dict's seed replaces a drawn or agreed one.
        self._seed_given = seed is not None
        r, w = 0, 1
        if distributed:
            r, w = (rank, world_size) if rank is not None and world_size is not None else _distributed_rank_world()
            if seed is None and w > 1:
                seed = _agreed_seed()
        if not 0 <= r < w:
            raise ValueError(f"rank {r} is not in 0..{w - 1}")

        self.fname = fname
        self.batch_size_ = batch_size
        self.distributed = bool(distributed)
        self.rank, self.world_size = r, w
        self.drop_last = bool(drop_last)
        self.batches_ahead = batches_ahead
        self.os_cache = bool(os_cache)
        self.recompile = bool(recompile)
        # FFCV's Reader, for local files (the tables of a remote or sharded dataset stay
        # in the Rust loader; Python steps there get no metadata).
        self._reader: Optional[Reader] = None
        if mixture is None and len(names) == 1 and _is_local_file(names[0]) \
                and not any(c in names[0] for c in "*?["):
            path = names[0][len("file://"):] if names[0].startswith("file://") else names[0]
            self._reader = Reader(path, custom_fields)
        elif custom_fields:
            raise ConfigError("custom_fields needs one local file (not shards or a URL)")
        self._memory_manager: Optional[MemoryManager] = None
        if self._reader is not None:
            manager = OSCacheManager if self.os_cache else ProcessCacheManager
            self._memory_manager = manager(self._reader)
        self.code: Any = None

        # Custom order: the loader's attributes it may read come first, as in FFCV.
        self._indices = (np.arange(self._num_samples(), dtype=np.uint64) if indices is None
                         else np.asarray(indices, dtype=np.uint64))
        self._custom_order = None
        first_order = None
        if custom_order is not None:
            if seed is None:
                # The order may read it before the Rust loader exists: drawn here, as FFCV
                # draws it (a state's seed still replaces it on resume).
                seed = int(np.random.randint(0, np.iinfo(np.int32).max))
            self.seed_ = seed
            self._custom_order = custom_order(self, **(order_kwargs or {})) \
                if isinstance(custom_order, type) else custom_order
            first_order = self._sample_order(0)
            order = None

        self._views = self._view_list(custom_field_mapper, pipelines)
        fields = self._plan_pipelines(dict(pipelines or {}), custom_fields)
        native_pipelines, self._field_plans = fields
        self._native_args = dict(
            paths=names, batch_size=batch_size, num_workers=num_workers,
            os_cache=bool(os_cache), order="CUSTOM" if order is None else order.value,
            distributed=bool(distributed) and order is not None, rank=r,
            world_size=w if order is not None else 1,
            seed=seed, indices=None if order is None else indices, pipelines=native_pipelines,
            drop_last=bool(drop_last), batches_ahead=batches_ahead, recompile=bool(recompile),
            compile=bool(compile), max_memory=max_memory, prefetch_ahead=prefetch_ahead,
            reader_threads=reader_threads, direct_io=bool(direct_io),
            retain_pages=bool(retain_pages), hold_all_pages=bool(hold_all_pages),
            max_image_pixels=None if max_image_pixels is None
            else _check_int("max_image_pixels", max_image_pixels, 1),
            custom_order=None if first_order is None else [int(i) for i in first_order],
            custom_fields=self._custom_layouts(custom_fields),
            mixture=mixture,
            views=self._views or None,
            **self._page_cache,
        )
        if gpu_stage is not None and not isinstance(gpu_stage, bool):
            raise TypeError(f"gpu_stage must be None, True or False, not {gpu_stage!r}")
        cuda = self._gpu_candidate(gpu_stage)
        self._cuda_device: Optional[int] = None
        self._native = self._build_native(cuda, gpu_stage)
        self._finish_plans(gpu_stage)
        self.order = order if order is not None else self._custom_order
        if indices is None and self._reader is None:
            self._indices = None  # every sample of the (remote or sharded) dataset
        self.traversal_order = (self._custom_order if self._custom_order is not None
                                else ORDER_MAP[order](self))
        Compiler.use_threads(self.num_workers)
        self._generate_code()

    # -- construction helpers ------------------------------------------------------------

    @staticmethod
    def _order_object(order: Any) -> Any:
        """A TraversalOrder subclass or instance given as ``order``, else None."""
        if isinstance(order, type) and issubclass(order, TraversalOrder):
            return order
        if isinstance(order, TraversalOrder):
            return order
        return None

    @staticmethod
    def _order_option(order: Any) -> "OrderOption":
        if isinstance(order, str):
            try:
                return OrderOption[order.upper()]
            except KeyError:
                raise ValueError(f"order {order!r} is not SEQUENTIAL, RANDOM or QUASI_RANDOM") from None
        if isinstance(order, OrderOption):
            return order
        name = getattr(order, "name", None)  # ffcv.loader.OrderOption members
        if name in OrderOption.__members__:
            return OrderOption[name]
        raise TypeError(f"order must be an OrderOption or a TraversalOrder, not {order!r}")

    @staticmethod
    def _mixture_args(fname: Any, weights: Any, samples_per_epoch: Any, when_exhausted: Any,
                      order: Any, indices: Any, custom_fields: Any) -> Optional[Tuple[Any, ...]]:
        """``_native.Loader``'s ``mixture`` argument (``None`` without ``weights``)."""
        if weights is None:
            if samples_per_epoch is not None or when_exhausted != "cycle":
                raise ValueError("samples_per_epoch and when_exhausted need weights")
            return None
        if not isinstance(fname, (list, tuple)) or not fname:
            raise ValueError("weights needs fname to be a non-empty list of sources")
        sources = []
        for entry in fname:
            if isinstance(entry, (list, tuple)):
                sources.append([os.fspath(f) for f in entry])
            else:
                sources.append([os.fspath(entry)])
        weights = [float(w) for w in np.asarray(weights, dtype=np.float64).reshape(-1)]
        if samples_per_epoch is not None:
            samples_per_epoch = _check_int("samples_per_epoch", samples_per_epoch, 1)
        if when_exhausted not in ("cycle", "stop"):
            raise ValueError(f"when_exhausted must be 'cycle' or 'stop', not {when_exhausted!r}")
        if indices is not None:
            raise ConfigError("indices cannot be combined with weights: the mixture decides "
                              "the samples")
        if custom_fields:
            raise ConfigError("custom_fields needs one local file (not a mixture)")
        if isinstance(order, TraversalOrder) or (isinstance(order, type)
                                                 and issubclass(order, TraversalOrder)):
            raise ConfigError("a custom TraversalOrder cannot walk a mixture's sources; use "
                              "an OrderOption")
        return (sources, weights, samples_per_epoch, when_exhausted)

    def _num_samples(self) -> int:
        if self._reader is not None:
            return int(self._reader.num_samples)
        return -1  # known once the Rust loader has opened the dataset

    def _custom_layouts(self, custom_fields: Mapping[str, Any]) -> Optional[Dict[str, Tuple[int, int]]]:
        if not custom_fields or self._reader is None:
            return None
        out = {}
        for name in custom_fields:
            if name in self._reader.handlers:
                dtype = np.dtype(self._reader.handlers[name].metadata_type)
                out[name] = (dtype.itemsize, dtype.alignment)
        return out or None

    def _sample_order(self, epoch: int) -> np.ndarray:
        ids = np.asarray(self._custom_order.sample_order(epoch)).reshape(-1)
        if ids.size and (ids.min() < 0 or (self._reader is not None and ids.max() >= self._reader.num_samples)):
            raise ConfigError(f"{type(self._custom_order).__name__}.sample_order({epoch}) gave "
                              "sample ids outside the file")
        return ids.astype(np.uint64)

    def _field_names(self) -> List[str]:
        if self._reader is not None:
            return list(self._reader.field_names)
        return []

    def _view_list(self, mapper: Optional[Mapping[str, str]],
                   pipelines: Optional[Mapping[str, Any]]) -> List[Tuple[str, str]]:
        """``custom_field_mapper`` (and pipelines given as a ``PipelineSpec`` of another
        field) as ``(name, field)`` pairs in order, a name mapped to a name resolved to the
        file's field. Names and sources are checked here when the file is local, otherwise
        by the Rust loader."""
        pairs: List[Tuple[str, str]] = []
        if mapper is not None:
            if not isinstance(mapper, Mapping):
                raise TypeError(f"custom_field_mapper must be a dict of names, not {mapper!r}")
            pairs = list(mapper.items())
        for output, spec in (pipelines or {}).items():
            if isinstance(spec, PipelineSpec) and isinstance(spec.source, str) \
                    and spec.source != output and all(n != output for n, _ in pairs):
                pairs.append((output, spec.source))
        fields = self._field_names()
        views: List[Tuple[str, str]] = []
        for name, source in pairs:
            if not isinstance(name, str) or not isinstance(source, str):
                raise TypeError(f"custom_field_mapper: {name!r}: {source!r} is not a pair of names")
            field = dict(views).get(source, source)
            if self._reader is not None:
                if name in fields:
                    raise ConfigError(f"custom_field_mapper: view {name!r} has the name of a "
                                      "field of the file; give the view a new name")
                if field not in fields:
                    raise ConfigError(
                        f"custom_field_mapper: view {name!r} maps to {source!r}, which is "
                        f"neither a field of the file (fields: {', '.join(fields)}) nor a "
                        "view added before it")
            views.append((name, field))
        return views

    def _source_field(self, name: str) -> str:
        """The file's field an output decodes (itself, or a view's source)."""
        return dict(getattr(self, "_views", ())).get(name, name)

    def _plan_pipelines(self, pipelines: Dict[str, Any], custom_fields: Mapping[str, Any]) -> Any:
        """The Rust loader's pipelines, and per field what runs where (finished in
        ``_finish_plans`` once the Rust outputs are known)."""
        native: Dict[str, Any] = {}
        plans: Dict[str, Any] = {}
        handlers = self._reader.handlers if self._reader is not None else {}
        custom = set(custom_fields) & set(handlers)
        if self._reader is not None:
            custom |= {n for n, d in zip(self._reader.field_names, self._reader.field_descriptors)
                       if int(d["type_id"]) == 255}
        self._custom_names = custom
        given = {}
        for output, spec in pipelines.items():
            if isinstance(spec, PipelineSpec):
                if spec.source != self._source_field(output) and spec.source != output:
                    raise ConfigError(
                        f"pipeline {output!r}: its source is {spec.source!r}, but "
                        f"custom_field_mapper maps {output!r} to {self._source_field(output)!r}")
                spec = spec.operations()
            elif spec is not None and not isinstance(spec, (list, tuple)):
                raise ValueError(f"the pipeline of {output!r} must be a list of operations, a "
                                 "PipelineSpec or None")
            given[output] = spec
        # Fields written by a class of the user's have no Rust decoder: Python decodes
        # them, with their default pipeline when none is given.
        for name in custom:
            if name not in given:
                given[name] = [handlers[name].get_decoder_class()(), ToTensor()]
        for field, ops in given.items():
            if ops is None:
                native[field] = None
                continue
            ops = [as_operation(op, field) for op in ops]
            if not ops:
                raise ValueError(f"pipeline of field {field!r} is empty; it starts with a decoder")
            source = self._source_field(field)
            handler = handlers.get(source)
            decoder, rest = self._decoder_of(field, ops, handler)
            is_custom = source in custom
            if source != field and (is_custom or not native_builtin(decoder)):
                raise ConfigError(f"view {field!r} of {source!r}: a view's decoder runs in "
                                  "Rust (a built-in decoder of a built-in field type)")
            native_decoder = native_builtin(decoder) and not is_custom
            if not native_decoder and self._reader is None:
                raise ConfigError(f"field {field!r}: {decoder!r} runs in Python, which needs one "
                                  "local file (not shards or a URL)")
            if native_decoder and handler is not None:
                # The decoder's own checks first, so that errors are FFCV's (a TypeError
                # for images of several sizes under SimpleRGBImageDecoder).
                decoder.accept_field(handler)
                column = self._reader.metadata[f"f{self._reader.field_names.index(source)}"]
                decoder.accept_globals(column, None)
                decoder.declare_state_and_memory(INITIAL_STATE)
            native_ops, hand, python = split(field, decoder, rest, native_decoder)
            if native_decoder:
                native[field] = native_ops
            else:
                native[field] = None
            plans[field] = (decoder, hand, python, native_decoder, handler)
        return native, plans

    @staticmethod
    def _decoder_of(field: str, ops: List[Any], handler: Any) -> Tuple[Any, List[Any]]:
        """FFCV's rule: the head is the decoder if it is one of the field's kind, else the
        field's default decoder goes in front."""
        head = ops[0]
        if handler is not None:
            kind = handler.get_decoder_class()
            if isinstance(head, kind):
                return head, ops[1:]
            if native_builtin(head) and getattr(head, "_native_name", "").endswith("Decoder"):
                # A built-in decoder of another kind: the Rust loader says why it refuses.
                return head, ops[1:]
            try:
                return kind(), ops
            except Exception:
                raise ValueError(f"no default decoder can be made for {field!r}: give one "
                                 "in the pipeline") from None
        if getattr(head, "_native_name", None) and str(head._native_name).endswith("Decoder"):
            return head, ops[1:]
        raise TypeError(f"pipeline of field {field!r} must start with a decoder, not {head!r}")

    def _gpu_candidate(self, gpu_stage: Optional[bool]) -> Optional[int]:
        # The GPU stage copies every output, so it is a candidate only when every pipeline
        # given ends on one CUDA device through hand-over steps alone.
        ordinals = set()
        for decoder, hand, python, native_decoder, _ in self._field_plans.values():
            device = None
            for kind, arg in hand.steps:
                if kind == "device":
                    device = _cuda_ordinal(arg[0])
            ordinals.add(device if not python and native_decoder else None)
        cuda = ordinals.pop() if len(ordinals) == 1 else None
        if gpu_stage is False:
            cuda = None
        if cuda is None and gpu_stage is True:
            raise ValueError("gpu_stage=True needs every output to end with ToDevice to one "
                             "CUDA device ('cuda:N')")
        return cuda

    def _build_native(self, cuda: Optional[int], gpu_stage: Optional[bool],
                      resume: Optional[str] = None) -> Any:
        """The native loader, with the GPU stage on ``cuda`` if given (see ``gpu_stage``)."""
        args = dict(self._native_args)
        if resume is not None and not self._seed_given:
            # No seed was given: take the state's (a restarted job draws or agrees on
            # another one, which must not refuse its own checkpoint).
            args["seed"] = None
        self._ensure_native_output(args)
        if cuda is not None:
            try:
                native = _native.Loader(resume=resume, cuda_device=cuda, **args)
                self._cuda_device = cuda
                return native
            except FFCVError as e:
                if gpu_stage is True:
                    raise
                warnings.warn(f"ffcv_rs: the GPU stage is not available ({e}); ToDevice "
                              "falls back to torch's tensor.to(device)", RuntimeWarning,
                              stacklevel=3)
        self._cuda_device = None
        return _native.Loader(resume=resume, **args)

    def _ensure_native_output(self, args: Dict[str, Any]) -> None:
        """Batches come from the Rust loader: when Python decodes or leaves out every
        field, the Rust loader outputs the sample ids of one field (``SampleIdDecoder``),
        not handed out, so that batches and their ids flow."""
        pipelines = args["pipelines"]
        fields = self._field_names()
        self._hidden = None
        if not fields or any(pipelines.get(f, "default") is not None for f in fields):
            return
        field = fields[0]
        args["pipelines"] = dict(pipelines, **{field: [("SampleIdDecoder", {})]})
        self._hidden = field

    def _finish_plans(self, gpu_stage: Optional[bool]) -> None:
        outputs = self._native.outputs()
        names = [name for name, _, _, _ in outputs]
        if self._cuda_device is not None and any(
            n not in self._field_plans for n in names
        ):
            # A field left to its default pipeline stays on the CPU, as in FFCV.
            if gpu_stage is True:
                raise ValueError("gpu_stage=True needs every output to end with ToDevice; "
                                 "fields without a pipeline get FFCV's default (CPU) one")
            self._native = self._build_native(None, None)
            outputs = self._native.outputs()
            names = [name for name, _, _, _ in outputs]
        by_name = {name: (i, shape, typestr) for i, (name, shape, typestr, _) in enumerate(outputs)}
        fields = self._field_names()
        order = fields + [n for n, _ in self._views] if fields else names
        hidden = getattr(self, "_hidden", None)
        self._outputs: List[Tuple[str, Any]] = []
        for field in order:
            if field in by_name and field != hidden:
                self._outputs.append((field, by_name[field]))
            elif field in self._field_plans and not self._field_plans[field][3]:
                self._outputs.append((field, None))
        self.output_names = [name for name, _ in self._outputs]
        self._torch = None
        if any(self._plan_of(name).to_tensor or self._field_plans.get(name, (None, None, []))[2]
               for name in self.output_names):
            self._torch = _torch()
        if self._torch is None and any(
            kind == "device" for name in self.output_names for kind, _ in self._plan_of(name).steps
        ):
            raise ImportError("ToDevice moves torch tensors, and torch is not installed")

    def _plan_of(self, name: str) -> Any:
        from .plan import HandOver

        if name in self._field_plans:
            return self._field_plans[name][1]
        default = HandOver()
        default.to_tensor = True  # FFCV's default pipeline: decoder, ToTensor()
        return default

    def _generate_code(self) -> None:
        """Plans the Python steps of every output and generates their code; ``code`` is
        then ``((output, Rust operations, Python functions), ...)``."""
        plans: List[OutputPlan] = []
        code = []
        for name, native in self._outputs:
            hand = self._plan_of(name)
            decoder, _, python, native_decoder, handler = self._field_plans.get(
                name, (None, hand, [], True, None))
            # Only a field with Python steps needs the reader (compiling it imports numba).
            metadata, memory_read, storage = self._globals(name) if python else (None, None, None)
            steps: List[Step] = []
            if native is None:
                state = INITIAL_STATE
            elif not python:
                state = None  # no Python step looks at it
            else:
                _, shape, typestr = native
                state = hand.state(shape, np.dtype(typestr))
            k = 0
            while k < len(python):
                op = python[k]
                if native_builtin(op) and (k > 0 or native_decoder) and native_run_fits(state):
                    # Built-ins after a user's operation still run natively, as one run.
                    end = k
                    while end < len(python) and native_builtin(python[end]):
                        end += 1
                    step = NativeRun(python[k:end], state, self.batch_size_,
                                     self.num_workers, bool(self._native_args["compile"]))
                    k = end
                else:
                    step = Step(op, state, self.batch_size_, decoder=(k == 0 and not native_decoder),
                                metadata=metadata, memory_read=memory_read, field_handler=handler)
                    step.generate()
                    k += 1
                state = step.state
                steps.append(step)
            index = None if native is None else native[0]
            plans.append(OutputPlan(name, index, hand, steps, metadata, storage, self.batch_size_))
            spec = self._native_args["pipelines"].get(name) if native is not None else None
            if native is not None and spec is None and self._reader is not None:
                # A field left to its default pipeline: the field's default decoder.
                handler = self._reader.handlers[self._source_field(name)]
                spec = [(handler.get_decoder_class()._native_name, {})]
            code.append((name, tuple(n for n, _ in (spec or [])), tuple(s.code for s in steps)))
        self._output_plans = plans
        self._needs_indices = any(p.needs_indices for p in plans)
        self.code = tuple(code)

    def _globals(self, field: str) -> Tuple[Any, Any, Any]:
        """The field's metadata column, the memory reader and its state, for the Python
        steps (``None`` without a local file)."""
        field = self._source_field(field)
        if self._reader is None or field not in self._reader.field_names:
            return None, None, None
        column = self._reader.metadata[f"f{self._reader.field_names.index(field)}"]
        manager = self._memory_manager
        return column, manager.compile_reader(), manager.context.state

    # -- FFCV's attributes -----------------------------------------------------------------

    @property
    def reader(self) -> Reader:
        """The file's :class:`ffcv_rs.reader.Reader` (one local file only)."""
        if self._reader is None:
            raise ConfigError("Loader.reader needs one local file; this loader reads "
                              f"{self.fname!r}")
        return self._reader

    @property
    def memory_manager(self) -> MemoryManager:
        """FFCV's memory manager over :attr:`reader` (for code that reads the file from
        Python; the loader itself reads through the Rust page caches)."""
        if self._memory_manager is None:
            raise ConfigError("Loader.memory_manager needs one local file")
        return self._memory_manager

    @property
    def device(self) -> str:
        """Where batches are staged: ``'cuda:N'`` with the GPU stage, else ``'cpu'``
        (a torch ``ToDevice`` then copies on the consumer's thread)."""
        return "cpu" if self._cuda_device is None else f"cuda:{self._cuda_device}"

    @property
    def batch_size(self) -> int:
        """Samples per batch."""
        return self._native.batch_size

    @property
    def seed(self) -> int:
        """The seed of orders and augmentations (given, or drawn at construction)."""
        native = getattr(self, "_native", None)
        return native.seed if native is not None else self.seed_

    @property
    def num_workers(self) -> int:
        """Decoding threads."""
        return self._native.num_workers

    @property
    def next_epoch(self) -> int:
        """The epoch the next iteration runs."""
        return self._native.next_epoch

    @next_epoch.setter
    def next_epoch(self, epoch: int) -> None:
        self._native.next_epoch = _check_int("next_epoch", epoch, 0)

    @property
    def indices(self) -> Optional[np.ndarray]:
        """The sample ids the loader draws from (``uint64``, before ordering and
        distribution); ``None`` for every sample of a remote or sharded dataset built
        without ``indices``.

        Settable between epochs (ffcv-rs; FFCV ignores a new value): ``loader.indices =
        ids`` (a sequence or array of integers, or ``None`` for every sample) makes every
        later epoch run over ``ids``, in the order a loader built with ``indices=ids`` would
        run it (distributed ranks split the new set the same way, so give every rank the
        same set). Only the order is rebuilt: workers, pipelines and caches stay.
        :meth:`state_dict` records the set's hash, and :meth:`load_state_dict` resumes over
        the current set. Raises :class:`ffcv_rs.ConfigError` while an epoch runs (finish it
        or leave its loop first), for an id out of range and with a custom
        ``TraversalOrder`` (it decides the samples itself: change its own ``indices``);
        ``ValueError`` for a negative id and ``TypeError`` for ids that are not integers.
        """
        return self._indices

    @indices.setter
    def indices(self, value: Optional[Sequence[int]]) -> None:
        if self._custom_order is not None:
            raise ConfigError("set_indices: a custom order decides the samples itself; "
                              "change the order's own indices instead")
        ids: Optional[List[int]] = None
        if value is not None:
            array = np.asarray(value)
            if array.size and not np.issubdtype(array.dtype, np.integer):
                raise TypeError(f"indices must be integers, got an array of {array.dtype}")
            ids = [int(i) for i in array.reshape(-1)]
            if any(i < 0 for i in ids):
                raise ValueError("indices must not be negative")
        self._native.set_indices(ids)
        # Later rebuilds (load_state_dict, filter) start from the current set.
        self._args["indices"] = ids
        self._native_args["indices"] = ids
        if ids is not None:
            self._indices = np.asarray(ids, dtype=np.uint64)
        elif self._reader is not None:
            self._indices = np.arange(self._num_samples(), dtype=np.uint64)
        else:
            self._indices = None
        self.traversal_order = ORDER_MAP[self.order](self)

    @property
    def first_traversal_order(self) -> np.ndarray:
        """Epoch 0's sample order (this rank's share)."""
        return np.asarray(self.order_of(0), dtype=np.uint64)

    def __len__(self) -> int:
        return len(self._native)

    def __iter__(self) -> EpochIterator:
        Compiler.use_threads(self.num_workers)
        if self._custom_order is not None:
            epoch = self.next_epoch
            ids = self._sample_order(epoch)
            self._native.push_order(epoch, [int(i) for i in ids])
            self._order_hashes = getattr(self, "_order_hashes", {})
            self._order_hashes[epoch] = _order_hash(ids)
        if self.recompile and self.code is not None:
            self._generate_code()
        return EpochIterator(self)

    def filter(self, field_name: str, condition: Callable[[Any], bool]) -> "Loader":
        """A loader over the samples whose ``field_name`` value (each sample's output of
        its pipeline) satisfies ``condition``; the other arguments are this loader's.
        FFCV's rule: the field is read once, in sequential order."""
        args = dict(self._args)
        pipelines = {name: None for name in self._field_names() or self.output_names}
        # Views are outputs too: left out of the probe unless one is the field filtered.
        pipelines.update({name: None for name, _ in self._views})
        given = dict(args.get("pipelines") or {})
        if field_name in given:
            pipelines[field_name] = given[field_name]
        else:
            pipelines.pop(field_name, None)
        probe_args = dict(args, pipelines=pipelines, order=OrderOption.SEQUENTIAL,
                          drop_last=False, distributed=False, rank=None, world_size=None)
        probe = Loader(**probe_args)
        ids = probe.order_of(0)
        selected = []
        position = 0
        for (batch,) in probe:
            for sample in batch:
                if condition(sample):
                    selected.append(ids[position])
                position += 1
        return Loader(**dict(args, indices=np.asarray(selected, dtype=np.int64)))

    def stats(self) -> Dict[str, Any]:
        """Counters summed over every epoch: batches, samples, bytes, and seconds spent
        waiting for pages, decoding, waiting for a free slot (the consumer was behind) and
        waiting for a batch (``consumer_wait``: the loader was behind)."""
        return self._native.stats()

    def order_of(self, epoch: int) -> List[int]:
        """The sample ids of ``epoch`` in the order this rank visits them."""
        if self._custom_order is not None:
            return [int(i) for i in self._sample_order(epoch)]
        return self._native.order(epoch)

    def live_threads(self) -> int:
        """Producer and page-reader threads alive now (0 between epochs)."""
        return self._native.live_threads()

    def state_dict(self) -> Dict[str, Any]:
        """The loader's position, for a training checkpoint (FFCV has none): after the
        batches the running epoch has handed out, or the start of the next epoch between
        epochs. A plain dict (``{"ffcv_rs_loader_state": 1, "state": ...}``, the second
        entry being ffcv-rs's ``LoaderState`` as JSON data) that pickles and goes through
        ``json`` unchanged. Any one rank's dict resumes every rank, with the same or another
        world size (``docs/resume.md``). With a custom order it also records the SHA-256 of
        the order the saved epoch ran (``custom_order_sha256``)."""
        state = json.loads(self._native.state_json())
        out = {_STATE_KEY: _STATE_DICT_VERSION, "state": state}
        if self._custom_order is not None:
            epoch = int(state["epoch"])
            hashes = getattr(self, "_order_hashes", {})
            out["custom_order_sha256"] = hashes.get(epoch) or _order_hash(self._sample_order(epoch))
        return out

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s dict: the next iteration runs the rest of the
        saved epoch (byte for byte the batches an uninterrupted run would have given, random
        augmentations included, with the same world size), later epochs as usual. The
        loader is rebuilt with its own arguments; a state of another file, order, seed (one
        given to the constructor; a drawn or agreed seed gives way to the state's), batch
        size, ``drop_last``, index list, or a custom order that now gives another order for
        the saved epoch, raises :class:`ffcv_rs.ConfigError`."""
        if not isinstance(state, dict):
            raise TypeError(f"load_state_dict takes a dict, got {type(state).__name__}")
        version = state.get(_STATE_KEY)
        if version != _STATE_DICT_VERSION or "state" not in state:
            raise ValueError(
                f"not an ffcv_rs loader state dict (expected keys {_STATE_KEY!r} = "
                f"{_STATE_DICT_VERSION} and 'state'; got {sorted(state)!r})"
            )
        if self._custom_order is not None:
            epoch = int(state["state"]["epoch"])
            ids = self._sample_order(epoch)
            if state.get("custom_order_sha256") != _order_hash(ids):
                raise ConfigError(
                    f"the state was saved with another order for epoch {epoch}: "
                    f"{type(self._custom_order).__name__}.sample_order({epoch}) now gives a "
                    "different one (or the state has none recorded)")
            self._native_args["custom_order"] = [int(i) for i in self._sample_order(0)]
        text = json.dumps(state["state"])
        # The old native loader's running epoch (if any) ends when its iterator goes. The
        # device is the one in use (no second fallback warning).
        cuda = self._cuda_device
        self._native = self._build_native(cuda, None if cuda is None else True, text)
        if self._custom_order is not None:
            epoch = int(state["state"]["epoch"])
            self._native.push_order(epoch, [int(i) for i in self._sample_order(epoch)])
