"""FFCV's ``RGBImageField`` and its decoders (``ffcv.fields.rgb_image``).

The decoders run in the Rust loader (JPEG decode bit-identical to FFCV's, OpenCV-exact
``INTER_AREA``). Their ``generate_code`` is that decoder as one native call per batch, for
FFCV code that drives a decoder directly (``_native_decode``); under a memory manager of
the user's it is FFCV's work as numba-compilable Python over ``ffcv_rs.libffcv``.
"""

from dataclasses import replace
from typing import Any, Callable, Dict, Optional, Tuple, Type

import numpy as np

from .. import _native
from ..errors import ImageSizeError
from ..libffcv import imdecode, memcpy, resize_crop
from ..pipeline.allocation_query import AllocationQuery
from ..pipeline.compiler import Compiler
from ..pipeline.operation import Operation
from ..pipeline.state import State
from .._crops import get_center_crop, get_random_crop
from ._native_decode import native_decoder
from .base import ARG_TYPE, Field, zero_arguments

__all__ = [
    "RGBImageField", "SimpleRGBImageDecoder", "ResizedCropRGBImageDecoder",
    "RandomResizedCropRGBImageDecoder", "CenterCropRGBImageDecoder",
    "IMAGE_MODES", "encode_jpeg", "resizer", "get_random_crop", "get_center_crop",
    "ARG_TYPE", "AllocationQuery", "Compiler", "Field", "Operation", "State",
    "imdecode", "memcpy", "resize_crop",
]

DEFAULT_CROP_RATIO = 224 / 256

#: How an image is stored: its ``mode`` byte in the metadata.
IMAGE_MODES = {"jpg": 0, "raw": 1}


def encode_jpeg(numpy_image: np.ndarray, quality: int) -> np.ndarray:
    """A ``uint8 [H, W, 3]`` RGB image as JPEG bytes (a ``uint8`` array), as FFCV's
    writer encodes it (baseline, 4:2:0, OpenCV's bytes)."""
    image = np.ascontiguousarray(numpy_image, dtype=np.uint8)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"encode_jpeg takes a [H, W, 3] image, not {image.shape}")
    data = _native.encode_jpeg(image.tobytes(), image.shape[0], image.shape[1], int(quality))
    return np.frombuffer(data, dtype=np.uint8)


def resizer(image: np.ndarray, target_resolution: Optional[int]) -> np.ndarray:
    """``image`` scaled down with ``INTER_AREA`` so that its longest side is at most
    ``target_resolution`` (unchanged when already within it, or for ``None``)."""
    if target_resolution is None:
        return image
    image = np.ascontiguousarray(image, dtype=np.uint8)
    out = _native.downscale(image.tobytes(), image.shape[0], image.shape[1], int(target_resolution))
    if out is None:
        return image
    h, w, pixels = out
    return np.frombuffer(pixels, dtype=np.uint8).reshape(h, w, 3)


@native_decoder
class SimpleRGBImageDecoder(Operation):
    """Full images, for datasets whose images all have one size (``uint8 [B, H, W, 3]``).
    Images of several sizes raise :class:`ffcv_rs.errors.ImageSizeError`, a ``TypeError``
    as in FFCV (and a ``ConfigError``)."""

    _native_name = "SimpleRGBImageDecoder"

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        heights, widths = self.metadata["height"], self.metadata["width"]
        if len(heights) and (heights.min() != heights.max() or widths.min() != widths.max()):
            raise ImageSizeError(
                "SimpleRGBImageDecoder needs images of one size; this field's vary "
                f"({int(heights.min())}..{int(heights.max())} x {int(widths.min())}.."
                f"{int(widths.max())}): use RandomResizedCropRGBImageDecoder or "
                "CenterCropRGBImageDecoder"
            )
        shape = (int(heights.max()), int(widths.max()), 3) if len(heights) else (0, 0, 3)
        return (replace(previous_state, jit_mode=True, shape=shape, dtype=np.dtype("<u1")),
                AllocationQuery(shape, np.dtype("<u1")))

    def generate_code(self) -> Callable:
        mem_read = self.memory_read
        decode_jpeg = Compiler.compile(imdecode)
        copy = Compiler.compile(memcpy)
        loop = Compiler.get_iterator()
        jpg = IMAGE_MODES["jpg"]

        def decode_images(indices, destination, metadata, storage_state):
            for i in loop(indices.shape[0]):
                entry = metadata[indices[i]]
                data = mem_read(entry["data_ptr"], storage_state)
                h, w = entry["height"], entry["width"]
                if entry["mode"] == jpg:
                    decode_jpeg(data, destination[i], h, w, h, w, 0, 0, 1, 1, False, False)
                else:
                    copy(data, destination[i])
            return destination[: indices.shape[0]]

        decode_images.is_parallel = True
        return decode_images

    def _native_params(self) -> Dict[str, Any]:
        return {}

    def _stored_extents(self, rows: Any) -> Tuple[Any, Any]:
        # A JPEG is its whole allocation, raw pixels exactly height x width x 3 bytes.
        raw = rows["height"].astype(np.int64) * rows["width"].astype(np.int64) * 3
        return rows["data_ptr"], np.where(rows["mode"] == IMAGE_MODES["jpg"], -1, raw)


