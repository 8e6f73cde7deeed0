"""Custom fields on the write side: a Field subclass that is not exactly a built-in class
is written as FFCV writes it (type id 255, its to_binary() arguments, the metadata its
encode(destination, value, malloc) leaves, the bytes it writes into malloc's buffers) with
malloc's placeholder pointers replaced by file addresses. Checked by parsing the file with
NumPy in FFCV's layout (ffcv/types.py); and with FFCV 1.0.2's own Reader where FFCV is
importable (the reference environment)."""

import json

import numpy as np
import pytest

from ffcv_rs.fields import Field, IntField, NDArrayField
from ffcv_rs.writer import DatasetWriter

HEADER = np.dtype([("version", "<u2"), ("num_fields", "<u2"), ("page_size", "<u4"),
                   ("num_samples", "<u8"), ("alloc_table_ptr", "<u8")], align=True)
FIELD_DESC = np.dtype([("type_id", "<u1"), ("name", ("<u1", 16)),
                       ("arguments", ("<u1", (1024,)))], align=True)
ALLOC = np.dtype([("sample_id", "<u8"), ("ptr", "<u8"), ("size", "<u8")])
ARG_TYPE = np.dtype([("", "<u1", 1024)])
PAGE = 1 << 21


def parse(path, metadata_types):
    """(header, descriptors, metadata rows, allocation table, file bytes); the rows'
    dtype is FFCV's get_metadata_type: the fields' types side by side, align=True."""
    data = np.fromfile(path, dtype=np.uint8)
    header = data[:HEADER.itemsize].view(HEADER)[0]
    nf = int(header["num_fields"])
    descs = data[HEADER.itemsize:HEADER.itemsize + nf * FIELD_DESC.itemsize].view(FIELD_DESC)
    row = np.dtype([(f"f{i}", t) for i, t in enumerate(metadata_types)], align=True)
    start = HEADER.itemsize + nf * FIELD_DESC.itemsize
    rows = data[start:start + int(header["num_samples"]) * row.itemsize].view(row)
    table = data[int(header["alloc_table_ptr"]):].view(ALLOC)
    return header, descs, rows, table, data


class PairField(Field):
    """Two byte strings per sample, in two allocations; an unaligned metadata struct."""

    metadata_type = np.dtype([("a_ptr", "<u8"), ("a_len", "<u4"), ("b_ptr", "<u8"),
                              ("b_len", "<u2")])

    def to_binary(self):
        result = np.zeros(1, dtype=ARG_TYPE)[0]
        result[0][:9] = np.frombuffer(b"pair-v1\0!", dtype="<u1")
        return result

    @staticmethod
    def from_binary(binary):
        return PairField()

    def encode(self, destination, value, malloc):
        a, b = value
        a_ptr, a_buf = malloc(len(a))
        a_buf[:] = np.frombuffer(a, dtype="<u1")
        b_ptr, b_buf = malloc(len(b))
        b_buf[:] = np.frombuffer(b, dtype="<u1")
        destination["a_ptr"], destination["a_len"] = a_ptr, len(a)
        destination["b_ptr"], destination["b_len"] = b_ptr, len(b)

    def get_decoder_class(self):
        raise NotImplementedError


class HalfField(Field):
    """A float16 kept in the metadata alone: encode never calls malloc."""

    metadata_type = np.dtype("<f2")

    def to_binary(self):
        return np.zeros(1, dtype=ARG_TYPE)[0]

    @staticmethod
    def from_binary(binary):
        return HalfField()

    def encode(self, destination, value, malloc):
        destination[0] = value

    def get_decoder_class(self):
        raise NotImplementedError


def pairs(n):
    rng = np.random.default_rng(5)
    return [(i, rng.integers(0, 256, int(rng.integers(0, 300)), dtype=np.uint8).tobytes(),
             rng.integers(0, 256, int(rng.integers(1, 40)), dtype=np.uint8).tobytes(), i / 8)
            for i in range(n)]


