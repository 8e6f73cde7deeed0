"""One rank of the torchrun exit tests in test_torchrun_exit.py (not collected by pytest).

``python -m torch.distributed.run ... torchrun_exit_worker.py MODE FILE OUT [plain]``: a
job that ends the way training scripts do, with a destroy of the process group and a
normal return from ``main``, so the interpreter shuts down normally (atexit hooks,
finalization; no ``os._exit``). MODE:

- ``epoch``: a distributed Loader (no seed: the ranks agree on one through
  ``broadcast_object_list``), one whole epoch, then ``all_gather_object`` of the ids seen:
  a collective right before the destroy, the pattern that can hang at exit with torch 2.5;
- ``break``: the same, leaving the epoch after 2 batches; the loader is freed when ``main``
  returns (in the other modes it lives until the interpreter's finalization);
- ``inflight``: a whole epoch, then an ``all_reduce`` that is still running when the
  process group is destroyed (rank 1 joins it a second late) and whose tensor Python has
  already dropped, so gloo's worker thread frees it during the destroy (with ``plain`` it
  hangs every time);
- ``none``: no loader, only the ``all_gather_object``.

The destroy is ``destroy_process_group()`` below, the recipe of docs/troubleshooting.md;
with ``plain``, torch's own ``dist.destroy_process_group()``, which can hang in the first
three modes and does hang every time in ``inflight`` (torch 2.5, gloo). The measurements
of that entry are runs of this file.

The record holds the names of the process's threads (``/proc/self/task/*/comm``) just
before the destroy, so the test can tell which threads of the loader are alive at exit.

Each rank writes ``OUT/<mode>-<rank>.json`` after the destroy returned, and
``OUT/<mode>-<rank>.exited`` from an atexit hook, which only a normal exit runs. The
checks are the test's. faulthandler dumps every thread's stack and exits with status 1 if
the rank is still running after ``DEADLINE`` seconds, so a hang shows where it is.
"""

import atexit
import datetime
import faulthandler
import json
import os
import sys
import time

DEADLINE = 90
faulthandler.dump_traceback_later(DEADLINE, exit=True)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from ffcv_rs.fields.decoders import IntDecoder  # noqa: E402
from ffcv_rs.loader import Loader, OrderOption  # noqa: E402


def destroy_process_group() -> None:
    """``dist.destroy_process_group()`` without torch's gloo exit deadlock (the recipe of
    docs/troubleshooting.md, "A torchrun job hangs in destroy_process_group()").

    Holding each group's gloo backend moves the backend's destructor, which joins gloo's
    worker threads, out of the ProcessGroup's (which keeps the GIL) into the backend's
    own, which releases the GIL first; a worker thread that is still freeing a
    collective's tensors (finished, or still running at the destroy) can then take it.
    It only works if the destroy frees the last reference to each ProcessGroup: none may
    be left in a variable."""
    backends = []
    for group in list(dist.distributed_c10d._world.pg_map):
        try:
            backends.append(group._get_backend(torch.device("cpu")))
        except RuntimeError:  # a group without a CPU (gloo) backend
            pass
    # The loop variable still holds the last group: kept, it would make this function's
    # return, not the destroy, free that ProcessGroup, and its destructor would then
    # free the backend too (``del backends`` having let go of it) with the GIL held.
    group = None
    dist.destroy_process_group()
    del backends


KEPT = []


def thread_names() -> list:
    """The names of this process's threads, sorted (Linux: ``/proc/self/task``)."""
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                names.append(f.read().strip())
        except OSError:  # the thread ended meanwhile
            pass
    return sorted(names)


def main() -> None:
    mode, fname, out = sys.argv[1], sys.argv[2], sys.argv[3]
    plain = sys.argv[4:] == ["plain"]
    rank_env = os.environ["RANK"]
    atexit.register(lambda: open(os.path.join(out, f"{mode}-{rank_env}.exited"), "w").close())
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = []
    loader = None
    if mode != "none":
        loader = Loader(fname, batch_size=10, order=OrderOption.RANDOM, distributed=True,
                        num_workers=1, drop_last=False,
                        pipelines={"index": [IntDecoder()], "value": None})
        for i, (index,) in enumerate(loader):
            mine += index[:, 0].tolist()
            if mode == "break" and i == 1:
                break
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    live_threads = loader.live_threads() if loader is not None else 0
    threads = thread_names()
    if mode == "inflight":
        if rank == 1:
            time.sleep(1)
        t = torch.ones(4)
        work = dist.all_reduce(t, async_op=True)
        if rank == 1:
            work.wait()
        del t, work
    if mode in ("epoch", "inflight"):
        # Kept to the end, as a module-level loader is: its idle worker thread is still
        # alive when the interpreter shuts down, and the loader is freed in finalization.
        KEPT.append(loader)
    if plain:
        dist.destroy_process_group()
    else:
        destroy_process_group()
    record = {"rank": rank, "world": world, "ids": mine, "everyone": everyone,
              "live_threads": live_threads, "threads": threads,
              "destroyed": not dist.is_initialized()}
    path = os.path.join(out, f"{mode}-{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