@native_decoder
class ResizedCropRGBImageDecoder(SimpleRGBImageDecoder):
    """Base of the decoders that crop each image (by ``get_crop_generator``) and resize
    the crop to ``output_size``; images may have any size."""

    _native_name: Optional[str] = None
    scale: Any = None
    ratio: Any = None

    def __init__(self, output_size: Tuple[int, int]):
        super().__init__()
        self.output_size = _size(output_size)

    def declare_state_and_memory(self, previous_state: State) -> Tuple[State, Optional[AllocationQuery]]:
        heights, widths = self.metadata["height"], self.metadata["width"]
        largest = int(heights.max()) * int(widths.max()) * 3 if len(heights) else 0
        shape = (self.output_size[0], self.output_size[1], 3)
        return (replace(previous_state, jit_mode=True, shape=shape, dtype=np.dtype("<u1")),
                (AllocationQuery(shape, np.dtype("<u1")),
                 AllocationQuery((largest,), np.dtype("<u1"))))

    @property
    def get_crop_generator(self) -> Callable:
        raise NotImplementedError

    def generate_code(self) -> Callable:
        mem_read = self.memory_read
        decode_jpeg = Compiler.compile(imdecode)
        resize = Compiler.compile(resize_crop)
        crop_box = Compiler.compile(self.get_crop_generator)
        loop = Compiler.get_iterator()
        jpg = IMAGE_MODES["jpg"]
        scale = np.asarray(self.scale if self.scale is not None else (0.0, 0.0), dtype=np.float64)
        ratio = self.ratio
        ratio = np.asarray(ratio, dtype=np.float64) if isinstance(ratio, (tuple, list)) else ratio

        def decode_crops(indices, buffers, metadata, storage_state):
            destination, scratch = buffers
            for i in loop(indices.shape[0]):
                entry = metadata[indices[i]]
                data = mem_read(entry["data_ptr"], storage_state)
                h = np.uint32(entry["height"])
                w = np.uint32(entry["width"])
                if entry["mode"] == jpg:
                    full = scratch[i][: 3 * h * w]
                    decode_jpeg(data, full, h, w, h, w, 0, 0, 1, 1, False, False)
                    image = full.reshape(h, w, 3)
                else:
                    image = data.reshape(h, w, 3)
                top, left, ch, cw = crop_box(h, w, scale, ratio)
                resize(image, top, top + ch, left, left + cw, destination[i])
            return destination[: indices.shape[0]]

        decode_crops.is_parallel = True
        return decode_crops


def _size(output_size: Tuple[int, int]) -> Tuple[int, int]:
    try:
        h, w = (int(x) for x in output_size)
    except (TypeError, ValueError):
        raise TypeError(f"output_size {output_size!r} is not (height, width)") from None
    if h <= 0 or w <= 0:
        raise ValueError(f"output_size {output_size!r} must be positive")
    return h, w


class CenterCropRGBImageDecoder(ResizedCropRGBImageDecoder):
    """The centre square of side ``ratio * min(height, width)``, resized to
    ``output_size`` (INTER_AREA, as FFCV).

    ``dct_downscale=True`` (an ffcv_rs option, off by default) decodes a JPEG whose crop
    is at least twice the output at 1/2, 1/4 or 1/8 scale in the DCT domain: faster, but
    the pixels are no longer FFCV's (about 30 dB PSNR on photos)."""

    _native_name = "CenterCropRGBImageDecoder"

    def __init__(self, output_size: Tuple[int, int], ratio: float = DEFAULT_CROP_RATIO, *,
                 dct_downscale: bool = False):
        super().__init__(output_size)
        self.scale = None
        self.ratio = float(ratio)
        self.dct_downscale = bool(dct_downscale)
        if not 0.0 < self.ratio <= 1.0:
            raise ValueError(f"CenterCropRGBImageDecoder: ratio {ratio} must be in (0, 1]")

    @property
    def get_crop_generator(self) -> Callable:
        return get_center_crop

    def _native_params(self) -> Dict[str, Any]:
        return {"output_size": self.output_size, "ratio": self.ratio,
                "dct_downscale": self.dct_downscale}


