"""FFCV's ``Loader`` (``ffcv.loader``) over the Rust loader.

``Loader(fname, batch_size, ...)`` takes FFCV's arguments; iterating it runs one epoch
and yields, per batch, a tuple with one entry per field that has a pipeline (in the
file's field order). Entries share the loader's batch memory: nothing is copied, and the
batch's slot is reused only once every array or tensor viewing it has been freed.
"""

import enum
import json
import os
import sys
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from . import _native
from .errors import FFCVError
from .fields.decoders import Decoder
from .transforms import (
    Convert,
    NormalizeImage,
    Operation,
    Squeeze,
    ToDevice,
    ToTensor,
    ToTorchImage,
)

__all__ = ["Loader", "OrderOption"]


# The outer format of state_dict's dict (the inner LoaderState has its own version).
_STATE_KEY = "ffcv_rs_loader_state"
_STATE_DICT_VERSION = 1


class OrderOption(enum.Enum):
    """The sample order of each epoch (FFCV's names)."""

    SEQUENTIAL = "SEQUENTIAL"
    RANDOM = "RANDOM"
    QUASI_RANDOM = "QUASI_RANDOM"


def _torch():
    """torch, imported on first need, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


class _Plan:
    """How one output goes from the native view to what the user gets."""

    def __init__(self) -> None:
        self.native: List[Tuple[str, Dict[str, Any]]] = []
        self.to_tensor = False
        self.chw = False
        # (kind, argument) steps run on the consumer's thread, in order.
        self.post: List[Tuple[str, Any]] = []

    def make(self, view: Any, torch: Any) -> Any:
        if self.to_tensor and torch is not None:
            x = torch.from_dlpack(view)
        else:
            x = np.asarray(view)
        for kind, arg in self.post:
            if kind == "permute":
                x = x.permute(0, 3, 1, 2) if hasattr(x, "permute") else np.transpose(x, (0, 3, 1, 2))
            elif kind == "device":
                device, non_blocking = arg
                if hasattr(x, "to"):
                    x = x.to(device, non_blocking=non_blocking)
            elif kind == "squeeze":
                x = x.squeeze(*arg) if hasattr(x, "permute") else np.squeeze(x, axis=arg)
            elif kind == "convert":
                x = _convert(x, arg)
            else:
                x = arg(x)
        return x


def _convert(x: Any, target: Any) -> Any:
    if hasattr(x, "permute"):
        import torch

        if isinstance(target, torch.dtype):
            return x.to(target)
        return torch.from_numpy(x.numpy().astype(target))
    return x.astype(target)


def _plan(field: str, pipeline: Sequence[Any]) -> _Plan:
    """Splits an FFCV pipeline into the native part (decoder and built-in transforms) and
    the consumer-side steps."""
    if not pipeline:
        raise ValueError(f"pipeline of field {field!r} is empty; it starts with a decoder")
    plan = _Plan()
    decoder = pipeline[0]
    if isinstance(decoder, type) and issubclass(decoder, Decoder):
        decoder = decoder()
    if not isinstance(decoder, Decoder):
        raise TypeError(f"pipeline of field {field!r} must start with a decoder, not {decoder!r}")
    plan.native.append((decoder._native_name, decoder._native_params()))
    seen_callable = False
    for op in pipeline[1:]:
        if isinstance(op, type) and issubclass(op, Operation):
            op = op()
        if isinstance(op, ToTensor):
            plan.to_tensor = True
        elif isinstance(op, ToTorchImage):
            if op.channels_last:
                plan.post.append(("permute", None))
            else:
                plan.chw = True
        elif isinstance(op, ToDevice):
            if not plan.to_tensor:
                raise ValueError(f"field {field!r}: ToDevice needs a ToTensor before it")
            plan.post.append(("device", (op.device, op.non_blocking)))
        elif isinstance(op, Operation) and op._native_name is not None and not seen_callable:
            # Built-in transforms are layout-blind per image, so running them before the
            # hand-over steps above (tensor view, CHW, device) gives FFCV's results.
            if plan.chw and not isinstance(op, (NormalizeImage, Convert, Squeeze)):
                raise ValueError(
                    f"field {field!r}: {op!r} cannot follow ToTorchImage(channels_last=False)"
                )
            plan.native.append((op._native_name, op._native_params()))
        elif isinstance(op, Squeeze):
            plan.post.append(("squeeze", op.dims))
        elif isinstance(op, Convert):
            plan.post.append(("convert", op.target_dtype))
        elif isinstance(op, Operation):
            raise ValueError(
                f"field {field!r}: built-in transform {op!r} cannot follow a Python callable "
                "(callables run last, on the consumer's thread)"
            )
        elif callable(op):
            seen_callable = True
            plan.post.append(("call", op))
        else:
            raise TypeError(f"field {field!r}: {op!r} is neither a transform nor callable")
    if plan.chw:
        plan.native.append(("ToCHW", {}))
    return plan


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


def _plan_ordinal(plan: "_Plan") -> Optional[int]:
    """The CUDA ordinal of a plan's (last) ``ToDevice``, if it has one."""
    ordinal = None
    for kind, arg in plan.post:
        if kind == "device":
            ordinal = _cuda_ordinal(arg[0])
    return ordinal


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
        import hashlib

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


