"""A trace exported from two CPU ranks under torch.distributed (gloo, forked processes, a tiny
all-reduce) imports with each rank's communication time and the skew between them.

The ranks are started from a fresh interpreter running this file: spawned from the test process,
they would re-run whatever script that process last ran as ``__main__`` (a page, under AppTest)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from roofline.profile import import_trace_files  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, folder: str) -> None:
    import time

    from torch.profiler import ProfilerActivity, profile, record_function

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x = torch.ones(4096)
    dist.all_reduce(x)  # the connection is set up outside the profile
    dist.barrier()  # both ranks enter the profiled step together
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("roofline.step"):
            y = x * 2
            if rank == 1:
                time.sleep(0.02)  # rank 1 arrives late: rank 0 waits inside the collective
            dist.all_reduce(y)
    prof.export_chrome_trace(f"{folder}/rank{rank}.json")
    dist.barrier()  # neither rank tears down while the other still writes
    dist.destroy_process_group()
    # Both traces are written. The interpreter's own exit can then abort ("terminate called without
    # an active exception", about one run in ten on a busy 2-core host): a thread of torch's that is
    # still joinable when its static objects are destroyed. That teardown is no part of what is
    # tested, so the rank leaves without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def test_two_gloo_ranks_import_with_their_communication(tmp_path):
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, __file__, str(tmp_path)], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    prof = import_trace_files([str(tmp_path / "rank0.json"), str(tmp_path / "rank1.json")])
    assert [r.rank for r in prof.ranks] == [0, 1]
    r0, r1 = prof.ranks
    assert r0.collectives == r1.collectives == 1
    assert r0.communication_s > 0 and r1.communication_s > 0
    # Rank 1 slept before the all-reduce, so the ranks reached it apart: a skew is measured. How
    # long the early rank waited is a timing of this busy host, not a test; the skew and wait
    # arithmetic is checked on a hand-written two-rank trace in test_profile_trace.py.
    assert prof.skew_s > 0
    comm = [o for o in prof.level("aten", 0) if o.name == "collectives (gloo)"]
    assert comm and comm[0].comm_bytes == 4096 * 4


if __name__ == "__main__":
    import torch.multiprocessing as mp

    # Forked from this fresh interpreter, which has imported torch and run nothing else: the ranks
    # start without importing it again each.
    mp.start_processes(_rank, args=(2, _free_port(), sys.argv[1]), nprocs=2, start_method="fork")
