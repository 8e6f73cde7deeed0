"""FFCV's ``JSONField`` (``ffcv.fields.json``): a JSON value per sample, stored as its
UTF-8 text and a NUL byte; the loader gives ``uint8`` rows, ``JSONField.unpack`` the
values."""

import json
from typing import Any, List

import numpy as np

from .bytes import BytesField

__all__ = ["JSONField", "BytesField", "ENCODING", "SEPARATOR"]

ENCODING = "utf8"
SEPARATOR = "\0"


class JSONField(BytesField):
    """Any JSON-serialisable value per sample."""

    _kind = "json"

    def encode(self, destination: Any, field: Any, malloc: Any) -> None:
        text = (json.dumps(field) + SEPARATOR).encode(ENCODING)
        super().encode(destination, np.frombuffer(text, dtype=np.uint8), malloc)

    def _plain(self, value: Any) -> str:
        return json.dumps(value)

    @staticmethod
    def unpack(batch: Any) -> Any:
        """The values of a batch of JSON rows (``uint8 [B, n]``, each ending in a NUL byte
        or at the row's end), or the value of one row (``uint8 [n]``)."""
        if hasattr(batch, "detach"):
            batch = batch.detach().cpu().numpy()
        rows = np.asarray(batch)
        single = rows.ndim == 1
        out: List[Any] = []
        for row in ([rows] if single else rows):
            raw = row.tobytes()
            end = raw.find(SEPARATOR.encode())
            out.append(json.loads(raw[: end if end >= 0 else len(raw)].decode(ENCODING)))
        return out[0] if single else out
