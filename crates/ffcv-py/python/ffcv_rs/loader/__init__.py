"""FFCV's loader package (``ffcv.loader``)."""

from .loader import Loader, OrderOption

__all__ = ["Loader", "OrderOption"]
