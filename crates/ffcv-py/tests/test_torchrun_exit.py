"""A 2-rank torchrun job that ends with ``destroy_process_group()`` and a normal exit.

With torch 2.5 and gloo such a job can hang at exit, with or without a loader: the
ProcessGroup's destructor joins gloo's worker threads while it holds the GIL, and a
worker thread still freeing a collective's tensors waits for the GIL
(docs/troubleshooting.md, "A torchrun job hangs in destroy_process_group()"). The worker,
torchrun_exit_worker.py, ends as that entry tells users to, and these tests check that its
jobs finish, exit 0 through the interpreter's normal shutdown, and saw the right samples,
and that the only thread of the loader alive at exit is its one idle worker.
Skipped without torch (CI); run in the reference environment with torch."""

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys

import pytest

from conftest import fixture, torch_or_skip

WORKER = pathlib.Path(__file__).resolve().parent / "torchrun_exit_worker.py"
# A hang is the only failure timed here: a launch takes 5-10 s on a loaded 2-CPU machine.
TIMEOUT = 150


def torchrun_or_skip():
    torch_or_skip()
    try:
        import torch.distributed.run  # noqa: F401  (what the torchrun command runs)
    except ImportError:
        pytest.skip("torch.distributed.run (torchrun) is not available in this torch build")
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch build has no torch.distributed with the gloo backend")


def free_port():
    """A TCP port nobody listens on now (the OS's pick), for torchrun's store."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid):
    """The processes whose parent is ``pid`` (from /proc): torchrun starts each rank in a
    session of its own, so killing the agent's process group leaves the ranks running."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


#: The prefixes of the names the Rust crates give their threads (`ffcv-worker-0`,
#: `ffcv-producer-1`, `page-reader-0`, `pipeline-0`, ...).
OUR_THREAD_PREFIXES = ("ffcv-", "page-reader-", "pipeline-")


def run_job(mode, out):
    """Runs torchrun_exit_worker.py MODE on 2 ranks (gloo on loopback, a static rendezvous
    on 127.0.0.1) and returns the ranks' records; fails on a timeout (after killing the
    ranks and the agent) or a non-zero exit."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
           "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), "--max_restarts", "0",
           str(WORKER), mode, fixture("scalars"), str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        for pid in children(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"torchrun {mode} still running after {TIMEOUT} s (a hang at exit?):\n"
                    f"{output}")
    assert proc.returncode == 0, output
    records = []
    for rank in (0, 1):
        # The atexit hook ran: the rank went through the interpreter's normal shutdown.
        assert (out / f"{mode}-{rank}.exited").exists(), output
        with open(out / f"{mode}-{rank}.json") as f:
            records.append(json.load(f))
    return records


@pytest.mark.parametrize("mode", ["epoch", "break", "inflight", "none"])
def test_torchrun_job_destroys_its_group_and_exits_normally(tmp_path, mode):
    torchrun_or_skip()
    ranks = run_job(mode, tmp_path)
    assert [r["destroyed"] for r in ranks] == [True, True]
    assert [r["live_threads"] for r in ranks] == [0, 0]
    # Threads of ours at exit: the loader's one idle worker (num_workers=1), no epoch,
    # cache or runtime thread. Ours are told by the names the Rust crates give them: gloo's
    # keep the process's name in torch 2.5 and are named (`gloo_tcp_loop`) in 2.15.
    ours = [[n for n in r["threads"] if n.startswith(OUR_THREAD_PREFIXES)] for r in ranks]
    assert ours == ([[], []] if mode == "none" else [["ffcv-worker-0"]] * 2), ranks
    assert ranks[0]["everyone"] == ranks[1]["everyone"] == [r["ids"] for r in ranks]
    ids = [i for r in ranks for i in r["ids"]]
    if mode == "break":
        assert [len(r["ids"]) for r in ranks] == [20, 20]
        assert len(set(ids)) == 40
    elif mode == "none":
        assert ids == []
    else:
        assert sorted(ids) == list(range(100))
