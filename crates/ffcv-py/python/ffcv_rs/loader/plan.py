"""How one output's pipeline is split between the Rust loader and Python.

The Rust part is the decoder and the built-in transforms up to the first operation that
is not one of them (an operation of the user's, a transform ffcv_rs runs in Python, a
callable). Hand-over steps there (``ToTensor``, ``ToTorchImage``, ``ToDevice``,
``Squeeze(dims)``, ``View``, a Python-side ``Convert``) only change how the batch is
handed over. Everything from the first foreign operation on runs through FFCV's
``Operation`` protocol on the consumer's thread: its ``declare_state_and_memory`` gives
the state and the buffer it needs, its ``generate_code()`` the batch function, compiled
by ``Compiler.compile`` when the operation's output is in compiled (NumPy) mode.

Output buffers come from :class:`BufferPool`: one per batch in flight, reused once
nothing refers to it any more, so a batch the user holds is never overwritten and the
steady state allocates nothing.
"""

import sys
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._compat import is_torch_dtype, numpy_dtype, torch_dtype
from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from ..transforms import (
    Convert, NormalizeImage, Squeeze, ToDevice, ToTensor, ToTorchImage, View,
)
from ..transforms.module import ModuleWrapper


def native_builtin(op: Any) -> bool:
    """Whether ``op`` is a built-in the Rust loader runs: its class (or an unchanged
    subclass of it) names a native operation and keeps the built-in's protocol methods
    (and, for the crop decoders, the crop rule FFCV lets subclasses replace)."""
    name = getattr(op, "_native_name", None)
    if not name:
        return False
    cls = type(op)
    owner = next((c for c in cls.__mro__ if "_native_name" in vars(c) and vars(c)["_native_name"]), None)
    if owner is None or not owner.__module__.startswith("ffcv_rs."):
        return False
    return all(getattr(cls, m, None) is getattr(owner, m, None)
               for m in ("generate_code", "declare_state_and_memory", "get_crop_generator"))


def as_operation(op: Any, field: str) -> Any:
    """A pipeline entry as an operation instance: classes are instantiated, torch modules
    and other callables wrapped in ``ModuleWrapper``."""
    if isinstance(op, type) and issubclass(op, Operation):
        op = op()
    if isinstance(op, Operation):
        return op
    if callable(op):
        return ModuleWrapper(op)
    raise TypeError(f"field {field!r}: {op!r} is neither an operation nor callable")


class HandOver:
    """What happens to the Rust loader's view of an output before the Python steps: a
    torch tensor or NumPy array over the same memory, then permutes, device copies,
    squeezes, views and conversions, in the pipeline's order."""

    def __init__(self) -> None:
        self.to_tensor = False
        self.chw = False
        self.steps: List[Tuple[str, Any]] = []

    def make(self, view: Any, torch: Any) -> Any:
        if self.to_tensor and torch is not None:
            x = torch.from_dlpack(view)
        else:
            x = np.asarray(view)
        return self.finish(x)

    def converter(self, torch: Any) -> Tuple[int, Callable[[Any], Any]]:
        """``(how, convert)`` for ``_native.Loader.next_outputs``: what the Rust loader
        passes (``HAND_CAPSULE``: a DLPack capsule, ``HAND_VIEW``: the view) and the
        callable that turns it into what :meth:`make` returns for the same view."""
        if self.to_tensor and torch is not None:
            how, base = HAND_CAPSULE, from_capsule(torch)
        else:
            how, base = HAND_VIEW, np.asarray
        if not self.steps:
            return how, base
        return how, lambda x: self.finish(base(x))

    def finish(self, x: Any) -> Any:
        """The hand-over steps (permutes, device copies, squeezes, conversions, views) on
        the tensor or array of the Rust loader's output."""
        for kind, arg in self.steps:
            if kind == "permute":
                x = x.permute(0, 3, 1, 2) if hasattr(x, "permute") else np.transpose(x, (0, 3, 1, 2))
            elif kind == "device":
                device, non_blocking = arg
                if hasattr(x, "to"):
                    x = x.to(device, non_blocking=non_blocking)
            elif kind == "squeeze":
                x = x.squeeze(*arg) if hasattr(x, "permute") else np.squeeze(x, axis=arg)
            elif kind == "convert":
                x = convert(x, arg)
            elif kind == "view":
                x = x.view(torch_dtype(arg)) if hasattr(x, "permute") else x.view(numpy_dtype(arg))
        return x

    def state(self, shape: Sequence[int], dtype: Any) -> State:
        """The state the Python steps start from, given the Rust output's row shape and
        dtype."""
        state = State(jit_mode=True, device="cpu", shape=tuple(shape), dtype=np.dtype(dtype))
        if self.to_tensor:
            state = replace(state, jit_mode=False, dtype=torch_dtype(state.dtype))
        for kind, arg in self.steps:
            if kind == "permute" and len(state.shape) == 3:
                h, w, c = state.shape
                state = replace(state, shape=(c, h, w))
            elif kind == "device":
                state = replace(state, device=arg[0])
            elif kind == "squeeze":
                state = replace(state, shape=tuple(d for d in state.shape if d != 1))
            elif kind in ("convert", "view"):
                dtype = arg if not state.jit_mode or not is_torch_dtype(arg) else numpy_dtype(arg)
                state = replace(state, dtype=dtype, jit_mode=state.jit_mode and kind == "convert")
        return state


