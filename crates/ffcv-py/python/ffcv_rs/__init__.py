"""ffcv_rs: FFCV's data loader API over the ffcv-rs Rust loader.

Migrating from FFCV means replacing ``ffcv`` by ``ffcv_rs`` in the imports: every public
module and name of FFCV 1.0.2 is importable at the same path (``docs/python.md`` lists
what each does here)::

    from ffcv_rs.loader import Loader, OrderOption
    from ffcv_rs.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
    from ffcv_rs.transforms import ToTensor, ToTorchImage, NormalizeImage

Batches share the loader's memory (no copy): NumPy arrays, or torch tensors when the
pipeline has ``ToTensor`` and torch is installed. torch is imported only then.
"""

from .errors import BadFileError, ConfigError, DecodeError, FFCVError, ImageSizeError
from .loader import Loader, OrderOption
from .writer import DatasetWriter

__version__ = "0.1.0"
__all__ = [
    "Loader",
    "OrderOption",
    "DatasetWriter",
    "FFCVError",
    "BadFileError",
    "ConfigError",
    "DecodeError",
    "ImageSizeError",
    "__version__",
]