class RandomResizedCropRGBImageDecoder(ResizedCropRGBImageDecoder):
    """torchvision's RandomResizedCrop rule (FFCV's), resized to ``output_size``.

    ``dct_downscale=True``: as for :class:`CenterCropRGBImageDecoder` (crops at least twice
    the output only; at 224x224 from ~400 px images that is rare)."""

    _native_name = "RandomResizedCropRGBImageDecoder"
    _draws = True

    def __init__(self, output_size: Tuple[int, int], scale: Tuple[float, float] = (0.08, 1.0),
                 ratio: Tuple[float, float] = (3 / 4, 4 / 3), *, dct_downscale: bool = False):
        super().__init__(output_size)
        self.scale = (float(scale[0]), float(scale[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        self.dct_downscale = bool(dct_downscale)
        for name, (lo, hi) in (("scale", self.scale), ("ratio", self.ratio)):
            if not 0.0 < lo <= hi:
                raise ValueError(
                    f"RandomResizedCropRGBImageDecoder: {name} {(lo, hi)} must satisfy 0 < low <= high")

    @property
    def get_crop_generator(self) -> Callable:
        return get_random_crop

    def _native_params(self) -> Dict[str, Any]:
        return {"output_size": self.output_size, "scale": self.scale, "ratio": self.ratio,
                "dct_downscale": self.dct_downscale}


class RGBImageField(Field):
    """An RGB image per sample: a ``[H, W, 3]`` uint8 array or a PIL image, stored raw or
    as a JPEG by ``write_mode`` (``raw``, ``jpg``, ``smart``, ``proportion``), optionally
    downscaled so that its longest side is at most ``max_resolution``.

    With ``proportion``, ``DatasetWriter`` stores sample ``i`` as a JPEG when the first draw
    of the writers' per-sample generator for (seed 0, ``i``) falls below
    ``compress_probability`` (Rust's ``rgb_image::sample_generator``): the same images in the
    same order give the file ``ffcv write image-folder --write-mode proportion`` writes (its
    ``--seed`` is 0 by default), whatever the number of writer threads. FFCV draws from
    NumPy's global generator instead, so its choices differ; ``encode``, called outside the
    writer without a sample index, does the same."""

    _kind = "rgb"

    def __init__(self, write_mode: str = "raw", max_resolution: Optional[int] = None,
                 smart_threshold: Optional[int] = None, jpeg_quality: int = 90,
                 compress_probability: float = 0.5):
        if write_mode not in ("raw", "jpg", "smart", "proportion"):
            raise ValueError(f"RGBImageField: write_mode {write_mode!r} is not raw, jpg, smart or proportion")
        if not 1 <= int(jpeg_quality) <= 100:
            raise ValueError(f"RGBImageField: jpeg_quality {jpeg_quality} is not in 1..100")
        if not 0.0 <= float(compress_probability) <= 1.0:
            raise ValueError(f"RGBImageField: compress_probability {compress_probability} is not in [0, 1]")
        self.write_mode = write_mode
        self.max_resolution = None if max_resolution is None else int(max_resolution)
        self.smart_threshold = None if smart_threshold is None else int(smart_threshold)
        self.jpeg_quality = int(jpeg_quality)
        self.compress_probability = float(compress_probability)
        self.proportion = self.compress_probability

    @property
    def metadata_type(self) -> np.dtype:
        return np.dtype([("mode", "<u1"), ("width", "<u2"), ("height", "<u2"), ("data_ptr", "<u8")])

    @staticmethod
    def from_binary(binary: Any) -> Field:
        return RGBImageField()

    def to_binary(self) -> Any:
        return zero_arguments()

    def encode(self, destination: Any, image: Any, malloc: Any) -> None:
        h, w, pixels = self._plain(image)
        arr = resizer(np.frombuffer(pixels, dtype=np.uint8).reshape(h, w, 3), self.max_resolution)
        mode = self.write_mode
        jpeg = None
        if mode == "smart":
            jpeg = encode_jpeg(arr, self.jpeg_quality)
            mode = "jpg" if self.smart_threshold is not None and arr.nbytes > self.smart_threshold else "raw"
        elif mode == "proportion":
            mode = "jpg" if np.random.rand() < self.compress_probability else "raw"
        destination["mode"] = IMAGE_MODES[mode]
        destination["height"], destination["width"] = arr.shape[:2]
        data = (jpeg if jpeg is not None else encode_jpeg(arr, self.jpeg_quality)) if mode == "jpg" \
            else np.ascontiguousarray(arr).reshape(-1)
        destination["data_ptr"], storage = malloc(data.nbytes)
        storage[:] = data

    def get_decoder_class(self) -> Type[Operation]:
        return SimpleRGBImageDecoder

    def _writer_params(self) -> Dict[str, Any]:
        return {
            "write_mode": self.write_mode,
            "max_resolution": self.max_resolution,
            "smart_threshold": self.smart_threshold,
            "jpeg_quality": self.jpeg_quality,
            "compress_probability": self.compress_probability,
        }

    def _plain(self, value: Any) -> Tuple[int, int, bytes]:
        if type(value).__module__.startswith("PIL."):
            value = value.convert("RGB")
        arr = np.asarray(value)
        if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:
            raise TypeError(
                f"RGBImageField takes a uint8 [H, W, 3] array or a PIL image, not {arr.dtype} {arr.shape}"
            )
        return int(arr.shape[0]), int(arr.shape[1]), np.ascontiguousarray(arr).tobytes()
