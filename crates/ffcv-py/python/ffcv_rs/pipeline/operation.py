"""FFCV's ``Operation`` (``ffcv.pipeline.operation``): the protocol of every decoder and
transform, built in or the user's.

An operation declares what it makes from what it receives
(``declare_state_and_memory(previous_state) -> (State, AllocationQuery or None)``) and
returns its batch function from ``generate_code()``: ``code(inputs, dst)`` for a
transform (``code(inputs, dst, indices)`` when the function has ``with_indices = True``),
``code(indices, dst, metadata, storage_state)`` for a decoder. ``dst`` is the buffer its
``AllocationQuery`` asked for, sliced to the batch; the function returns its output.
A function with ``is_parallel = True`` may loop with ``Compiler.get_iterator()``.

In ffcv_rs the built-in decoders and transforms run in the Rust loader when they stand
before any operation of the user's; the same objects also speak this protocol, so a
pipeline may mix both in any order and FFCV code that drives them directly works.
"""

from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, Optional, Tuple

from .allocation_query import AllocationQuery
from .state import State

__all__ = ["Operation", "AllocationQuery", "State"]


class Operation(ABC):
    """Base class of decoders and transforms (FFCV's protocol, see the module docs)."""

    #: ffcv_rs: the Rust loader's name for a built-in operation that runs natively, or
    #: None for operations that run in Python.
    _native_name: Optional[str] = None

    def __init__(self) -> None:
        self.metadata: Any = None
        self.memory_read: Optional[Callable] = None

    def accept_field(self, field: Any) -> None:
        """Receives the field (a ``Field`` instance) the pipeline reads."""
        self.field = field

    def accept_globals(self, metadata: Any, memory_read: Optional[Callable]) -> None:
        """Receives the field's metadata column and the memory manager's reader."""
        self.metadata = metadata
        self.memory_read = memory_read

    @abstractmethod
    def generate_code(self) -> Callable:
        """The batch function (see the module docs)."""
        raise NotImplementedError

    def declare_shared_memory(self, previous_state: State) -> Optional[AllocationQuery]:
        """A buffer shared by every batch (none by default)."""
        return None

    def generate_code_for_shared_state(self) -> Optional[Callable]:
        """A function that fills the shared buffer before each batch (none by default)."""
        return None

    @abstractmethod
    def declare_state_and_memory(
        self, previous_state: State
    ) -> Tuple[State, Optional[AllocationQuery]]:
        """The state after this operation and the output buffer it needs."""
        raise NotImplementedError

    # ffcv_rs: the parameters of the native operation (see ``_native_name``).
    def _native_params(self) -> Dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._native_params().items())
        return f"{type(self).__name__}({params})"
