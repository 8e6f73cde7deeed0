"""Exceptions raised by ffcv_rs. Messages are the Rust loader's, unchanged."""

from typing import Optional

__all__ = ["FFCVError", "BadFileError", "ConfigError", "DecodeError", "ImageSizeError"]


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
