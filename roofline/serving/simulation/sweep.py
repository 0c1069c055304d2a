"""Latency against request rate, and one run with what the pages draw of it: the engine side
of the Serving page's "Under load" section (and of anything else that sweeps the rate)."""

from __future__ import annotations

import numpy as np

from roofline.hardware import Hardware
from roofline.models import ModelConfig
from roofline.serving.simulation.api import idle_spans, most_in_flight, simulate_serving, to_json
from roofline.serving.simulation.capacity import saturation_rate
from roofline.serving.simulation.load import Lengths, Load, Requests, make_requests
from roofline.serving.simulation.metrics import PERCENTILES, Targets, per_request, summary
from roofline.serving.simulation.steptime import step_times
from roofline.serving.traffic import Traffic
from roofline.settings import Settings
from roofline.workload import Precision

SWEEP_REQUESTS = 300  # per rate of the sweep and per probe of the capacity search
SWEEP_RATES = 12
SWEEP_LOWEST = 1 / 30  # of the saturation rate: a trickle
SWEEP_HIGHEST = 2.0  # a finite run of a few hundred requests only queues visibly past saturation


def latency_sweep(
    model: ModelConfig,
    hw: Hardware,
    traffic: Traffic,
    precision: Precision,
    tp: int,
    settings: Settings,
    chunked: bool | None,
    seed: int,
    requests: int = SWEEP_REQUESTS,
    burstiness: float = 1.0,
    lengths: tuple[Lengths, Lengths] | None = None,
) -> dict[str, object]:
    """p50/p90/p99 TTFT and TPOT, mean running batch and queue at log-spaced Poisson rates (gamma
    arrivals of shape ``burstiness`` where it is not 1) from a trickle to twice the saturation rate
    (a closed loop of ``max_num_seqs`` clients), each a run of ``requests`` requests with the same
    seed. ``lengths``: the prompts' and outputs' (default: the traffic's, fixed)."""
    settings = settings.for_device(hw)
    times = step_times(model, hw, precision, tp, settings, settings.max_batched_tokens, settings.max_num_seqs)

    def run_at(load: Load):
        return simulate_serving(model, hw, make_requests(load), precision, tp, settings, chunked, times=times).run

    prompt, output = lengths or (Lengths(traffic.prompt_len), Lengths(traffic.output_len))
    saturation = saturation_rate(run_at, prompt, output, most_in_flight(settings, hw), seed)
    if saturation <= 0:
        raise ValueError(f"no request completes on {tp} x {hw.name}")
    rates = np.geomspace(saturation * SWEEP_LOWEST, saturation * SWEEP_HIGHEST, SWEEP_RATES)
    kind = "poisson" if burstiness == 1 else "gamma"
    rows = [
        summary(run_at(Load(kind, requests, prompt, output, rate_per_s=float(r), burstiness=burstiness, seed=seed)))
        for r in rates
    ]

    def column(metric: str, p: int) -> np.ndarray:
        return np.array([np.nan if row[metric][f"p{p}"] is None else row[metric][f"p{p}"] for row in rows])

    return {
        "rate_per_s": rates,
        "saturation_per_s": saturation,
        "percentiles": {m: {p: column(m, p) for p in PERCENTILES} for m in ("ttft_s", "tpot_s")},
        "mean_running": np.array([row["mean_running"] for row in rows]),
        "mean_waiting": np.array([row["mean_waiting"] for row in rows]),
        "output_tokens_per_s": np.array([row["output_throughput_tokens_per_s"] or np.nan for row in rows]),
        "roofs": times.roofs,
    }


def load_run(
    model: ModelConfig,
    hw: Hardware,
    traffic: Traffic,
    precision: Precision,
    tp: int,
    settings: Settings,
    chunked: bool | None,
    load: Load | Requests,
    targets: Targets,
) -> dict[str, object]:
    """One simulated benchmark: the summary the command line prints (``serve --rate``), every
    request's TTFT and TPOT, and the server over time with the decoding requests' mean context.
    ``load``: drawn as a load, or requests as they are (a trace's)."""
    requests = load if isinstance(load, Requests) else make_requests(load)
    sim = simulate_serving(model, hw, requests, precision, tp, settings, chunked)
    data = to_json(sim, targets)
    data["per_request"] = {k: v for k, v in per_request(sim.run).items() if k in ("ttft_s", "tpot_s")}
    data["moments"] = moments(sim.run)
    return data


MOMENTS = 101  # 0, 1, ..., 100 % of a run: the moments a page can open as a step


def moments(run, count: int = MOMENTS) -> dict[str, list]:
    """The server at ``count`` evenly spaced moments of a run, from its start to its last step's
    end: the step (or stretch of decode steps) under way then, its running batch and queue (the
    series' replica or rank), and how many requests are decoding at that moment and their mean
    context (NaN where none). Idle, nothing runs."""
    ends = np.asarray(run.step_end_s, float)
    at = np.linspace(0.0, float(ends[-1]) if ends.size else 0.0, count)
    step = np.clip(np.searchsorted(ends, at, side="left"), 0, max(ends.size - 1, 0))
    running = np.asarray(run.step_running, int)[step] if ends.size else np.zeros(count, int)
    waiting = np.asarray(run.step_waiting, int)[step] if ends.size else np.zeros(count, int)
    idle = idle_spans(run.arrival_s, run.finish_s, run.arrival_s.size)
    if idle.size:
        empty = ((at[:, None] > idle[:, 0]) & (at[:, None] < idle[:, 1])).any(axis=1)
        running, waiting = np.where(empty, 0, running), np.where(empty, 0, waiting)
    first, finish = run.first_token_s[None, :], run.finish_s[None, :]
    decoding = ((first <= at[:, None]) & (at[:, None] < finish)).sum(axis=1)
    return {
        "time_s": at.tolist(),
        "running": running.tolist(),
        "waiting": waiting.tolist(),
        "decoding": decoding.tolist(),
        "context": decode_context(run, at).tolist(),
    }


def decode_context(run, at_s: np.ndarray) -> np.ndarray:
    """The mean cached tokens of the requests decoding at each time: the prompt plus the outputs
    so far, taken as evenly spread between a request's first token and its last. NaN where none
    decodes."""
    first, finish = run.first_token_s[None, :], run.finish_s[None, :]
    t = at_s[:, None]
    decoding = (first <= t) & (t < finish)
    span = np.where(finish > first, finish - first, 1.0)
    generated = 1 + (run.output_tokens[None, :] - 1) * np.clip((t - first) / span, 0, 1)
    context = np.where(decoding, run.prompt_tokens[None, :] + generated, 0.0)
    count = decoding.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, context.sum(axis=1) / count, np.nan)