@pytest.mark.parametrize("workers", [1, 3])
def test_custom_fields_are_written_as_ffcv_writes_them(tmp_path, workers):
    items = pairs(500)
    path = str(tmp_path / "c.beton")
    DatasetWriter(path, {"index": IntField(), "pair": PairField(), "half": HalfField()},
                  page_size=PAGE, num_workers=workers).from_indexed_dataset(
        [(i, (a, b), h) for i, a, b, h in items], chunksize=16, progress=False)
    header, descs, rows, table, data = parse(
        path, [np.dtype("<i8"), PairField.metadata_type, HalfField.metadata_type])
    assert descs["type_id"].tolist() == [1, 255, 255]
    assert bytes(descs[1]["name"]).rstrip(b"\0") == b"pair"
    assert bytes(descs[1]["arguments"]) == b"pair-v1\0!".ljust(1024, b"\0")
    assert bytes(descs[2]["arguments"]) == bytes(1024)
    assert int(header["num_samples"]) == len(items)
    by_sample = {}
    for r in table:
        by_sample.setdefault(int(r["sample_id"]), []).append((int(r["ptr"]), int(r["size"])))
    for s, (i, a, b, h) in enumerate(items):
        row = rows[s]
        assert int(row["f0"]) == i
        pair = row["f1"]
        a_ptr, b_ptr = int(pair["a_ptr"]), int(pair["b_ptr"])
        assert (int(pair["a_len"]), int(pair["b_len"])) == (len(a), len(b))
        assert data[a_ptr:a_ptr + len(a)].tobytes() == a
        assert data[b_ptr:b_ptr + len(b)].tobytes() == b
        # One allocation per custom field and sample, the two buffers back to back.
        assert b_ptr == a_ptr + len(a)
        assert by_sample[s] == [(a_ptr, len(a) + len(b))]
        assert float(row["f2"]) == np.float16(h)


def test_ffcv_string_field_subclass_of_ndarray_field(tmp_path):
    if not all(hasattr(NDArrayField, a) for a in ("encode", "to_binary", "metadata_type")):
        pytest.skip("ffcv_rs's NDArrayField has no encode/to_binary/metadata_type yet: "
                    "FFCV's StringField(NDArrayField) needs them")

    class StringField(NDArrayField):
        # FFCV's tests/test_custom_field.py field, with ffcv_rs's NDArrayField.
        def __init__(self, max_len, pad_char="\0"):
            self.max_len = max_len
            self.pad_char = pad_char
            super().__init__(np.dtype("uint8"), (max_len,))

        def encode(self, destination, field, malloc):
            padded = (field + self.pad_char * self.max_len)[:self.max_len]
            field = np.frombuffer(padded.encode("ascii"), dtype="uint8")
            return super().encode(destination, field, malloc)

    captions = [f"caption number {i} " + "x" * (i % 60) for i in range(100)]
    path = str(tmp_path / "s.beton")
    DatasetWriter(path, {"label": StringField(100)}, page_size=PAGE,
                  num_workers=2).from_indexed_dataset([(c,) for c in captions], progress=False)
    _, descs, rows, _, data = parse(path, [np.dtype("<u8")])
    assert descs["type_id"].tolist() == [255]
    # NDArrayField's arguments, as FFCV lays them out: shape (32 x <u8), the dtype
    # description's length (<u8), then json.dumps(dtype.descr).
    descr = json.dumps(np.dtype("uint8").descr).encode("ascii")
    args = bytes(descs[0]["arguments"])
    assert np.frombuffer(args[:256], dtype="<u8").tolist() == [100] + [0] * 31
    assert int(np.frombuffer(args[256:264], dtype="<u8")[0]) == len(descr)
    assert args[264:264 + len(descr)] == descr
    for s, c in enumerate(captions):
        ptr = int(rows[s]["f0"])
        assert data[ptr:ptr + 100].tobytes() == c.encode("ascii")[:100].ljust(100, b"\0")


