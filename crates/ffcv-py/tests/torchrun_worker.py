"""One rank of the torchrun tests in test_torch.py (not collected by pytest itself).

``python -m torch.distributed.run ... torchrun_worker.py MODE FILE OUT [K]``:

- ``full``: one whole epoch; every rank writes the sample ids it saw;
- ``stop``: K batches, then the rank's ``state_dict()`` and its ids so far, then exit
  (the epoch is left unfinished, as a job killed after a checkpoint would);
- ``resume``: a new Loader (no seed again), ``load_state_dict`` of rank 0's saved state,
  then the rest of the epoch.

Each rank writes ``OUT/<mode>-<rank>.json``: its ids, the seeds every rank used (an
``all_gather``), the world size and the state dict. The checks are the test's.

Nothing here may wait forever: the process group has a timeout, and faulthandler dumps
every thread's stack and exits if the rank is still running after ``DEADLINE`` seconds,
so that a hang shows where it is instead of only running into the test's timeout.
"""

import datetime
import faulthandler
import json
import os
import sys

DEADLINE = 150
faulthandler.dump_traceback_later(DEADLINE, exit=True)

import torch.distributed as dist  # noqa: E402

from ffcv_rs.fields.decoders import IntDecoder  # noqa: E402
from ffcv_rs.loader import Loader, OrderOption  # noqa: E402


def main() -> None:
    mode, fname, out = sys.argv[1], sys.argv[2], sys.argv[3]
    k = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    # No seed: the ranks must agree on one by themselves.
    loader = Loader(fname, batch_size=10, order=OrderOption.RANDOM, distributed=True,
                    num_workers=1, drop_last=False,
                    pipelines={"index": [IntDecoder()], "value": None})
    state = None
    if mode == "resume":
        with open(os.path.join(out, "stop-0.json")) as f:
            loader.load_state_dict(json.load(f)["state"])
    mine = []
    if mode == "stop":
        it = iter(loader)
        for _ in range(k):
            (index,) = next(it)
            mine += index[:, 0].tolist()
        state = loader.state_dict()
        it.close()
        del it
    else:
        for (index,) in loader:
            mine += index[:, 0].tolist()
    seeds = [None] * world
    dist.all_gather_object(seeds, loader.seed)
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    record = {"rank": rank, "world": world, "seeds": seeds, "ids": mine,
              "everyone": everyone, "state": state, "live_threads": loader.live_threads()}
    path = os.path.join(out, f"{mode}-{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)
    # Every rank is past the collectives above once the barrier returns.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not dist.destroy_process_group() nor a normal interpreter exit: with torch 2.5 both
    # can deadlock. Freeing the gloo process group joins its worker threads while holding
    # the GIL, and a worker thread that is still destroying a finished collective (the
    # all_gather_object above) frees that collective's tensors, whose Python objects need
    # the GIL. Seen here: main thread in ~ProcessGroupGloo -> std::thread::join, gloo's
    # runLoop in ~AsyncAllgatherWork -> PyObjectSlot::maybe_destroy_pyobj -> take_gil.
    # The window is short, so the hang came and went with the machine's load. The
    # loader's own threads are joined already (live_threads above, checked by the test).
    os._exit(0)


if __name__ == "__main__":
    main()
