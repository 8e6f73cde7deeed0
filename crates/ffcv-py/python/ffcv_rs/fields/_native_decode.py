"""The batch function a built-in decoder's ``generate_code()`` returns: the loader's own
decoder (the facade's, through ``_native.BatchDecoder``) over the batch, the GIL released,
for code that drives the decoder through FFCV's protocol itself::

    decoder.accept_globals(reader.metadata["image"], manager.compile_reader())
    decode = Compiler.compile(decoder.generate_code())
    images = decode(indices, buffer, reader.metadata["image"], context.state)

The function locates every sample's bytes in the file's read-only map (the state of the
built-in memory managers, ``(map, ptrs, sizes)``) with NumPy, checks them against the
allocation table, and makes one native call for the batch. A random decoder draws its
seed from NumPy's generator at each call, so ``np.random.seed`` makes a run repeat, as
FFCV's draws do; with that seed and epoch 0 a sample's row is the one a loader with
``seed=`` that value decodes for it. Under a memory manager of the user's (another state)
the decoder runs FFCV's Python code over ``memory_read`` instead (numba-compiled when
numba is installed).
"""

from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
from numpy.lib import recfunctions

from ..errors import DecodeError
from ..pipeline.compiler import Compiler
from ..pipeline.generate_code import wrap_generate_code

#: One sample's record for ``_native.BatchDecoder.run``: its id, where its bytes lie in
#: the map, and the first 16 bytes of its metadata row as the file stores it.
RECORD = np.dtype([("sample", "<u8"), ("offset", "<u8"), ("length", "<u8"),
                   ("metadata", "u1", (16,))])

#: The loader's default cap on a decoded image's area (the facade's
#: ``DEFAULT_MAX_IMAGE_PIXELS``).
MAX_IMAGE_PIXELS = 1 << 27


def native_decoder(cls: type) -> type:
    """Class decorator: ``cls.generate_code`` returns :func:`native_decode_code` over the
    Python code the class defines (the code that runs under other memory managers)."""
    return wrap_generate_code(
        cls, lambda self, python_code: native_decode_code(self, lambda: python_code(self)),
        f"{cls.__name__}'s batch function: the loader's native decoder, or FFCV's Python "
        "code under a memory manager of the user's.")


def _builtin_state(op: Any, storage_state: Any) -> bool:
    """Whether ``storage_state`` is a built-in memory manager's ``(map, ptrs, sizes)``
    read by the built-in reader."""
    from ..memory_managers import os_cache

    read = getattr(op.memory_read, "py_func", op.memory_read)
    if read is not os_cache._read:
        return False
    if not (isinstance(storage_state, tuple) and len(storage_state) == 3):
        return False
    data, ptrs, sizes = storage_state
    return (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1
            and data.flags.c_contiguous and isinstance(ptrs, np.ndarray)
            and isinstance(sizes, np.ndarray) and ptrs.shape == sizes.shape)


def _metadata_bytes(rows: np.ndarray) -> np.ndarray:
    """The rows' bytes as the file stores them (fields packed, in order), cut or padded to
    16 per row."""
    packed = recfunctions.repack_fields(rows) if rows.dtype.names else rows
    raw = np.ascontiguousarray(packed).view(np.uint8).reshape(len(rows), -1)
    out = np.zeros((len(rows), 16), dtype=np.uint8)
    width = min(16, raw.shape[1])
    out[:, :width] = raw[:, :width]
    return out


