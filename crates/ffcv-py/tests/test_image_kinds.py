"""``ImageField``: images of 1, 3 or 4 channels and 8 or 16 bits written by ``DatasetWriter``
from arrays, PNG files (generated here) and the test photographs, decoded kept as they are
(``uint8`` / ``uint16 [B, H, W, C]``), cropped and normalized; and, in the reference
environment, FFCV 1.0.2 opening a file with a gray image field and reading each image's
stored bytes as a ``BytesField`` (docs/format.md, "Image arguments")."""

import pathlib
import struct
import zlib

import numpy as np
import pytest

from ffcv_rs.fields import ImageField, IntField
from ffcv_rs.fields.decoders import (CenterCropImageDecoder, IntDecoder,
                                     RandomResizedCropImageDecoder, SimpleImageDecoder)
from ffcv_rs.fields.image import TAG
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.reader import Reader
from ffcv_rs.transforms import NormalizeImage, RandomHorizontalFlip
from ffcv_rs.writer import DatasetWriter

N = 10
PHOTOS = pathlib.Path(__file__).resolve().parents[2] / "rgb-image" / "tests" / "data" / "photos"


def gray16(i):
    """Sample ``i``'s 16-bit gray image, 7 x 6, reaching the top of the range."""
    return ((np.arange(42, dtype=np.uint32).reshape(7, 6) * 1559 + i * 4099) % 65536).astype(np.uint16)


def rgba(i):
    return ((np.arange(5 * 4 * 4).reshape(5, 4, 4) * 7 + i * 3) % 256).astype(np.uint8)


