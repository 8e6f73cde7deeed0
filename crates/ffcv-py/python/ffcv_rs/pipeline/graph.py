"""FFCV's pipeline graph internals (``ffcv.pipeline.graph``). ``Loader`` plans its
pipelines itself: the Rust part, then the operations that run in Python (``Loader.code``
shows both). ``INITIAL_STATE`` is FFCV's; the graph classes import but raise on use."""

import numpy as np

from .._compat import unsupported
from ..transforms.module import ModuleWrapper
from .allocation_query import AllocationQuery, allocate_query
from .compiler import Compiler
from .operation import Operation
from .pipeline_spec import PipelineSpec
from .state import State

__all__ = ["INITIAL_STATE", "Graph", "Node", "DecoderNode", "TransformNode", "RefNode",
           "AllocationQuery", "Compiler", "ModuleWrapper", "Operation", "PipelineSpec",
           "State", "allocate_query"]

#: The state a decoder starts from: bytes, on the CPU, in compiled code.
INITIAL_STATE = State(jit_mode=True, device="cpu", dtype=np.dtype("u1"), shape=None)

_INSTEAD = ("ffcv_rs.loader.Loader plans the pipelines; `loader.code` shows what runs "
            "in Rust and what in Python")
Graph = unsupported("ffcv.pipeline.graph.Graph", _INSTEAD)
Node = unsupported("ffcv.pipeline.graph.Node", _INSTEAD)
DecoderNode = unsupported("ffcv.pipeline.graph.DecoderNode", _INSTEAD)
TransformNode = unsupported("ffcv.pipeline.graph.TransformNode", _INSTEAD)
RefNode = unsupported("ffcv.pipeline.graph.RefNode", _INSTEAD)