class Loader:
    """FFCV's loader over one ``.beton`` file, or several read as one.

    ``fname`` is a path, a ``file://``, ``s3://`` or ``http(s)://`` URL, or a list of them:
    shards with the same fields, read as one dataset whose sample ids are the
    concatenation in the order given (an entry may be a glob pattern or an ``s3://``
    prefix, which expand sorted; see ``docs/remote.md``).

    The positional and keyword arguments are FFCV's. ``pipelines`` maps field names to a
    list (a decoder, then transforms) or ``None`` to leave the field out; fields without
    an entry get their default decoder and ``ToTensor``, as in FFCV. ``custom_fields`` is
    accepted for compatibility and must be empty.

    Keyword-only knobs of ffcv-rs: ``max_memory`` (bytes of page slots the process cache
    may use), ``compile`` (False interprets pipelines), the process-cache knobs
    ``prefetch_ahead``, ``reader_threads``, ``direct_io``, ``retain_pages`` and
    ``hold_all_pages``, ``max_image_pixels`` (the largest decoded image area a sample may
    claim; default 134,217,728), ``rank`` / ``world_size`` to set the distributed share by
    hand, and ``page_cache_dir`` / ``page_cache_size`` (bytes, default 10 GiB) to keep a
    remote dataset's pages on the local disk for later epochs and processes.

    ``gpu_stage``: when every output ends with ``ToDevice`` to one CUDA device, the copy is
    the Rust loader's GPU stage (gpu-stage: pinned slots, one stream per slot) and batches
    are CUDA tensors exported through DLPack. ``None`` (default) uses it when it can be
    built and falls back, with a warning, to torch's ``tensor.to(device)`` otherwise;
    ``True`` requires it (its error is raised, e.g. without a CUDA driver); ``False``
    always uses torch's copy.
    """

    def __init__(
        self,
        fname: Any,
        batch_size: int,
        num_workers: int = -1,
        os_cache: bool = True,
        order: Any = OrderOption.SEQUENTIAL,
        distributed: bool = False,
        seed: Optional[int] = None,
        indices: Optional[Sequence[int]] = None,
        pipelines: Optional[Dict[str, Optional[Sequence[Any]]]] = None,
        custom_fields: Optional[Dict[str, Any]] = None,
        drop_last: bool = True,
        batches_ahead: int = 3,
        recompile: bool = False,
        *,
        max_memory: Optional[int] = None,
        compile: bool = True,
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
    ):
        if isinstance(fname, (list, tuple)):
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
        if isinstance(order, str):
            try:
                order = OrderOption[order.upper()]
            except KeyError:
                raise ValueError(f"order {order!r} is not SEQUENTIAL, RANDOM or QUASI_RANDOM") from None
        if not isinstance(order, OrderOption):
            name = getattr(order, "name", None)  # ffcv.loader.OrderOption members
            if name in OrderOption.__members__:
                order = OrderOption[name]
            else:
                raise TypeError(f"order must be an OrderOption, not {order!r}")
        if custom_fields:
            raise ValueError(
                "custom_fields: ffcv_rs has no Python-defined fields; give such a field a "
                "pipeline with a built-in decoder or leave it out with pipelines={name: None}"
            )
        if seed is not None:
            seed = _check_int("seed", seed, 0)
        if indices is not None:
            indices = [int(i) for i in np.asarray(indices).reshape(-1)]
            if any(i < 0 for i in indices):
                raise ValueError("indices must not be negative")
        # Whether the seed is the user's: a state dict's seed replaces a drawn or agreed one.
        self._seed_given = seed is not None
        r, w = 0, 1
        if distributed:
            r, w = (rank, world_size) if rank is not None and world_size is not None else _distributed_rank_world()
            if seed is None and w > 1:
                seed = _agreed_seed()
        if not 0 <= r < w:
            raise ValueError(f"rank {r} is not in 0..{w - 1}")

        self._plans: Dict[str, _Plan] = {}
        native_pipelines: Dict[str, Any] = {}
        for field, pipeline in (pipelines or {}).items():
            if pipeline is None:
                native_pipelines[field] = None
                continue
            plan = _plan(field, list(pipeline))
            self._plans[field] = plan
            native_pipelines[field] = plan.native

        # Kept so that load_state_dict can rebuild the native loader with a resume state
        # (the Rust LoaderBuilder takes the state as one more knob).
        self._native_args = (
            names, batch_size, num_workers, bool(os_cache), order.value, bool(distributed), r, w,
            seed, indices, native_pipelines, bool(drop_last), batches_ahead, bool(recompile),
            bool(compile), max_memory, prefetch_ahead, reader_threads, bool(direct_io),
            bool(retain_pages), bool(hold_all_pages),
            None if max_image_pixels is None else _check_int("max_image_pixels", max_image_pixels, 1),
        )
        if gpu_stage is not None and not isinstance(gpu_stage, bool):
            raise TypeError(f"gpu_stage must be None, True or False, not {gpu_stage!r}")
        # The GPU stage copies every output, so it is only a candidate when every pipeline
        # given ends on the same CUDA device (checked again against the outputs below).
        ordinals = {_plan_ordinal(p) for p in self._plans.values()}
        cuda = ordinals.pop() if len(ordinals) == 1 else None
        if gpu_stage is False:
            cuda = None
        if cuda is None and gpu_stage is True:
            raise ValueError("gpu_stage=True needs every output to end with ToDevice to one "
                             "CUDA device ('cuda:N')")
        self._cuda_device: Optional[int] = None
        self._native = self._build_native(cuda, gpu_stage)
        self.fname = fname
        self.order = order
        self.distributed = bool(distributed)
        self.rank, self.world_size = r, w
        self.drop_last = bool(drop_last)
        self.batches_ahead = batches_ahead
        self.os_cache = bool(os_cache)
        self.indices = indices
        outputs = self._native.outputs()
        self.output_names = [name for name, _, _, _ in outputs]
        default = _Plan()
        default.to_tensor = True  # FFCV's default pipeline: decoder, ToTensor()
        self._output_plans = [self._plans.get(name, default) for name in self.output_names]
        if self._cuda_device is not None and any(
            _plan_ordinal(p) != self._cuda_device for p in self._output_plans
        ):
            # A field left to its default pipeline stays on the CPU, as in FFCV.
            if gpu_stage is True:
                raise ValueError("gpu_stage=True needs every output to end with ToDevice; "
                                 "fields without a pipeline get FFCV's default (CPU) one")
            self._native = self._build_native(None, None)
        self._torch = None
        if any(p.to_tensor for p in self._output_plans):
            self._torch = _torch()
            if self._torch is None and any(
                kind == "device" for p in self._output_plans for kind, _ in p.post
            ):
                raise ImportError("ToDevice moves torch tensors, and torch is not installed")

    def _build_native(self, cuda: Optional[int], gpu_stage: Optional[bool],
                      resume: Optional[str] = None) -> Any:
        """The native loader, with the GPU stage on ``cuda`` if given (see ``gpu_stage``)."""
        args = list(self._native_args)
        if resume is not None and not self._seed_given:
            # No seed was given: take the state's (a restarted job draws or agrees on
            # another one, which must not refuse its own checkpoint).
            args[8] = None
        if cuda is not None:
            try:
                native = _native.Loader(*args, resume, cuda_device=cuda, **self._page_cache)
                self._cuda_device = cuda
                return native
            except FFCVError as e:
                if gpu_stage is True:
                    raise
                warnings.warn(f"ffcv_rs: the GPU stage is not available ({e}); ToDevice "
                              "falls back to torch's tensor.to(device)", RuntimeWarning,
                              stacklevel=3)
        self._cuda_device = None
        return _native.Loader(*args, resume, **self._page_cache)

    @property
    def device(self) -> str:
        """Where batches are staged: ``'cuda:N'`` with the GPU stage, else ``'cpu'``
        (a torch ``ToDevice`` then copies on the consumer's thread)."""
        return "cpu" if self._cuda_device is None else f"cuda:{self._cuda_device}"

    # FFCV's attributes.
    @property
    def batch_size(self) -> int:
        """Samples per batch."""
        return self._native.batch_size

    @property
    def seed(self) -> int:
        """The seed of orders and augmentations (given, or drawn at construction)."""
        return self._native.seed

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

    def __len__(self) -> int:
        return len(self._native)

    def __iter__(self) -> "_EpochIterator":
        return _EpochIterator(self)

    def stats(self) -> Dict[str, Any]:
        """Counters summed over every epoch: batches, samples, bytes, and seconds spent
        waiting for pages, decoding, waiting for a free slot (the consumer was behind) and
        waiting for a batch (``consumer_wait``: the loader was behind)."""
        return self._native.stats()

    def order_of(self, epoch: int) -> List[int]:
        """The sample ids of ``epoch`` in the order this rank visits them."""
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
        world size (``docs/resume.md``)."""
        return {
            _STATE_KEY: _STATE_DICT_VERSION,
            "state": json.loads(self._native.state_json()),
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s dict: the next iteration runs the rest of the
        saved epoch (byte for byte the batches an uninterrupted run would have given, random
        augmentations included, with the same world size), later epochs as usual. The
        loader is rebuilt with its own arguments; a state of another file, order, seed (one
        given to the constructor; a drawn or agreed seed gives way to the state's), batch
        size, ``drop_last`` or index list raises :class:`ffcv_rs.ConfigError`."""
        if not isinstance(state, dict):
            raise TypeError(f"load_state_dict takes a dict, got {type(state).__name__}")
        version = state.get(_STATE_KEY)
        if version != _STATE_DICT_VERSION or "state" not in state:
            raise ValueError(
                f"not an ffcv_rs loader state dict (expected keys {_STATE_KEY!r} = "
                f"{_STATE_DICT_VERSION} and 'state'; got {sorted(state)!r})"
            )
        text = json.dumps(state["state"])
        # The old native loader's running epoch (if any) ends when its iterator goes. The
        # device is the one in use (no second fallback warning).
        cuda = self._cuda_device
        self._native = self._build_native(cuda, None if cuda is None else True, text)


class _EpochIterator:
    """One epoch. Starting another epoch (``iter(loader)`` again) ends this one; freeing
    the iterator (the end of a ``for`` loop, an exception in its body) stops the epoch and
    joins its threads."""

    def __init__(self, loader: Loader):
        self._loader = loader
        self._native = loader._native
        self._plans = loader._output_plans
        self._torch = loader._torch
        self._id = self._native.start_epoch()

    def __iter__(self) -> "_EpochIterator":
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def __next__(self) -> Tuple[Any, ...]:
        views = self._native.next_batch(self._id)
        if views is None:
            raise StopIteration
        torch = self._torch
        return tuple(plan.make(view, torch) for plan, view in zip(self._plans, views))

    def close(self) -> None:
        """Stops the epoch now (held batches stay valid)."""
        self._native.stop_epoch(self._id)

    def __del__(self) -> None:
        native = getattr(self, "_native", None)
        if native is not None:
            native.stop_epoch(self._id)
