"""DatasetWriter.from_indexed_dataset never calls the dataset concurrently: a dataset that
seeds NumPy's global generator and then draws from it (as FFCV's own array-field test
does) is written exactly, with several writer threads. The files are checked by parsing
them with NumPy (FFCV's layout, ffcv/types.py), independently of ffcv_rs's reader."""

import threading

import numpy as np
import pytest

from ffcv_rs.fields import IntField, NDArrayField
from ffcv_rs.fields.decoders import IntDecoder, NDArrayDecoder
from ffcv_rs.loader import Loader, OrderOption
from ffcv_rs.writer import DatasetWriter

N = 4096
SIZE = 512  # float32s per sample: small enough for ten writes in a few seconds

HEADER = np.dtype([("version", "<u2"), ("num_fields", "<u2"), ("page_size", "<u4"),
                   ("num_samples", "<u8"), ("alloc_table_ptr", "<u8")], align=True)
FIELD_DESC = np.dtype([("type_id", "<u1"), ("name", ("<u1", 16)),
                       ("arguments", ("<u1", (1024,)))], align=True)


class GlobalGeneratorDataset:
    """FFCV's tests/test_array_field.py dataset: the values depend on the global state."""

    def __init__(self, n, size):
        self.n = n
        self.size = size

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        np.random.seed(index)
        return index, np.random.randn(self.size).astype("<f4")


def expected_values(n, size):
    out = np.empty((n, size), dtype="<f4")
    for i in range(n):
        np.random.seed(i)
        out[i] = np.random.randn(size).astype("<f4")
    return out


def parse(path, metadata_type):
    """(header, field descriptors, metadata rows, file bytes) of a .beton file."""
    data = np.fromfile(path, dtype=np.uint8)
    header = data[:HEADER.itemsize].view(HEADER)[0]
    nf = int(header["num_fields"])
    descs = data[HEADER.itemsize:HEADER.itemsize + nf * FIELD_DESC.itemsize].view(FIELD_DESC)
    start = HEADER.itemsize + nf * FIELD_DESC.itemsize
    rows = data[start:start + int(header["num_samples"]) * metadata_type.itemsize]
    return header, descs, rows.view(metadata_type), data


def test_global_generator_dataset_three_workers_ten_writes_no_wrong_sample(tmp_path):
    want = expected_values(N, SIZE)
    row = np.dtype([("index", "<i8"), ("ptr", "<u8")], align=True)
    wrong = []
    for write in range(10):
        path = str(tmp_path / f"w{write}.beton")
        DatasetWriter(path, {"index": IntField(), "values": NDArrayField(np.dtype("<f4"), (SIZE,))},
                      num_workers=3).from_indexed_dataset(
            GlobalGeneratorDataset(N, SIZE), chunksize=100, progress=False)
        header, _, meta, data = parse(path, row)
        assert int(header["num_samples"]) == N
        assert meta["index"].tolist() == list(range(N))
        ptrs = meta["ptr"].astype(np.int64)
        got = np.stack([data[p:p + 4 * SIZE].view("<f4") for p in ptrs])
        wrong.append(int((got != want).any(axis=1).sum()))
    assert wrong == [0] * 10


def test_loader_reads_back_the_global_generator_samples(tmp_path):
    path = str(tmp_path / "g.beton")
    n, size = 700, 64
    DatasetWriter(path, {"index": IntField(), "values": NDArrayField(np.dtype("<f4"), (size,))},
                  num_workers=3).from_indexed_dataset(
        GlobalGeneratorDataset(n, size), chunksize=7, progress=False)
    loader = Loader(path, batch_size=64, order=OrderOption.SEQUENTIAL, drop_last=False,
                    pipelines={"index": [IntDecoder()], "values": [NDArrayDecoder()]})
    want = expected_values(n, size)
    seen = 0
    for index, values in loader:
        index = np.asarray(index)[:, 0]
        assert np.array_equal(np.asarray(values), want[index])
        seen += len(index)
    assert seen == n


def test_dataset_is_read_on_the_calling_thread_in_order(tmp_path):
    calls = []

    class Recording:
        def __len__(self):
            return 900

        def __getitem__(self, i):
            calls.append((threading.get_ident(), i))
            return (i,)

    order = list(np.random.default_rng(3).permutation(900))
    DatasetWriter(str(tmp_path / "r.beton"), {"v": IntField()}, num_workers=4).from_indexed_dataset(
        Recording(), indices=order, chunksize=10, progress=False)
    assert {t for t, _ in calls} == {threading.get_ident()}
    assert [i for _, i in calls] == [int(i) for i in order]


def test_progress_is_reported_on_the_calling_thread_up_to_the_total(tmp_path, monkeypatch):
    import ffcv_rs.writer as writer

    seen = []

    class Bar:
        def __init__(self, total, enabled):
            self.total = total

        def __call__(self, done):
            seen.append((threading.get_ident(), done))

        def close(self):
            pass

    monkeypatch.setattr(writer, "_Progress", Bar)
    DatasetWriter(str(tmp_path / "p.beton"), {"v": IntField()}, num_workers=3).from_indexed_dataset(
        [(i,) for i in range(1000)], chunksize=50)
    assert {t for t, _ in seen} == {threading.get_ident()}
    done = [d for _, d in seen]
    assert done == sorted(done) and done[-1] == 1000


def test_ctrl_c_while_reading_stops_the_write_and_leaves_no_file(tmp_path):
    import _thread
    import signal

    class Interrupting:
        def __len__(self):
            return 5000

        def __getitem__(self, i):
            if i == 700:
                _thread.interrupt_main()  # what Ctrl-C does; lands in this thread's Python code
            return (i,)

    # See test_lifecycle.py: Python's handler may not be installed in a background process.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    path = tmp_path / "i.beton"
    try:
        with pytest.raises(KeyboardInterrupt):
            DatasetWriter(str(path), {"v": IntField()}, num_workers=3).from_indexed_dataset(
                Interrupting(), chunksize=10, progress=False)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert list(tmp_path.iterdir()) == []
    # The writer is usable again at once.
    DatasetWriter(str(path), {"v": IntField()}, num_workers=3).from_indexed_dataset(
        [(i,) for i in range(50)], progress=False)
    assert path.exists()
