"""FFCV's transforms (``ffcv.transforms``) for ffcv_rs pipelines.

``NormalizeImage``, ``RandomHorizontalFlip``, ``Cutout``, ``RandomTranslate``,
``RandomResizedCrop``, ``RandomBrightness``, ``RandomContrast``, ``RandomSaturation``,
``Poison``, ``Squeeze``, ``Convert`` and ``ReplaceLabel`` run in the Rust loader, fused and
compiled with the decoder, on the worker threads, wherever they come before any
operation of the user's (after one, natively on the whole batch). ``ToTensor``,
``ToTorchImage``, ``ToDevice`` and ``View`` only change how a batch is handed over
(``View`` runs in the loader when a built-in follows it). ``ImageMixup`` and
``LabelMixup`` pair the samples of a batch: they run natively on the whole batch after
the per-sample pipeline, as does ``MixupToOneHot`` on CPU tensors. Operations of the
user's (FFCV's ``Operation`` protocol) and any Python callable run on the whole batch on
the consumer's thread, compiled by numba when it is installed. ``docs/python.md`` lists
which run where.
"""

from .color_jitter import RandomBrightness, RandomContrast, RandomSaturation
from .common import Squeeze
from .cutout import Cutout
from .flip import RandomHorizontalFlip
from .mixup import ImageMixup, LabelMixup, MixupToOneHot
from .module import ModuleWrapper
from .normalize import NormalizeImage
from .ops import Convert, ToDevice, ToTensor, ToTorchImage, View
from .poisoning import Poison
from .random_resized_crop import RandomResizedCrop
from .replace_label import ReplaceLabel
from .translate import RandomTranslate
from ..pipeline.operation import Operation

__all__ = [
    "ToTensor", "ToDevice", "ToTorchImage", "NormalizeImage", "Convert", "Squeeze", "View",
    "RandomResizedCrop", "RandomHorizontalFlip", "RandomTranslate", "Cutout",
    "ImageMixup", "LabelMixup", "MixupToOneHot", "Poison", "ReplaceLabel", "ModuleWrapper",
    "RandomBrightness", "RandomContrast", "RandomSaturation", "Operation",
]
