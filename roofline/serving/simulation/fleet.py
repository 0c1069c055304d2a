"""Several replicas of one engine setup behind a router: the rate a fleet carries.

A router that does not look at the replicas' state splits the requests before they arrive, so
each replica is simulated on its own share and the shares are merged:
- ``round-robin``: request i to replica i mod N (of an open loop: every N-th arrival, smoother
  than Poisson; of a closed loop of C clients: client c to replica c mod N, so each runs the
  loop of its own clients);
- ``random``: each request to a replica drawn uniformly (seeded; an open loop's shares stay
  Poisson at rate / N).
A router that looks at the replicas' load needs them simulated in step with each other
(``least_loaded``):
- ``least-loaded``: each request, when it arrives, to the replica holding the fewest outstanding
  requests (waiting, running, or finishing in the step under way), the lowest-numbered on a tie:
  the "least outstanding requests" policy of load balancers in front of serving engines. A closed
  loop's clients are not tied to a replica: each new request is routed on its own.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

import numpy as np

from roofline.defaults import MAX_REPLICAS, ROUTERS
from roofline.serving.simulation.load import Requests
from roofline.serving.simulation.run import MAX_STEPS, Replica, Run, next_client_request, start_arrivals
from roofline.serving.simulation.scheduler import EngineKnobs
from roofline.serving.simulation.steptime import StepTimes

# Routers that split the requests before they arrive (``split``); the others see the replicas.
SPLITTING = ("round-robin", "random")


def check(replicas: int, router: str) -> None:
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {', '.join(ROUTERS)}, got {router!r}")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= MAX_REPLICAS:
        raise ValueError(f"replicas must be an integer in [1, {MAX_REPLICAS}], got {replicas!r}")


def split(requests: Requests, replicas: int, router: str, seed: int = 0) -> list[np.ndarray]:
    """The indices of the requests each replica receives, in arrival order."""
    check(replicas, router)
    if router not in SPLITTING:
        raise ValueError(f"router {router!r} does not split the requests in advance: see least_loaded")
    n = requests.count
    if requests.concurrency is not None:
        if requests.concurrency < replicas:
            raise ValueError(f"replicas: {replicas} replicas for {requests.concurrency} clients leave some idle")
        # Closed loop: clients are split; client c's requests are c, c + C, c + 2C, ... in send order.
        owner = np.arange(n) % requests.concurrency
        clients = (
            np.arange(requests.concurrency) % replicas
            if router == "round-robin"
            else np.random.default_rng(seed).integers(0, replicas, requests.concurrency)
        )
        target = clients[owner]
    elif router == "round-robin":
        target = np.arange(n) % replicas
    else:
        target = np.random.default_rng(seed).integers(0, replicas, n)
    return [np.flatnonzero(target == r) for r in range(replicas)]


def share(requests: Requests, index: np.ndarray, clients: int | None) -> Requests:
    """The requests one replica receives (a closed loop keeps its own clients)."""
    return Requests(
        requests.arrival_s[index],
        requests.prompt_tokens[index],
        requests.output_tokens[index],
        concurrency=clients,
    )


def merge(runs: list[Run], parts: list[np.ndarray], total: int) -> Run:
    """One fleet-wide Run: every request back in its place, the steps and preemptions summed, the
    busiest replica's time series (``step_*``) kept."""

    def gather(name: str, fill) -> np.ndarray:
        first = getattr(runs[0], name)
        out = np.full(total, fill, dtype=first.dtype)
        for run, index in zip(runs, parts):
            out[index] = getattr(run, name)
        return out

    busiest = max(range(len(runs)), key=lambda r: runs[r].steps)
    return replace(
        runs[busiest],
        arrival_s=gather("arrival_s", np.nan),
        first_token_s=gather("first_token_s", np.nan),
        finish_s=gather("finish_s", np.nan),
        prompt_tokens=gather("prompt_tokens", 0),
        output_tokens=gather("output_tokens", 0),
        preemptions=gather("preemptions", 0),
        rejected=gather("rejected", False),
        itl_s=np.concatenate([r.itl_s for r in runs]),
        itl_weight=np.concatenate([r.itl_weight for r in runs]),
        steps=sum(r.steps for r in runs),
        kv_blocks=sum(r.kv_blocks for r in runs),
    )


def least_loaded(
    requests: Requests, times: StepTimes, kv_blocks: int, knobs: EngineKnobs, replicas: int
) -> tuple[list[Run], list[np.ndarray]]:
    """Every replica simulated in step: events in time order (an arrival, or the end of a
    replica's step); an arrival goes to the replica with the fewest outstanding requests then.
    Returns each replica's run of its own requests and their indices (for ``merge``)."""
    check(replicas, "least-loaded")
    n = requests.count
    prompt, output = requests.prompt_tokens.astype(np.int64), requests.output_tokens.astype(np.int64)
    fleet = [Replica(prompt, output, times, kv_blocks, knobs) for _ in range(replicas)]
    rejected = fleet[0].rejected
    closed = requests.concurrency is not None
    arrival = start_arrivals(requests)
    owner = np.zeros(n, np.int64)  # a request no replica can hold is counted on the first
    ends: list[tuple[float, int]] = []  # (end of the step under way, replica)
    ready: set[int] = set()  # replicas with work and no step under way: they start once no event precedes
    sent = 0
    remaining = int(n - rejected.sum())

    def start(r: int) -> None:
        # A stretch of decode steps stops at the next arrival; in a closed loop, a step ending on
        # another replica may send one (its client's next request), so that bounds it too.
        upcoming = arrival[sent] if sent < n else np.nan
        if closed and ends:
            upcoming = np.fmin(upcoming, ends[0][0])
        fleet[r].step(upcoming)
        heapq.heappush(ends, (fleet[r].now, r))

    for _ in range(MAX_STEPS):
        if remaining == 0:
            break
        upcoming = float(arrival[sent]) if sent < n and not np.isnan(arrival[sent]) else np.inf
        next_end = ends[0][0] if ends else np.inf
        starting = sorted(r for r in ready if fleet[r].now < min(upcoming, next_end))
        if starting:  # every arrival up to their clock is in: they step
            ready.difference_update(starting)
            for r in starting:
                start(r)
            continue
        if upcoming <= next_end and np.isfinite(upcoming):
            i, t = sent, upcoming
            sent += 1
            if rejected[i]:
                if closed:
                    next_client_request(arrival, sent, t)
                continue
            r = min(range(replicas), key=lambda k: (fleet[k].outstanding(t), k))
            owner[i] = r
            fleet[r].pool.waiting.append(i)
            if all(r != k for _, k in ends):  # no step under way: it starts at t
                fleet[r].now = max(fleet[r].now, t)
                ready.add(r)
            continue
        if not ends:
            break
        t, r = heapq.heappop(ends)
        done, fleet[r].finishing = fleet[r].finishing, np.zeros(0, np.int64)
        remaining -= int(done.size)
        if closed:
            for _ in range(done.size):
                next_client_request(arrival, sent, t)
        if fleet[r].busy:
            ready.add(r)
    else:
        raise RuntimeError(f"the simulation did not finish within {MAX_STEPS:,} steps")
    parts = [np.flatnonzero(owner == r) for r in range(replicas)]
    return [fleet[r].result(arrival, parts[r]) for r in range(replicas)], parts
