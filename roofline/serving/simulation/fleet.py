"""Several replicas of one engine setup behind a router: the rate a fleet carries.

A router that does not look at the replicas' state splits the requests before they arrive, so
each replica is simulated on its own share and the shares are merged:
- ``round-robin``: request i to replica i mod N (of an open loop: every N-th arrival, smoother
  than Poisson; of a closed loop of C clients: client c to replica c mod N, so each runs the
  loop of its own clients);
- ``random``: each request to a replica drawn uniformly (seeded; an open loop's shares stay
  Poisson at rate / N).
A router that looks at the replicas' load (least outstanding requests) needs them simulated in
step with each other; it is not modelled here.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline.defaults import MAX_REPLICAS, ROUTERS
from roofline.serving.simulation.load import Requests
from roofline.serving.simulation.run import Run


def split(requests: Requests, replicas: int, router: str, seed: int = 0) -> list[np.ndarray]:
    """The indices of the requests each replica receives, in arrival order."""
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {', '.join(ROUTERS)}, got {router!r}")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= MAX_REPLICAS:
        raise ValueError(f"replicas must be an integer in [1, {MAX_REPLICAS}], got {replicas!r}")
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
