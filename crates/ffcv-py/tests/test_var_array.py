"""``VarArrayField``: arrays with a variable leading dimension written by ``DatasetWriter``
and read back exactly (the file's field, the padded batches of ``VarArrayDecoder``, its cap
and truncation, the packed form); and, in the reference environment, FFCV 1.0.2 opening
the same file and reading the field as the raw array bytes."""

import numpy as np
import pytest

from ffcv_rs.fields import IntField, VarArrayField
from ffcv_rs.fields.decoders import IntDecoder, VarArrayDecoder
from ffcv_rs.fields.var_array import TAG, pack
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.reader import Reader
from ffcv_rs.writer import DatasetWriter

N = 37


def boxes(i):
    """Sample ``i``'s boxes: ``i % 5`` rows of four float32 (every fifth sample empty)."""
    return (np.arange((i % 5) * 4, dtype=np.float32).reshape(-1, 4) + i * 10).astype(np.float32)


def tokens(i):
    """Sample ``i``'s tokens: ``(3 * i) % 8`` int32."""
    return np.arange((3 * i) % 8, dtype=np.int32) * 7 - i


def write(path, workers=2):
    items = [(i, boxes(i), tokens(i)) for i in range(N)]
    fields = {"label": IntField(), "boxes": VarArrayField(np.float32, (4,)),
              "tokens": VarArrayField("<i4")}
    DatasetWriter(path, fields, num_workers=workers).from_indexed_dataset(items, progress=False)


def batches(path, **boxes_decoder):
    loader = Loader(path, batch_size=8, num_workers=2, order=OrderOption.SEQUENTIAL,
                    drop_last=False, pipelines={
                        "label": [IntDecoder()], "boxes": [VarArrayDecoder(**boxes_decoder)],
                        "tokens": [VarArrayDecoder()]})
    # A VarArrayDecoder's output is (padded rows, lengths); copies, so batches can be kept.
    return [tuple(tuple(np.asarray(y).copy() for y in x) if isinstance(x, tuple)
                  else np.asarray(x).copy() for x in b) for b in loader]


def test_the_file_holds_the_arrays_exactly(tmp_path):
    path = str(tmp_path / "var.beton")
    write(path)
    r = Reader(path)
    field = r.handlers["boxes"]
    assert isinstance(field, VarArrayField)
    assert (field.dtype, field.inner_shape) == (np.dtype("<f4"), (4,))
    assert r.handlers["tokens"].inner_shape == ()
    assert r.field_descriptors[1]["type_id"] == 3
    assert r.field_descriptors[1]["arguments"][:8].tobytes() == TAG
    sizes = r.metadata["f1"]["size"]
    assert list(sizes) == [(i % 5) * 16 for i in range(N)]
    # The argument block the Python class writes is the one the Rust writer wrote.
    assert VarArrayField(np.float32, (4,)).to_binary().tobytes() == \
        r.field_descriptors[1]["arguments"].tobytes()


def test_padded_batches_hold_the_rows_then_zeros(tmp_path):
    path = str(tmp_path / "var.beton")
    write(path)
    got = batches(path)
    labels = np.concatenate([b[0][:, 0] for b in got])
    assert list(labels) == list(range(N))
    i = 0
    for label, (padded, lengths), (toks, tok_lengths) in got:
        assert lengths.dtype == np.int64
        assert list(lengths) == [int(k) % 5 for k in label[:, 0]]
        assert list(tok_lengths) == [len(tokens(int(k))) for k in label[:, 0]]
        assert padded.shape[1:] == (4, 4) and padded.dtype == np.float32
        assert toks.shape[1:] == (7,) and toks.dtype == np.int32
        for r in range(len(label)):
            want = np.zeros((4, 4), np.float32)
            want[: i % 5] = boxes(i)
            assert np.array_equal(padded[r], want), i
            want_t = np.zeros(7, np.int32)
            want_t[: len(tokens(i))] = tokens(i)
            assert np.array_equal(toks[r], want_t), i
            i += 1
        values, offsets = pack(padded, lengths)
        assert list(offsets) == [0] + list(np.cumsum(lengths))
        assert np.array_equal(values, np.concatenate([boxes(int(k)) for k in label[:, 0]]))
    assert i == N


def test_a_cap_truncates_or_raises(tmp_path):
    path = str(tmp_path / "var.beton")
    write(path)
    got = batches(path, cap=2, truncate=True)
    for label, (padded, lengths), _ in got:
        assert padded.shape[1:] == (2, 4)
        assert list(lengths) == [min(int(i) % 5, 2) for i in label[:, 0]]
        for r, i in enumerate(label[:, 0]):
            want = np.zeros((2, 4), np.float32)
            k = min(int(i) % 5, 2)
            want[:k] = boxes(int(i))[:k]
            assert np.array_equal(padded[r], want)
    with pytest.raises(Exception, match="sample 3 has 3 rows, more than the cap of 2"):
        batches(path, cap=2)
    with pytest.raises(ValueError, match="cap"):
        VarArrayDecoder(cap=0)


