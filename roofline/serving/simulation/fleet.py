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
  requests (waiting, running, or finishing in the step under way), the lowest-numbered on a tie
  (a step ending at the same instant as the arrival has ended):
  the "least outstanding requests" policy of load balancers in front of serving engines. A closed
  loop's clients are not tied to a replica: each new request is routed on its own.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

import numpy as np

from roofline.defaults import MAX_REPLICAS, ROUTERS
from roofline.serving.simulation.clients import next_client_request, start_arrivals
from roofline.serving.simulation.load import Requests
from roofline.serving.simulation.run import MAX_STEPS, Replica, Run, SimulationTooLong
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
    replica's step); an arrival goes to the replica with the fewest outstanding requests then. A
    replica's stretch of identical decode steps runs on to its first finish and is cut back to
    the step that sees an arrival when one is routed to it (``Replica.cut``), so a stretch is
    redone only for the arrivals it receives. Returns each replica's run of its own requests and
    their indices (for ``merge``)."""
    check(replicas, "least-loaded")
    n = requests.count
    prompt, output = requests.prompt_tokens.astype(np.int64), requests.output_tokens.astype(np.int64)
    fleet = [Replica(prompt, output, times, kv_blocks, knobs)]
    fleet += [Replica(prompt, output, times, kv_blocks, knobs, beside=fleet[0]) for _ in range(replicas - 1)]
    rejected = fleet[0].rejected
    closed = requests.concurrency is not None
    if closed and requests.concurrency < replicas:
        raise ValueError(f"replicas: {replicas} replicas for {requests.concurrency} clients leave some idle")
    arrival = start_arrivals(requests)
    owner = np.zeros(n, np.int64)  # a request no replica can hold is counted on the first
    # Outstanding requests per replica: routed to it and not yet finished. A step's finished
    # requests leave at its end, and an end is taken before an arrival at the same instant.
    load = np.zeros(replicas, np.int64)
    ends: list[tuple[float, int, int]] = []  # (end of the step under way, replica, its version)
    version = np.zeros(replicas, np.int64)  # a cut stretch leaves its old end in the heap: skipped
    under_way = np.zeros(replicas, bool)
    ready: set[int] = set()  # replicas with work and no step under way: they start once no event precedes
    sent = 0
    remaining = int(n - rejected.sum())

    def push(r: int) -> None:
        heapq.heappush(ends, (fleet[r].now, r, int(version[r])))
        under_way[r] = True

    for _ in range(MAX_STEPS * (replicas + 1)):  # events: arrivals, step starts and ends of every replica
        if remaining == 0:
            break
        while ends and ends[0][2] != version[ends[0][1]]:
            heapq.heappop(ends)
        upcoming = float(arrival[sent]) if sent < n and not np.isnan(arrival[sent]) else np.inf
        next_end = ends[0][0] if ends else np.inf
        starting = sorted(r for r in ready if fleet[r].now < min(upcoming, next_end))
        if starting:  # every event up to their clock is in: they step
            ready.difference_update(starting)
            for r in starting:
                fleet[r].cuttable_step()
                push(r)
            continue
        if next_end <= upcoming and ends:
            t, r, _ = heapq.heappop(ends)
            under_way[r] = False
            done, fleet[r].finishing = fleet[r].finishing, np.zeros(0, np.int64)
            load[r] -= done.size
            remaining -= int(done.size)
            if closed:
                for _ in range(done.size):
                    next_client_request(arrival, sent, t)
            if fleet[r].busy:
                ready.add(r)
            continue
        if not np.isfinite(upcoming):
            break
        i, t = sent, upcoming
        sent += 1
        if rejected[i]:
            if closed:
                next_client_request(arrival, sent, t)
            continue
        r = int(np.argmin(load))  # the first of the least loaded
        owner[i] = r
        load[r] += 1
        if under_way[r]:
            if fleet[r].cut(t):  # its stretch of decodes now ends at the step that sees t
                version[r] += 1
                push(r)
        else:  # it starts at t, once every arrival at t is in
            fleet[r].now = max(fleet[r].now, t)
            ready.add(r)
        fleet[r].receive(i, t)
    else:
        raise SimulationTooLong(f"the simulation did not finish within {MAX_STEPS * (replicas + 1):,} events")
    parts = [np.flatnonzero(owner == r) for r in range(replicas)]
    return [fleet[r].result(arrival, parts[r]) for r in range(replicas)], parts