#: How ``_native.Loader.next_outputs`` passes an output to its converter.
HAND_CAPSULE, HAND_VIEW = 0, 1


def from_capsule(torch: Any) -> Callable[[Any], Any]:
    """torch's function from a DLPack capsule to a tensor over the same memory: the C
    function behind ``torch.from_dlpack`` where torch has it (it skips the Python wrapper,
    which asks the producer for its device and capsule), else ``torch.utils.dlpack``'s,
    which takes a capsule too."""
    fn = getattr(getattr(torch, "_C", None), "_from_dlpack", None)
    return fn if callable(fn) else torch.utils.dlpack.from_dlpack


def convert(x: Any, target: Any) -> Any:
    if hasattr(x, "permute"):
        import torch

        if isinstance(target, torch.dtype):
            return x.to(target)
        return torch.from_numpy(x.numpy().astype(target))
    return x.astype(numpy_dtype(target))


def split(field: str, decoder: Any, ops: Sequence[Any], native_decoder: bool
          ) -> Tuple[List[Tuple[str, Dict[str, Any]]], HandOver, List[Any]]:
    """``(native ops, hand-over, Python operations)`` of a pipeline (see the module
    docs). Without a native decoder everything is Python."""
    hand = HandOver()
    if not native_decoder:
        return [], hand, [decoder, *ops]
    native = [(decoder._native_name, decoder._native_params())]
    python: List[Any] = []
    for k, op in enumerate(ops):
        if python:
            python.append(op)
        elif type(op) is View and not _native_follows(ops[k + 1:]):
            # A view of the handed-over batch costs nothing; the native View copies.
            hand.steps.append(("view", op.target_dtype))
        elif isinstance(op, ToTensor) and type(op) is ToTensor:
            hand.to_tensor = True
        elif isinstance(op, ToTorchImage) and type(op) is ToTorchImage:
            if op.channels_last:
                hand.steps.append(("permute", None))
            else:
                hand.chw = True
        elif isinstance(op, ToDevice) and type(op) is ToDevice:
            if not hand.to_tensor:
                raise ValueError(f"field {field!r}: ToDevice needs a ToTensor before it")
            hand.steps.append(("device", (op.device, op.non_blocking)))
        elif native_builtin(op):
            # Built-in transforms are layout-blind per image, so running them before the
            # hand-over steps above (tensor view, CHW, device) gives FFCV's results.
            if hand.chw and not isinstance(op, (NormalizeImage, Convert, Squeeze)):
                raise ValueError(
                    f"field {field!r}: {op!r} cannot follow ToTorchImage(channels_last=False)")
            if type(op) is View and any(kind in ("convert", "view") for kind, _ in hand.steps):
                # The native View would run before the hand-over's conversion.
                raise ValueError(f"field {field!r}: {op!r} after a conversion of the handed-over "
                                 "batch cannot be followed by built-in transforms")
            native.append((op._native_name, op._native_params()))
        elif type(op) is Squeeze:
            hand.steps.append(("squeeze", op.dims))
        elif type(op) is Convert:
            hand.steps.append(("convert", op.target_dtype))
        else:
            python.append(op)
    if hand.chw:
        native.append(("ToCHW", {}))
    return native, hand, python


#: Operations that only change how the batch is handed over (see :func:`split`).
_HAND_OVER = (ToTensor, ToTorchImage, ToDevice, Squeeze, Convert, View)


def _native_follows(ops: Sequence[Any]) -> bool:
    """Whether a built-in that runs in the Rust loader comes in ``ops`` before the first
    operation that runs in Python: a ``View`` before it must then run there too."""
    for op in ops:
        if native_builtin(op) and type(op) not in _HAND_OVER:
            return True
        if not (native_builtin(op) or type(op) in _HAND_OVER):
            return False
    return False