def test_ffcv_reader_reads_our_custom_field(tmp_path):
    try:
        from ffcv.fields.ndarray import NDArrayField as FFCVNDArrayField
        from ffcv.reader import Reader
    except ImportError:
        pytest.skip("FFCV 1.0.2 is not installed here: run this test in the reference FFCV "
                    "environment to check that FFCV's Reader reads our custom fields")

    class FFCVPairField(FFCVNDArrayField):
        # A handler class for FFCV's Reader: only from_binary and metadata_type are used.
        metadata_type = PairField.metadata_type

        @staticmethod
        def from_binary(binary):
            assert bytes(binary[:9]) == b"pair-v1\0!"
            return FFCVPairField(np.dtype("u1"), (1,))

    items = pairs(200)
    path = str(tmp_path / "f.beton")
    DatasetWriter(path, {"index": IntField(), "pair": PairField()}, page_size=PAGE,
                  num_workers=2).from_indexed_dataset(
        [(i, (a, b)) for i, a, b, _ in items], progress=False)
    reader = Reader(path, custom_handlers={"pair": FFCVPairField})
    assert reader.num_samples == len(items)
    data = np.fromfile(path, dtype=np.uint8)
    for s, (i, a, b, _) in enumerate(items):
        meta = reader.metadata[s]
        assert int(meta["f0"]) == i
        ptr = int(meta["f1"]["a_ptr"])
        assert data[ptr:ptr + len(a)].tobytes() == a


def test_malloc_pointer_not_stored_is_an_error(tmp_path):
    class Forgetful(HalfField):
        metadata_type = np.dtype("<u8")

        def encode(self, destination, value, malloc):
            _, buf = malloc(4)
            buf[:] = 7
            destination[0] = 0

    with pytest.raises(Exception, match="stored none of the pointers"):
        DatasetWriter(str(tmp_path / "e.beton"), {"x": Forgetful()}, page_size=PAGE,
                      num_workers=1).from_indexed_dataset([(1,), (2,)], progress=False)
    assert not (tmp_path / "e.beton").exists()


def test_field_without_the_protocol_is_refused(tmp_path):
    class Bare(Field):
        pass

    with pytest.raises(TypeError, match="encode"):
        DatasetWriter(str(tmp_path / "b.beton"), {"x": Bare()}, page_size=PAGE,
                      num_workers=1).from_indexed_dataset([(1,)], progress=False)


def test_one_worker_custom_field_file_is_byte_identical_to_ffcvs(tmp_path):
    try:
        from ffcv.fields import IntField as FFCVIntField
        from ffcv.fields.ndarray import NDArrayField as FFCVNDArrayField
        from ffcv.writer import DatasetWriter as FFCVWriter
    except ImportError:
        pytest.skip("FFCV 1.0.2 is not installed here: run this test in the reference FFCV "
                    "environment to compare with the file FFCV writes")
    if not hasattr(NDArrayField, "encode"):
        pytest.skip("ffcv_rs's NDArrayField has no encode yet")

    def string_field(base):
        class StringField(base):
            def __init__(self, max_len):
                self.max_len = max_len
                super().__init__(np.dtype("uint8"), (max_len,))

            def encode(self, destination, field, malloc):
                padded = (field + "\0" * self.max_len)[:self.max_len]
                return super().encode(destination,
                                      np.frombuffer(padded.encode("ascii"), dtype="uint8"), malloc)
        return StringField(100)

    # 30,000 x 100 bytes: several 2 MiB pages, so the page rules are compared too.
    items = [(i, f"caption {i} " + "y" * (i % 70)) for i in range(30000)]
    ours, theirs = str(tmp_path / "ours.beton"), str(tmp_path / "ffcv.beton")
    DatasetWriter(ours, {"index": IntField(), "label": string_field(NDArrayField)},
                  page_size=PAGE, num_workers=1).from_indexed_dataset(items, progress=False)
    FFCVWriter(theirs, {"index": FFCVIntField(), "label": string_field(FFCVNDArrayField)},
               page_size=PAGE, num_workers=1).from_indexed_dataset(items)
    assert open(ours, "rb").read() == open(theirs, "rb").read()
