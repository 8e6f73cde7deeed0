"""FFCV's ``ModuleWrapper`` (``ffcv.transforms.module``): a torch module (or any
callable) as a pipeline step, called on the whole batch."""

from typing import Any, Callable, Optional, Tuple

from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.operation import Operation
from ..pipeline.state import State

__all__ = ["ModuleWrapper", "AllocationQuery", "Operation", "State"]


class ModuleWrapper(Operation):
    """Calls ``module(batch)`` on the consumer's thread. A bare callable (a torchvision
    transform, a lambda) in a pipeline is wrapped in one."""

    def __init__(self, module: Any):
        super().__init__()
        self.module = module

    def generate_code(self) -> Callable:
        module = self.module

        def apply_module(inp, _dst):
            return module(inp)

        apply_module._ffcv_rs_python = True  # NumPy or torch, not compiled
        return apply_module

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        return previous_state, None

    def __call__(self, batch: Any) -> Any:
        return self.module(batch)

    def __repr__(self) -> str:
        return f"ModuleWrapper({self.module!r})"
