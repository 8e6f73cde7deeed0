"""Ctrl-C while the loader waits on a stalled source: a loopback HTTP server that answers
the file's header and tables, then holds every data read until the test lets it go, and a
real SIGINT sent to the main thread while it waits for a batch.

Run as a script, it measures how long the interrupt takes to arrive:
``python crates/ffcv-py/tests/test_interrupt.py [RUNS]`` prints the median and the range
over RUNS interrupts (20 by default)."""

import contextlib
import gc
import http.server
import os
import signal
import statistics
import sys
import threading
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import fixture  # noqa: E402
from ffcv_rs.fields.decoders import BytesDecoder, IntDecoder  # noqa: E402
from ffcv_rs.loader import Loader, OrderOption  # noqa: E402

#: How long the server holds a data read at most: far longer than any wait for the
#: interrupt, so that a test that sees the interrupt saw it while the source was stalled.
STALL_S = 60.0


class StallingServer:
    """Serves one file over HTTP/1.1 with HEAD, ranged GET and an ETag. Once ``stall()``
    is called, every GET waits until ``release()`` (or ``STALL_S``) before it answers."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.content = f.read()
        self.etag = '"v1"'
        self.stalling = threading.Event()
        self.released = threading.Event()
        #: Set once a GET is being held.
        self.holding = threading.Event()
        self.held = 0
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # An idle kept-alive connection ends after this, so that closing the server
            # (which joins its threads) never waits on a client that went quiet.
            timeout = 5

            def log_message(self, *args):
                pass

            def _head(self, status, length, extra=()):
                self.send_response(status)
                self.send_header("ETag", server.etag)
                self.send_header("Last-Modified", "Tue, 01 Dec 2026 12:00:00 GMT")
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(length))
                for k, v in extra:
                    self.send_header(k, v)
                self.end_headers()

            def do_HEAD(self):
                self._head(200, len(server.content))

            def do_GET(self):
                try:
                    self._get()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the loader gave up on this read (a stopped epoch)

            def _get(self):
                if server.stalling.is_set():
                    with server._lock:
                        server.held += 1
                    server.holding.set()
                    server.released.wait(STALL_S)
                total = len(server.content)
                rng = self.headers.get("Range")
                if rng is None:
                    self._head(200, total)
                    self.wfile.write(server.content)
                    return
                start, end = (int(x) for x in rng.removeprefix("bytes=").split("-"))
                end = min(end, total - 1)
                self._head(206, end + 1 - start,
                           [("Content-Range", f"bytes {start}-{end}/{total}")])
                self.wfile.write(server.content[start:end + 1])

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # Joined by server_close, so that no thread of the server outlives a test.
        self.httpd.daemon_threads = False
        self.httpd.block_on_close = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/data/file.beton"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stall(self):
        self.released.clear()
        self.holding.clear()
        self.stalling.set()

    def release(self):
        self.stalling.clear()
        self.released.set()

    def close(self):
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@contextlib.contextmanager
def stalling_server(path):
    server = StallingServer(path)
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def ctrl_c_handler():
    # A process started in the background by a non-interactive shell inherits SIGINT
    # ignored, and then Python installs no handler: install it, as an interactive run has.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def blob_loader(url):
    # retain_pages=False: every epoch reads its pages again, so that an epoch started
    # while the server holds reads cannot be served from pages an earlier one kept.
    return Loader(url, batch_size=2, num_workers=2, order=OrderOption.SEQUENTIAL,
                  retain_pages=False,
                  pipelines={"index": [IntDecoder()], "blob": [BytesDecoder()]})


def epoch_rows(loader):
    """Every batch of one epoch as (index rows, blob rows), copied out."""
    return [(np.array(i), np.array(b)) for i, b in loader]


def ffcv_threads():
    """The names of this process's epoch threads (producers, page readers), from /proc
    (the decoding pool and the remote source's runtime belong to the loader, not to an
    epoch); None where there is no /proc."""
    try:
        tids = os.listdir("/proc/self/task")
    except FileNotFoundError:
        return None
    names = []
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except FileNotFoundError:  # a thread that just ended
            continue
        if name.startswith(("ffcv-producer", "page-reader")):
            names.append(name)
    return sorted(names)


def interrupt_when_held(server, sent_at):
    """Sends SIGINT to the main thread once the server holds a read; records when."""
    main = threading.main_thread().ident

    def run():
        if server.holding.wait(STALL_S):
            # Let the main thread settle into its wait for the batch.
            time.sleep(0.05)
            sent_at.append(time.perf_counter())
            signal.pthread_kill(main, signal.SIGINT)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def interrupt_once(loader, server):
    """Runs an epoch that stalls, interrupts it; returns the latency in seconds."""
    server.stall()
    sent_at = []
    sender = interrupt_when_held(server, sent_at)
    with pytest.raises(KeyboardInterrupt):
        for _batch in loader:
            pytest.fail("a batch came while every data read was held")
    caught = time.perf_counter()
    sender.join(STALL_S)
    # The interrupt came while the source was still stalled: no read has been answered.
    assert server.stalling.is_set() and not server.released.is_set()
    assert server.held >= 1
    assert len(sent_at) == 1
    return caught - sent_at[0]


def test_ctrl_c_while_the_source_is_stalled_raises_and_the_loader_stays_usable():
    path = fixture("multipage")
    reference = epoch_rows(Loader(path, batch_size=2, num_workers=2,
                                  order=OrderOption.SEQUENTIAL,
                                  pipelines={"index": [IntDecoder()], "blob": [BytesDecoder()]}))
    with ctrl_c_handler(), stalling_server(path) as server:
        loader = blob_loader(server.url)
        # Loaders of earlier tests that wait in reference cycles (as `pytest.raises` makes)
        # end their threads when collected: collect them now, not in the count below.
        gc.collect()
        threads_before = ffcv_threads()
        latency = interrupt_once(loader, server)
        print(f"interrupt latency: {latency * 1000:.1f} ms")
        # Let the held reads go: the stopped epoch's threads end, and the next epoch runs
        # completely, with the values of the same epoch read from the local file.
        server.release()
        rows = epoch_rows(loader)
        gc.collect()
        assert loader.live_threads() == 0
        assert ffcv_threads() == threads_before
        # Freed before the server closes (its connections end with the loader), and
        # now: `pytest.raises` keeps the frames, and so the loader, in a cycle.
        del loader
        gc.collect()
    assert len(rows) == len(reference) == 20
    for (index, blob), (ref_index, ref_blob) in zip(rows, reference):
        np.testing.assert_array_equal(index, ref_index)
        np.testing.assert_array_equal(blob, ref_blob)
    ids = sorted(int(i) for index, _blob in rows for i in index[:, 0])
    assert ids == list(range(40))


def test_ctrl_c_twice_then_a_full_epoch():
    """Two interrupted epochs in a row (the second starts while the first's read is still
    held: it waits for it), then a complete epoch."""
    path = fixture("multipage")
    with ctrl_c_handler(), stalling_server(path) as server:
        loader = blob_loader(server.url)
        interrupt_once(loader, server)
        # The first epoch's read is still held; release it only once the second epoch
        # has begun waiting, from another thread.
        releaser = threading.Timer(0.5, server.release)
        releaser.start()
        for batch_index, _batch in enumerate(loader):
            if batch_index == 0:
                break
        releaser.join()
        interrupt_once(loader, server)
        server.release()
        ids = sorted(int(i) for index, _blob in epoch_rows(loader) for i in index[:, 0])
        gc.collect()
        assert loader.live_threads() == 0
        del loader
        gc.collect()
    assert ids == list(range(40))


def measure(runs):
    path = fixture("multipage")
    latencies = []
    with ctrl_c_handler(), stalling_server(path) as server:
        loader = blob_loader(server.url)
        for _ in range(runs):
            latencies.append(interrupt_once(loader, server))
            server.release()
            # The next epoch joins the stopped one (its held read now answered).
            assert len(epoch_rows(loader)) == 20
        del loader
        gc.collect()
    ms = sorted(x * 1000 for x in latencies)
    print(f"SIGINT to KeyboardInterrupt, {runs} runs with every data read held: "
          f"median {statistics.median(ms):.1f} ms, min {ms[0]:.1f} ms, max {ms[-1]:.1f} ms")


if __name__ == "__main__":
    measure(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