def _locate(op: Any, samples: np.ndarray, addresses: np.ndarray, wanted: Optional[np.ndarray],
            ptrs: np.ndarray, sizes: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(offsets, lengths)`` of each sample's bytes in the map: ``wanted`` bytes at its
    address (the whole allocation there where ``wanted`` is ``None`` or negative). A
    sample whose address is no allocation's, or whose allocation is shorter than wanted,
    raises ``DecodeError`` naming it (the file is corrupt)."""
    addresses = addresses.astype(np.uint64)
    pos = np.searchsorted(ptrs, addresses)
    found = np.zeros(len(addresses), dtype=bool)
    inside = pos < len(ptrs)
    found[inside] = ptrs[pos[inside]] == addresses[inside]
    allocated = np.zeros(len(addresses), dtype=np.uint64)
    allocated[found] = sizes[pos[found]]
    if wanted is None:
        wanted = np.full(len(addresses), -1, dtype=np.int64)
    whole = wanted < 0
    lengths = np.where(whole, allocated, wanted.astype(np.uint64))
    bad = (whole & ~found) | (~whole & (lengths > 0) & (~found | (lengths > allocated)))
    if bad.any():
        k = int(np.argmax(bad))
        sample = int(samples[k])
        what = (f"no allocation starts at its address {int(addresses[k])}" if not found[k] else
                f"its metadata claims {int(lengths[k])} bytes but its allocation holds "
                f"{int(allocated[k])}")
        raise DecodeError(f"sample {sample}: {type(op).__name__}: {what} (the file is corrupt)",
                          sample=sample)
    offsets = np.where(lengths > 0, addresses, np.uint64(0))
    return offsets, lengths


def native_decode_code(op: Any, python_code: Callable[[], Callable]) -> Callable:
    """``op``'s native batch function ``code(indices, destination, metadata,
    storage_state)`` (see the module docs); ``python_code()`` makes the Python code that
    runs under a memory manager of the user's."""
    from .. import _native
    from ..loader.plan import native_builtin

    if not native_builtin(op):
        # A subclass that changes the protocol or the crop rule: its own Python code, which
        # the caller compiles (as any operation's).
        return python_code()
    decoders: Dict[Tuple[int, int], Any] = {}
    fallback: Dict[str, Callable] = {}
    spec = (op._native_name, op._native_params())
    draws = bool(getattr(op, "_draws", False))

    def run_python(indices: Any, destination: Any, metadata: Any, storage_state: Any) -> Any:
        if "code" not in fallback:
            fallback["code"] = Compiler.compile(python_code())
        return fallback["code"](indices, destination, metadata, storage_state)

    def decode(indices: Any, destination: Any, metadata: Any, storage_state: Any) -> Any:
        # The crop decoders ask for (output, scratch) buffers, as FFCV's do; the native
        # decoder keeps its scratch per thread and only writes the output.
        output = destination[0] if isinstance(destination, tuple) else destination
        if not (_builtin_state(op, storage_state) and isinstance(output, np.ndarray)
                and isinstance(metadata, np.ndarray)):
            return run_python(indices, destination, metadata, storage_state)
        data, ptrs, sizes = storage_state
        samples = np.asarray(indices, dtype=np.int64).reshape(-1)
        n = len(samples)
        out = output[:n]
        if n == 0:
            return out
        if len(out) != n:
            raise ValueError(f"{type(op).__name__}: a destination of {len(output)} rows "
                             f"for {n} samples")
        if samples.min() < 0 or samples.max() >= len(metadata):
            raise IndexError(f"{type(op).__name__}: sample ids outside the "
                             f"{len(metadata)} samples of the metadata")
        rows = metadata[samples]
        records = np.zeros(n, dtype=RECORD)
        records["sample"] = samples
        records["metadata"] = _metadata_bytes(rows)
        stored = op._stored_extents(rows)
        if stored is not None:
            records["offset"], records["length"] = _locate(op, samples, *stored, ptrs, sizes)
        into = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        row_bytes = into.nbytes // n
        threads = max(1, Compiler.num_threads)
        key = (row_bytes, threads)
        if key not in decoders:
            decoders[key] = _native.BatchDecoder(spec, row_bytes, threads, MAX_IMAGE_PIXELS)
        seed = int(np.random.randint(0, 2**62)) if draws else 0
        decoders[key].run((data.ctypes.data, data.nbytes), (records.ctypes.data, records.nbytes),
                          (into.ctypes.data, into.nbytes), seed, 0)
        if into is not out:
            out[...] = into
        return out

    decode._ffcv_rs_python = True  # native already: Compiler.compile leaves it as it is
    decode._ffcv_rs_native = op._native_name
    return decode
