"""FFCV's ``Pipeline`` (``ffcv.pipeline.pipeline``): one field's operations with the
states, buffers and code they declare. ``Loader`` plans its pipelines itself (the Rust
part and the Python part, see ``Loader.code``); this class serves code that drives a list
of operations by hand."""

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .allocation_query import Allocation, AllocationQuery, allocate_query
from .operation import Operation
from .state import State

__all__ = ["Pipeline", "BAD_COLLATION_MESSAGE", "Allocation", "AllocationQuery",
           "Operation", "State"]

BAD_COLLATION_MESSAGE = "Each pipeline needs one and one only Collate operation"


class Pipeline:
    """Operations ``operations`` run in order from the initial state (bytes on the CPU,
    compiled)."""

    def __init__(self, operations: Sequence[Operation]):
        self.original_state = State(jit_mode=True, device="cpu", dtype=np.dtype("u1"), shape=None)
        self.operations = list(operations)
        self.operation_blocks, _ = self.parse_pipeline()
        self.compiled_ops = self.compile_ops()
        self.compiled_code = None

    def parse_pipeline(self, batch_size: int = 16) -> Tuple[List[Tuple[bool, List[int]]], Dict[int, Any]]:
        """Runs every operation's ``declare_state_and_memory``: the runs of operations in
        the same mode (``(jit_mode, [op ids])``) and each operation's allocation."""
        allocations: Dict[int, Optional[Allocation]] = {}
        blocks: List[Tuple[bool, List[int]]] = []
        state = self.original_state
        block: List[int] = []
        for i, op in enumerate(self.operations):
            previous = state
            state, allocations[i] = op.declare_state_and_memory(state)
            if state.jit_mode != previous.jit_mode and block:
                blocks.append((previous.jit_mode, block))
                block = []
            block.append(i)
        if block:
            blocks.append((state.jit_mode, block))
        return blocks, allocations

    def compile_ops(self) -> Dict[int, Any]:
        """Each operation's ``generate_code()``."""
        return {i: op.generate_code() for i, op in enumerate(self.operations)}

    def allocate_query(self, memory_allocation: AllocationQuery, batch_size: int, batches_ahead: int) -> Any:
        return allocate_query(memory_allocation, batch_size, batches_ahead)

    def allocate_memory(self, batch_size: int, batches_ahead: int) -> Dict[int, Any]:
        """The buffers every operation asked for, ``batches_ahead`` batches of each."""
        _, allocations = self.parse_pipeline()
        out: Dict[int, Any] = {}
        for i, query in allocations.items():
            if isinstance(query, AllocationQuery):
                out[i] = allocate_query(query, batch_size, batches_ahead)
            elif isinstance(query, Sequence):
                out[i] = tuple(allocate_query(q, batch_size, batches_ahead) for q in query)
            else:
                out[i] = None
        return out
