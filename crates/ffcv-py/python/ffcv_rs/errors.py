"""Exceptions raised by ffcv_rs. Messages are the Rust loader's, unchanged."""

from typing import Optional, Union

__all__ = ["FFCVError", "BadFileError", "ConfigError", "DecodeError", "ImageSizeError",
           "InputError"]


class FFCVError(Exception):
    """Base class of every error the loader or the writer reports."""


class BadFileError(FFCVError):
    """The ``.beton`` file is missing, unreadable, truncated or corrupt."""


class ConfigError(FFCVError, ValueError):
    """The loader's or the writer's settings are refused (also a ``ValueError``)."""


class ImageSizeError(ConfigError, TypeError):
    """``SimpleRGBImageDecoder`` over images of several sizes: a ``ConfigError`` that is
    also the ``TypeError`` FFCV raises there."""


class DecodeError(FFCVError):
    """A sample of a field could not be decoded; ``field`` and ``sample`` name it."""

    def __init__(self, message: str, field: Optional[str] = None, sample: Optional[int] = None):
        super().__init__(message)
        self.field = field
        self.sample = sample


class InputError(FFCVError):
    """An input of a conversion (``ffcv_rs.writer.write_webdataset``, ``write_parquet``,
    ``write_arrow``, ``write_tfrecord``) cannot be read, or one of its records cannot be
    converted. ``path`` names the input (its URL when it was fetched from object storage),
    ``record`` the record: a WebDataset key (``str``) or its row or record number in the
    file (``int``), ``None`` when the input as a whole is at fault."""

    def __init__(self, message: str, path: Optional[str] = None,
                 record: Union[str, int, None] = None):
        super().__init__(message)
        self.path = path
        self.record = record
