"""The simulation's bookkeeping against plain references: a closed loop's next request, found by
bisection over the requests not yet sent, is the one a scan of them finds; finished requests
leave the running list in the same order whether taken out one by one or by a scan."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from roofline.serving.simulation.clients import next_client_request, start_arrivals
from roofline.serving.simulation.load import Lengths, Load, make_requests
from roofline.serving.simulation.scheduler import RELEASE_BY_REMOVAL, Pool, release


def _next_by_scan(arrival: np.ndarray, sent: int, t: float) -> None:
    """The rule worked plainly: the first request with no arrival is found by looking at each."""
    pending = [k for k in range(sent, arrival.size) if np.isnan(arrival[k])]
    if pending:
        j = pending[0]
    else:
        j = arrival.size - 1
        if j < sent or not arrival[j] > t:
            return
    i = sent + int(np.searchsorted(arrival[sent:j], t, side="right"))
    arrival[i + 1 : j + 1] = arrival[i:j].copy()
    arrival[i] = t


@pytest.mark.parametrize("seed", range(6))
def test_a_closed_loops_next_request_is_the_one_a_scan_finds(seed):
    rng = np.random.default_rng(seed)
    clients = int(rng.integers(1, 9))
    count = int(rng.integers(clients, 40))
    ramp_s = float(rng.choice([0.0, 3.0]))
    arrival = start_arrivals(
        make_requests(Load("concurrency", count, Lengths(8), Lengths(4), concurrency=clients, ramp_s=ramp_s))
    )
    reference = arrival.copy()
    sent, t = 0, 0.0
    for _ in range(3 * count):  # past the budget: the last calls change nothing
        t += float(rng.exponential(0.5))
        while sent < count and arrival[sent] <= t:
            sent += 1
        next_client_request(arrival, sent, t)
        _next_by_scan(reference, sent, t)
        np.testing.assert_array_equal(arrival, reference)
    assert not np.isnan(arrival).any()  # every request of the budget was sent


@pytest.mark.parametrize("finished", [1, RELEASE_BY_REMOVAL, RELEASE_BY_REMOVAL + 1, 40])
def test_finished_requests_leave_the_running_list_in_order(finished):
    rng = np.random.default_rng(finished)
    running = rng.permutation(100)[:60].tolist()
    blocks = rng.integers(0, 5, 100)
    pool = Pool(
        tokens=np.zeros(100, np.int64),
        computed=np.zeros(100, np.int64),
        blocks=blocks.copy(),
        free_blocks=7,
        running=list(running),
        waiting=deque(),
        preemptions=np.zeros(100, np.int64),
    )
    done = rng.choice(running, finished, replace=False)
    release(pool, done)
    assert pool.running == [i for i in running if i not in set(done.tolist())]
    assert pool.free_blocks == 7 + int(blocks[done].sum())
    assert not pool.blocks[done].any()