def png(image):
    """A PNG file of ``image`` (``[H, W]`` uint8/uint16 gray), written without any library
    beyond zlib: signature, IHDR, one IDAT of unfiltered rows, IEND."""
    h, w = image.shape
    bits = 16 if image.dtype == np.uint16 else 8
    rows = image.astype(">u2" if bits == 16 else "u1").tobytes()
    stride = w * bits // 8
    raw = b"".join(b"\0" + rows[y * stride:(y + 1) * stride] for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", w, h, bits, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


def write(path, tmp_path, workers=2):
    files = []
    for i in range(N):
        p = tmp_path / f"depth{i}.png"
        p.write_bytes(png(gray16(i)))
        files.append(p)
    # Even samples from PNG files (kept as they are), odd ones from arrays (stored raw).
    items = [(i, str(files[i]) if i % 2 == 0 else gray16(i), rgba(i)) for i in range(N)]
    fields = {"label": IntField(), "depth": ImageField(channels=1, bits=16),
              "rgba": ImageField(channels=4)}
    DatasetWriter(path, fields, num_workers=workers).from_indexed_dataset(items, progress=False)


def epoch(path, **pipelines):
    loader = Loader(path, batch_size=4, num_workers=2, order=OrderOption.SEQUENTIAL,
                    drop_last=False, pipelines={"label": [IntDecoder()], **pipelines})
    return [tuple(np.asarray(x).copy() for x in b) for b in loader]


def test_sixteen_bit_and_four_channel_images_come_back_as_they_are(tmp_path):
    path = str(tmp_path / "kinds.beton")
    write(path, tmp_path)
    r = Reader(path)
    assert isinstance(r.handlers["depth"], ImageField)
    assert (r.handlers["depth"].channels, r.handlers["depth"].bits) == (1, 16)
    assert r.field_descriptors[1]["type_id"] == 3
    assert r.field_descriptors[1]["arguments"][:8].tobytes() == TAG
    assert ImageField(1, 16).to_binary().tobytes() == r.field_descriptors[1]["arguments"].tobytes()
    # A PNG is stored byte for byte.
    ptr, size = r.metadata["f1"][0]["ptr"], r.metadata["f1"][0]["size"]
    assert np.memmap(path, mode="r")[ptr:ptr + size].tobytes() == png(gray16(0))

    batches = epoch(path, depth=[SimpleImageDecoder()], rgba=[SimpleImageDecoder()])
    seen = 0
    for label, depth, four in batches:
        assert depth.dtype == np.uint16 and depth.shape[1:] == (7, 6, 1)
        assert four.dtype == np.uint8 and four.shape[1:] == (5, 4, 4)
        for row, i in enumerate(label[:, 0]):
            assert np.array_equal(depth[row, :, :, 0], gray16(i)), i
            assert np.array_equal(four[row], rgba(i)), i
            seen += 1
    assert seen == N


def test_crops_flip_and_per_channel_normalize(tmp_path):
    path = str(tmp_path / "kinds.beton")
    write(path, tmp_path)
    batches = epoch(path,
                    depth=[SimpleImageDecoder(), RandomHorizontalFlip(1.0),
                           NormalizeImage(np.array([32768.0]), np.array([8192.0]), np.float32)],
                    rgba=[CenterCropImageDecoder((3, 3), ratio=1.0)])
    for label, depth, four in batches:
        assert depth.dtype == np.float32 and depth.shape[1:] == (7, 6, 1)
        assert four.shape[1:] == (3, 3, 4)
        for row, i in enumerate(label[:, 0]):
            want = ((gray16(i)[:, ::-1].astype(np.float64) - 32768.0) / 8192.0).astype(np.float32)
            assert np.array_equal(depth[row, :, :, 0], want), i
            # A 4x5 image's centre square of side 4, area-resized to 3x3: each output a
            # weighted mean of its footprint, so within the footprint's range.
            src = rgba(i)[0:4, 0:4].astype(np.int64)
            assert four[row].min() >= src.min() and four[row].max() <= src.max()
    # The random crop keeps every channel and the depth.
    for _, depth, _ in epoch(path, depth=[RandomResizedCropImageDecoder((4, 4))],
                             rgba=[SimpleImageDecoder()]):
        assert depth.dtype == np.uint16 and depth.shape[1:] == (4, 4, 1)


def test_the_photographs_keep_their_jpeg_and_gray_copies_keep_one_channel(tmp_path):
    from ffcv_rs.libffcv import imdecode
    from ffcv_rs.fields import RGBImageField  # noqa: F401  (the RGB8 default is unchanged)

    names = ["astronaut.jpg", "chelsea.jpg", "coffee.jpg", "rocket.jpg"]
    photos = []
    for name in names:
        data = np.frombuffer((PHOTOS / name).read_bytes(), dtype=np.uint8)
        # The header's size: SOF0's height and width.
        b = data.tobytes()
        at = b.index(b"\xff\xc0")
        h, w = struct.unpack(">HH", b[at + 5:at + 9])
        rgb = np.zeros((h, w, 3), dtype=np.uint8)
        assert imdecode(data, rgb, h, w, h, w, 0, 0, 1, 1, False, False) == 0
        photos.append((str(PHOTOS / name), rgb))
    def to_gray(rgb):
        p = rgb.astype(np.uint32)
        return ((299 * p[..., 0] + 587 * p[..., 1] + 114 * p[..., 2] + 500) // 1000).astype(np.uint8)

    luma = [to_gray(rgb) for _, rgb in photos]
    path = str(tmp_path / "photos.beton")
    items = [(i, photos[i][0], luma[i]) for i in range(4)]
    DatasetWriter(path, {"label": IntField(), "photo": ImageField(3), "gray": ImageField(1)},
                  num_workers=1).from_indexed_dataset(items, progress=False)
    r = Reader(path)
    raw = np.memmap(path, mode="r")
    for i, m in enumerate(r.metadata["f1"]):
        assert raw[m["ptr"]:m["ptr"] + m["size"]].tobytes() == (PHOTOS / names[i]).read_bytes()
    got = epoch(path, photo=[CenterCropImageDecoder((32, 32))],
                gray=[CenterCropImageDecoder((32, 32))])
    for label, photo, gray in got:
        assert photo.shape[1:] == (32, 32, 3) and gray.shape[1:] == (32, 32, 1)
        for row, i in enumerate(label[:, 0]):
            # The same crop of the gray copy is within one of the colour crop's luma.
            p = photo[row].astype(np.int64)
            y = (299 * p[..., 0] + 587 * p[..., 1] + 114 * p[..., 2] + 500) // 1000
            assert np.abs(y - gray[row, :, :, 0].astype(np.int64)).max() <= 2, i


def test_bad_values_and_arguments_raise(tmp_path):
    with pytest.raises(ValueError, match="2 channels"):
        ImageField(channels=2)
    with pytest.raises(ValueError, match="12 bits"):
        ImageField(bits=12)
    with pytest.raises(ValueError, match=r"the field takes \[H, W, 1\] uint16"):
        ImageField(1, 16)._plain(np.zeros((2, 2), dtype=np.uint8))
    path = str(tmp_path / "bad.beton")
    items = [(0, np.zeros((2, 2, 3), dtype=np.uint8))]
    with pytest.raises(Exception, match="3 channels of 8 bits, the field 1 of 8"):
        raw = ImageField(3)._plain(items[0][1])
        DatasetWriter(path, {"label": IntField(), "gray": ImageField(1)},
                      num_workers=1).from_indexed_dataset([(0, raw)], progress=False)


def test_ffcv_reads_a_gray_image_field_as_the_stored_image_bytes(tmp_path):
    try:
        import ffcv.loader  # noqa: F401
    except ImportError:
        pytest.skip("FFCV 1.0.2 is not installed here: run this test in the reference FFCV "
                    "environment to check what FFCV sees of an ImageField")
    import cv2
    from ffcv.fields import BytesField as FfcvBytesField
    from ffcv.fields.decoders import BytesDecoder as FfcvBytes, IntDecoder as FfcvInt
    from ffcv.loader import Loader as FfcvLoader, OrderOption as FfcvOrder
    from ffcv.reader import Reader as FfcvReader

    path = str(tmp_path / "kinds.beton")
    write(path, tmp_path, workers=3)
    r = FfcvReader(path)
    assert isinstance(r.handlers["depth"], FfcvBytesField)
    assert isinstance(r.handlers["rgba"], FfcvBytesField)
    loader = FfcvLoader(path, batch_size=4, num_workers=1, order=FfcvOrder.SEQUENTIAL,
                        drop_last=False, pipelines={"label": [FfcvInt()], "depth": [FfcvBytes()],
                                                    "rgba": [FfcvBytes()]})
    sizes = r.metadata["f1"]["size"]
    seen = 0
    for label, depth, four in loader:
        for row in range(len(label)):
            i = int(label[row][0])
            data = np.asarray(depth[row])[: sizes[i]].tobytes()
            if i % 2 == 0:
                # A PNG stored as it was: OpenCV decodes it to the 16-bit gray image.
                assert data == png(gray16(i))
                img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
                assert img.dtype == np.uint16 and np.array_equal(img, gray16(i))
            else:
                # Raw: the 16-byte header (b"FRAW", width, height, channels, bits), then the
                # little-endian samples.
                magic, w, h, c, bits = struct.unpack("<4sIIBBxx", data[:16])
                assert (magic, w, h, c, bits) == (b"FRAW", 6, 7, 1, 16)
                img = np.frombuffer(data[16:], "<u2").reshape(h, w)
                assert np.array_equal(img, gray16(i))
            seen += 1
    assert seen == N
