"""FFCV's ``PipelineSpec`` (``ffcv.pipeline.pipeline_spec``): a pipeline given as its
source field, decoder and transforms, accepted by ``Loader(pipelines={...})``."""

from typing import Any, List, Optional

from ..transforms import ToTensor
from ..transforms.module import ModuleWrapper
from .operation import Operation

__all__ = ["PipelineSpec", "ModuleWrapper", "Operation", "ToTensor"]


class PipelineSpec:
    """``source`` is the field's name; ``decoder`` (default: the field's) and
    ``transforms`` as in a list pipeline ``[decoder, *transforms]``."""

    def __init__(self, source: Any, decoder: Optional[Operation] = None,
                 transforms: Optional[List[Any]] = None):
        self.source = source
        self.decoder = decoder
        self.transforms = list(transforms or [])
        self.default_pipeline = decoder is None and not self.transforms and isinstance(source, str)

    def accept_decoder(self, Decoder: Any, output_name: str) -> None:
        """Takes the decoder from the transforms' head (an instance of ``Decoder``), or
        makes the default one; a default pipeline gets ``ToTensor``, and torch modules
        are wrapped in ``ModuleWrapper`` (FFCV's rules)."""
        if not isinstance(self.source, str) and self.decoder is not None:
            raise ValueError("a pipeline whose source is an operation has no decoder")
        if Decoder is not None:
            if self.transforms and isinstance(self.transforms[0], Decoder):
                self.decoder = self.transforms.pop(0)
            elif self.decoder is None:
                try:
                    self.decoder = Decoder()
                except Exception:
                    raise ValueError(f"no default decoder can be made for {output_name}: "
                                     "give one in the pipeline") from None
        if self.default_pipeline:
            self.transforms.append(ToTensor())
        for i, op in enumerate(self.transforms):
            if not isinstance(op, Operation) and type(op).__module__.startswith("torch"):
                self.transforms[i] = ModuleWrapper(op)

    def operations(self) -> List[Any]:
        """``[decoder, *transforms]`` (the decoder only when one is set)."""
        return ([self.decoder] if self.decoder is not None else []) + list(self.transforms)

    def __repr__(self) -> str:
        return repr((self.source, self.decoder, self.transforms))

    __str__ = __repr__
