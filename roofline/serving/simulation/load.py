"""The load a benchmark puts on a server, as the serving benchmarks define it.

- Closed loop (``vllm bench serve --max-concurrency``, GuideLLM's concurrent profile, aiperf's
  concurrency): C clients, each sending its next request as soon as its last one finishes. They
  start together, as those tools start them by default, or one at a time over ``ramp_s`` as
  aiperf's ``--concurrency-ramp-duration`` starts them (its linear ramp from 1 to C clients: client
  k of 1..C starts at (k - 1) / (C - 1) x ``ramp_s``). Clients that start together on identical
  requests stay in step: every round's prompts arrive at once, each waiting for the others'
  prefill. A ramp as long as one request spreads them out of step.
- Open loop at a rate (``--request-rate``, GuideLLM's poisson / constant profiles): arrivals
  with exponential gaps (Poisson), gamma gaps with a burstiness factor (vLLM's ``--burstiness``:
  shape = burstiness, mean gap = 1 / rate; 1 is Poisson, lower is burstier), or evenly spaced.
  The rate may ramp as ``vllm bench serve --ramp-up-strategy`` ramps it (``rate_ramp``): request i
  of N is drawn at start + (end - start) x i / (N - 1) requests/s (linear), or start x (end /
  start) ^ (i / (N - 1)) (exponential).
- A trace: a file of arrivals and lengths (``roofline.serving.simulation.traces``: JSONL, or the
  CSV of Azure's and BurstGPT's public traces).

Prompt and output lengths are fixed, uniform within a range, or drawn from a list, with a seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from roofline.defaults import MAX_RATE_PER_S, RATE_RAMPS

MAX_REQUESTS = 1_000_000
MAX_TOKENS = 1 << 24
LOAD_KINDS = ("concurrency", "poisson", "gamma", "constant", "trace")


def _check_int(value, name: str, top: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 1 <= value <= top:
        raise ValueError(f"{name} must be an integer in [1, {top:,}], got {value!r}")
    return int(value)


def _check_number(value, name: str, low: float, high: float) -> float:
    ok = isinstance(value, int | float | np.floating) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not low < value <= high:
        raise ValueError(f"{name} must be a number in ({low:g}, {high:g}], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Lengths:
    """Token counts of prompts or outputs: ``low`` alone is fixed; ``low`` to ``high`` uniform."""

    low: int
    high: int | None = None

    def __post_init__(self) -> None:
        _check_int(self.low, "length", MAX_TOKENS)
        if self.high is not None:
            _check_int(self.high, "length", MAX_TOKENS)
            if self.high < self.low:
                raise ValueError(f"length range: {self.high} is below {self.low}")

    @property
    def mean(self) -> float:
        return self.low if self.high is None else (self.low + self.high) / 2

    @property
    def most(self) -> int:
        return self.low if self.high is None else self.high

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.high is None:
            return np.full(n, self.low, np.int64)
        return rng.integers(self.low, self.high + 1, n, dtype=np.int64)


@dataclass(frozen=True)
class Load:
    """What arrives: ``kind`` in LOAD_KINDS; ``concurrency`` clients for a closed loop, ``rate``
    requests per second for an open one; ``requests`` in all."""

    kind: str
    requests: int
    prompt: Lengths
    output: Lengths
    rate_per_s: float | None = None
    concurrency: int | None = None
    burstiness: float = 1.0
    seed: int = 0
    ramp_s: float = 0.0  # closed loop: the clients start one at a time over this window (aiperf's linear ramp)
    rate_ramp: tuple[str, float, float] | None = None  # open loop: (linear | exponential, start, end requests/s)

    def __post_init__(self) -> None:
        if self.kind not in LOAD_KINDS:
            raise ValueError(f"load: {self.kind!r} is not allowed; allowed: {', '.join(LOAD_KINDS)}")
        _check_int(self.requests, "requests", MAX_REQUESTS)
        if self.kind == "concurrency":
            _check_int(self.concurrency, "concurrency", 1 << 20)
        elif self.kind in ("poisson", "gamma", "constant"):
            _check_number(self.rate_per_s, "rate", 0.0, MAX_RATE_PER_S)
        _check_number(self.burstiness, "burstiness", 0.0, 1e3)
        if self.ramp_s:
            _check_number(self.ramp_s, "ramp_s", 0.0, 1e7)
            if self.kind != "concurrency":
                raise ValueError(f"ramp_s: the clients' ramp is a closed loop's (kind concurrency), not {self.kind}'s")
        if self.rate_ramp is not None:
            if self.kind not in ("poisson", "gamma", "constant"):
                raise ValueError(f"rate_ramp: a ramp of the rate is an open loop's, not {self.kind}'s")
            strategy, start, end = self.rate_ramp
            if strategy not in RATE_RAMPS:
                raise ValueError(f"rate_ramp: {strategy!r} is not allowed; allowed: {', '.join(RATE_RAMPS)}")
            _check_number(start, "rate_ramp start (requests/s)", 0.0, MAX_RATE_PER_S)
            _check_number(end, "rate_ramp end (requests/s)", 0.0, MAX_RATE_PER_S)
            if start > end:
                raise ValueError(f"rate_ramp: the start rate ({start:g}/s) is above the end rate ({end:g}/s)")
        _check_int(self.seed + 1, "seed + 1", 2**62)

    def rates(self) -> np.ndarray | float:
        """Each request's rate (requests/s): the load's, or along its ramp."""
        if self.rate_ramp is None:
            return self.rate_per_s
        strategy, start, end = self.rate_ramp
        progress = np.arange(self.requests) / max(self.requests - 1, 1)
        if strategy == "linear":
            return start + (end - start) * progress
        return start * (end / start) ** progress


@dataclass(frozen=True)
class Requests:
    """Requests in the order they are sent: arrival times (NaN: sent by a closed-loop client
    when one of its requests finishes), prompt and output tokens."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    concurrency: int | None = None  # closed loop: this many clients (their first requests' arrivals given)
    skipped: int = 0  # a trace's requests left out (no prompt or no output tokens)

    @property
    def count(self) -> int:
        return int(self.prompt_tokens.size)


def make_requests(load: Load) -> Requests:
    """Draw the requests of ``load`` (the same seed gives the same requests)."""
    rng = np.random.default_rng(load.seed)
    n = load.requests
    prompt, output = load.prompt.draw(n, rng), load.output.draw(n, rng)
    if load.kind == "concurrency":
        arrival = np.full(n, np.nan)
        starting = min(load.concurrency, n)
        if starting > 1:  # aiperf's linear ramp: one more client every ramp_s / (C - 1)
            arrival[:starting] = np.arange(starting) * (load.ramp_s / (load.concurrency - 1))
        else:
            arrival[:starting] = 0.0
        return Requests(arrival, prompt, output, concurrency=load.concurrency)
    mean_gap = 1.0 / load.rates()  # each request's, or the load's
    if load.kind == "constant":
        gaps = np.full(n, mean_gap)  # one gap, or each request's along the ramp
    elif load.kind == "poisson":
        gaps = rng.exponential(mean_gap, n)
    else:
        gaps = rng.gamma(load.burstiness, mean_gap / load.burstiness, n)
    arrival = np.cumsum(gaps) - gaps[0]  # the first request at t = 0
    return Requests(arrival, prompt, output)