def test_values_of_the_wrong_shape_are_refused(tmp_path):
    path = str(tmp_path / "bad.beton")
    items = [(np.zeros((2, 3), np.float32),)]
    with pytest.raises(ValueError, match=r"rows are \(4,\)"):
        DatasetWriter(path, {"boxes": VarArrayField(np.float32, (4,))}).from_indexed_dataset(
            items, progress=False)
    with pytest.raises(TypeError, match="not a bool, integer or float"):
        VarArrayField(object)
    with pytest.raises(ValueError, match="axis below 1"):
        VarArrayField(np.float32, (0,))


def test_ffcv_reads_the_field_as_the_raw_array_bytes(tmp_path):
    try:
        import ffcv.loader  # noqa: F401
    except ImportError:
        pytest.skip("FFCV 1.0.2 is not installed here: run this test in the reference FFCV "
                    "environment to check what FFCV sees of a VarArrayField")
    from ffcv.fields import BytesField as FfcvBytesField
    from ffcv.fields.decoders import BytesDecoder as FfcvBytes, IntDecoder as FfcvInt
    from ffcv.loader import Loader as FfcvLoader, OrderOption as FfcvOrder
    from ffcv.reader import Reader as FfcvReader

    # FFCV's view of the file: a BytesField whose samples are the raw array bytes.
    path = str(tmp_path / "var.beton")
    write(path, workers=3)
    r = FfcvReader(path)
    assert isinstance(r.handlers["boxes"], FfcvBytesField)
    assert isinstance(r.handlers["tokens"], FfcvBytesField)
    raw = np.memmap(path, mode="r")
    for f, values in (("f1", boxes), ("f2", tokens)):
        assert list(r.metadata[f]["size"]) == [values(i).nbytes for i in range(N)]
        for i, m in enumerate(r.metadata[f]):
            assert raw[m["ptr"]: m["ptr"] + m["size"]].tobytes() == values(i).tobytes()

    # FFCV's loader. Without empty arrays: FFCV 1.0.2 reads a sample stored right after an
    # empty one (the two allocations share a pointer) as the empty one, for its own
    # BytesFields as for these (docs/format.md).
    items = [(i, boxes(i)[: 1 + i % 4] if i % 5 else boxes(i + 1)[:1], tokens(i + (i % 8 == 0)))
             for i in range(N)]
    path = str(tmp_path / "full.beton")
    fields = {"label": IntField(), "boxes": VarArrayField(np.float32, (4,)),
              "tokens": VarArrayField("<i4")}
    DatasetWriter(path, fields, num_workers=3).from_indexed_dataset(items, progress=False)
    assert all(len(b) and len(t) for _, b, t in items)
    loader = FfcvLoader(path, batch_size=8, num_workers=1, order=FfcvOrder.SEQUENTIAL,
                        drop_last=False, pipelines={"label": [FfcvInt()], "boxes": [FfcvBytes()],
                                                    "tokens": [FfcvBytes()]})
    i = 0
    for label, blob, toks in loader:
        for row in range(len(label)):
            assert int(label[row][0]) == i
            for got, want in ((blob[row], items[i][1]), (toks[row], items[i][2])):
                data = np.asarray(got)[: want.nbytes].tobytes()
                assert data == want.tobytes(), i
                assert np.array_equal(np.frombuffer(data, want.dtype).reshape(want.shape), want)
            i += 1
    assert i == N


class PythonVarArrayDecoder(VarArrayDecoder):
    """The same decoder run through its Python ``generate_code`` (a subclass that overrides
    the protocol runs in Python)."""

    def generate_code(self):
        return VarArrayDecoder.generate_code(self)


@pytest.mark.parametrize("params", [{}, {"cap": 2, "truncate": True}])
def test_the_python_protocol_gives_the_native_rows(tmp_path, params):
    path = str(tmp_path / "var.beton")
    write(path)
    native = batches(path, **params)

    loader = Loader(path, batch_size=8, num_workers=2, order=OrderOption.SEQUENTIAL,
                    drop_last=False, pipelines={
                        "label": [IntDecoder()], "boxes": [PythonVarArrayDecoder(**params)],
                        "tokens": None})
    python = [np.asarray(b[1]).copy() for b in loader]
    assert len(python) == len(native)
    for (_, (padded, _), _), got in zip(native, python):
        assert np.array_equal(got, padded)
