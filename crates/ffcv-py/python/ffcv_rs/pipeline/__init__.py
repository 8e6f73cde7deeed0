"""FFCV's pipeline machinery (``ffcv.pipeline``): the ``Operation`` protocol, ``State``,
``AllocationQuery``, the ``Compiler`` switch, ``PipelineSpec`` and ``Pipeline``."""

from .compiler import Compiler
from .pipeline import Pipeline
from .pipeline_spec import PipelineSpec

__all__ = ["Pipeline", "PipelineSpec", "Compiler"]