def _refs(buffer: Any) -> int:
    """How many references ``buffer`` has: storage users for a torch tensor (its views
    share the storage, not the Python object), Python references for an array."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(buffer, torch.Tensor):
        return torch._C._storage_Use_Count(buffer.untyped_storage()._cdata)
    return sys.getrefcount(buffer)


def _allocate(query: AllocationQuery, batch_size: int) -> Any:
    shape = (batch_size, *(int(d) for d in query.shape))
    if is_torch_dtype(query.dtype) or query.device is not None and str(query.device) != "cpu":
        import torch

        return torch.empty(shape, dtype=torch_dtype(query.dtype),
                           device=query.device if query.device is not None else "cpu")
    return np.empty(shape, dtype=numpy_dtype(query.dtype))


class BufferPool:
    """Output buffers of one ``AllocationQuery``, ``batch_size`` samples each: a buffer
    is handed out again only when no array or tensor refers to it any more."""

    def __init__(self, query: AllocationQuery, batch_size: int):
        self.query = query
        self.batch_size = batch_size
        self.buffers: List[List[Any]] = []

    def take(self, count: int) -> Any:
        for entry in self.buffers:
            if _refs(entry[0]) <= entry[1]:
                return entry[0][:count]
        entry = [_allocate(self.query, self.batch_size), 0]
        self.buffers.append(entry)
        # The count when only the pool holds it, measured the way the loop above does.
        entry[1] = _refs(entry[0])
        return entry[0][:count]


def _pools(query: Any, batch_size: int) -> Any:
    if query is None:
        return None
    if isinstance(query, AllocationQuery):
        return BufferPool(query, batch_size)
    return tuple(BufferPool(q, batch_size) for q in query)


def _take(pools: Any, count: int) -> Any:
    if pools is None:
        return None
    if isinstance(pools, BufferPool):
        return pools.take(count)
    return tuple(p.take(count) for p in pools)


class Step:
    """One operation of the Python part: its declared state and buffers, its code."""

    def __init__(self, op: Any, state: State, batch_size: int, decoder: bool,
                 metadata: Any, memory_read: Optional[Callable], field_handler: Any):
        self.op = op
        self.decoder = decoder
        if field_handler is not None:
            op.accept_field(field_handler)
        op.accept_globals(metadata, memory_read)
        self.state, query = op.declare_state_and_memory(state)
        shared_query = op.declare_shared_memory(state)
        self.pools = _pools(query, batch_size)
        self.shared = None if shared_query is None else _take(_pools(shared_query, 1), 1)
        self.code: Optional[Callable] = None
        self.shared_code: Optional[Callable] = None
        self.with_indices = False

    def generate(self) -> None:
        """(Re)generates and compiles the operation's code (each epoch with
        ``recompile=True``)."""
        raw = self.op.generate_code()
        self.with_indices = bool(getattr(raw, "with_indices", False))
        self.code = Compiler.compile(raw) if self.state.jit_mode else raw
        shared = self.op.generate_code_for_shared_state()
        self.shared_code = None if shared is None else (
            Compiler.compile(shared) if self.state.jit_mode else shared)

    @property
    def writes_input(self) -> bool:
        """Whether the code may write into its input (FFCV's operations may; ffcv_rs's
        batch-level built-ins only read it)."""
        return not getattr(self.code, "_ffcv_rs_context", False)

    def run(self, x: Any, indices: Any, ctx: "RunContext") -> Any:
        dst = _take(self.pools, len(indices) if indices is not None else len(x))
        if self.decoder:
            return self.code(indices, dst, ctx.metadata, ctx.storage)
        args = [x, dst]
        if self.with_indices:
            args.append(indices)
        if self.shared_code is not None:
            self.shared_code(self.shared)
            args.append(self.shared)
        if getattr(self.code, "_ffcv_rs_context", False):
            # ffcv_rs's batch-level built-ins (mixup) draw from the loader's seed and epoch.
            return self.code(*args, context=(ctx.seed, ctx.epoch))
        return self.code(*args)


NATIVE_DTYPES = ("uint8", "int32", "int64", "float16", "float32", "float64")


def native_run_fits(state: Optional[State]) -> bool:
    """Whether built-ins can run natively on a batch of this state: NumPy arrays (compiled
    mode) of a known shape and an element type pipeline-jit has."""
    return (state is not None and state.jit_mode and state.shape is not None
            and not is_torch_dtype(state.dtype) and np.dtype(state.dtype).name in NATIVE_DTYPES)


class RunContext:
    """What the steps of one batch share: the field's metadata and storage (for decoders
    in Python) and the loader's seed and epoch (for native runs' draws)."""

    def __init__(self, metadata: Any, storage: Any, seed: int, epoch: int):
        self.metadata, self.storage, self.seed, self.epoch = metadata, storage, seed, epoch


class NativeRun:
    """Consecutive built-in transforms after an operation of the user's, run natively by
    ``_native.BatchTransforms`` on the whole batch (the loader's JIT or interpreter, draws
    from (seed, epoch, sample, position), the GIL released), into reused buffers."""

    with_indices = True  # the draws follow the samples' ids
    decoder = False
    writes_input = False  # reads the batch, writes its own buffers

    def __init__(self, ops: Sequence[Any], state: State, batch_size: int, num_workers: int,
                 compile: bool):
        from .. import _native

        self.ops = list(ops)
        self.spec = [(op._native_name, op._native_params()) for op in self.ops]
        self.batch_size, self.num_workers, self.compile = batch_size, num_workers, compile
        self._native = _native
        self.code = self._build(tuple(state.shape), np.dtype(state.dtype))
        self.state = replace(state, shape=tuple(self.code.output_shape),
                             dtype=np.dtype(self.code.output_dtype))
        self._by_input = {(tuple(state.shape), np.dtype(state.dtype).str): self.code}
        self.pools = BufferPool(AllocationQuery(self.state.shape, self.state.dtype), batch_size)

    def _build(self, shape: Tuple[int, ...], dtype: np.dtype) -> Any:
        return self._native.BatchTransforms(list(shape), dtype.name, self.spec,
                                            self.num_workers, self.compile)

    def run(self, x: Any, indices: Any, ctx: RunContext) -> Any:
        x = np.ascontiguousarray(x)
        key = (tuple(x.shape[1:]), x.dtype.str)
        code = self._by_input.get(key)
        if code is None:
            # The batch is not what the states said (a callable before changed it): the
            # same transforms for what came.
            code = self._by_input[key] = self._build(key[0], x.dtype)
        n = len(x)
        if tuple(code.output_shape) == tuple(self.state.shape) and \
                np.dtype(code.output_dtype) == np.dtype(self.state.dtype):
            out = self.pools.take(n)
        else:
            out = np.empty((n, *code.output_shape), dtype=np.dtype(code.output_dtype))
        ids = [int(i) for i in indices]
        code.run(x.ctypes.data, x.nbytes, out.ctypes.data, out.nbytes, ids, ctx.seed, ctx.epoch)
        return out


class OutputPlan:
    """One output: the Rust loader's output (by position, or ``None`` when Python decodes
    the field), the hand-over, and the Python steps."""

    def __init__(self, name: str, native_index: Optional[int], hand: HandOver, steps: List[Step],
                 metadata: Any, storage: Any, batch_size: int):
        self.name = name
        self.batch_size = batch_size
        self.native_index = native_index
        self.hand = hand
        self.steps = steps
        self.metadata = metadata
        self.storage = storage
        self.staging: Optional[BufferPool] = None

    @property
    def needs_indices(self) -> bool:
        return self.native_index is None or any(s.with_indices for s in self.steps)

    def native_hand_over(self, torch: Any, kinds: Sequence[str]
                         ) -> Optional[Tuple[int, int, Callable[[Any], Any]]]:
        """This output's ``(index, how, convert)`` for ``_native.Loader.next_outputs``
        (which then gives what :meth:`make` gives), or ``None`` when Python has more to do
        than convert the Rust loader's output: a Python decoder or operation, or padded
        rows (``kinds`` of the Rust outputs: ``"rows"``), which come with their lengths."""
        if self.native_index is None or self.steps or kinds[self.native_index] == "rows":
            return None
        how, convert = self.hand.converter(torch)
        return self.native_index, how, convert

    def make(self, views: Sequence[Any], indices: Any, torch: Any, seed: int = 0,
             epoch: int = 0) -> Any:
        x = self._make(views, indices, torch, seed, epoch)
        view = None if self.native_index is None else views[self.native_index]
        if view is not None and getattr(view, "padded_rows", False):
            # A VarArrayDecoder's output: the padded rows and each sample's K, together.
            lengths = np.asarray(view.lengths()).astype(np.int64)
            if torch is not None and hasattr(x, "permute"):
                lengths = torch.from_numpy(lengths)
            return x, lengths
        return x

    def _make(self, views: Sequence[Any], indices: Any, torch: Any, seed: int,
              epoch: int) -> Any:
        x = None if self.native_index is None else self.hand.make(views[self.native_index], torch)
        if self.steps and self.steps[0].writes_input and isinstance(x, np.ndarray) \
                and not x.flags.writeable:
            # The Rust loader's memory is read-only to Python; FFCV's operations write into
            # their input, so the Python part starts from a copy in a reused buffer.
            if self.staging is None:
                self.staging = BufferPool(AllocationQuery(x.shape[1:], x.dtype), self.batch_size)
            work = self.staging.take(len(x))
            np.copyto(work, x)
            x = work
        if not self.steps:
            return x
        ctx = RunContext(self.metadata, self.storage, seed, epoch)
        for step in self.steps:
            x = step.run(x, indices, ctx)
        return x
