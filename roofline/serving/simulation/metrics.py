"""The metrics serving benchmarks report, computed from a simulated run.

As ``vllm bench serve``, GuideLLM and aiperf (genai-perf) define them:
- TTFT: from the request's arrival (so queueing is included) to its first output token;
- TPOT: (end-to-end - TTFT) / (output tokens - 1), per request with more than one output token;
- ITL: every gap between two consecutive tokens of a request (vLLM's ``itl``, aiperf's
  inter-token latency); a preemption's stall shows here and in TPOT;
- end-to-end latency: arrival to last token;
- throughput: output tokens (and requests) per second over the run, first arrival to last
  finish; goodput: requests per second that met every target (vLLM's ``--goodput``).
Percentiles are numpy's linear interpolation, as vLLM computes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.serving.simulation.run import Run

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Targets:
    """Service-level targets a request must meet to count in goodput (None: no target)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None


def _stats(values: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float | None]:
    """Mean and percentiles; ``weights`` says how many samples each value stands for."""
    weights = np.ones(np.shape(values)) if weights is None else np.asarray(weights, float)
    keep = np.isfinite(values) & (weights > 0)
    values, weights = np.asarray(values, float)[keep], weights[keep]
    if not values.size:
        return {"mean": None, **{f"p{p}": None for p in PERCENTILES}}
    out = {"mean": float(np.average(values, weights=weights))}
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    # numpy's linear percentile, over values repeated by their weights.
    rank = np.cumsum(weights) - 1
    total = weights.sum() - 1
    for p in PERCENTILES:
        below = np.searchsorted(rank, p / 100 * total, side="left")
        out[f"p{p}"] = _weighted_percentile(values, rank, weights, p / 100 * total, below)
    return out


def _weighted_percentile(values, rank, weights, at: float, i: int) -> float:
    """The value at fractional rank ``at`` of the expanded sample (linear between neighbours)."""
    i = min(int(i), values.size - 1)
    first_rank = rank[i] - (weights[i] - 1)  # the rank of the first copy of values[i]
    if at >= first_rank or i == 0:
        return float(values[i])
    # ``at`` lies between the last copy of values[i - 1] and the first copy of values[i].
    f = (at - rank[i - 1]) / (first_rank - rank[i - 1])
    return float(values[i - 1] + f * (values[i] - values[i - 1]))


def per_request(run: Run) -> dict[str, np.ndarray]:
    """TTFT, TPOT and end-to-end seconds of each request (NaN where it does not apply)."""
    ttft = run.first_token_s - run.arrival_s
    e2e = run.finish_s - run.arrival_s
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(run.output_tokens > 1, (e2e - ttft) / (run.output_tokens - 1), np.nan)
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e}


def meets(run: Run, targets: Targets) -> np.ndarray:
    """Which requests finished within every target."""
    r = per_request(run)
    ok = np.isfinite(r["e2e_s"])
    for name, limit in (("ttft_s", targets.ttft_s), ("tpot_s", targets.tpot_s), ("e2e_s", targets.e2e_s)):
        if limit is not None:
            value = r[name]
            ok &= np.where(np.isnan(value), True, value <= limit)
    return ok


def summary(run: Run, targets: Targets | None = None) -> dict[str, object]:
    """The run's headline numbers, shaped like a benchmark tool's result."""
    r = per_request(run)
    done = np.isfinite(run.finish_s)
    start = float(np.nanmin(run.arrival_s)) if done.any() else 0.0
    duration = float(np.nanmax(run.finish_s)) - start if done.any() else 0.0
    out_tokens = int(run.output_tokens[done].sum())
    result: dict[str, object] = {
        "roofs": run.roofs,
        "requests": int(run.arrival_s.size),
        "completed": int(done.sum()),
        "rejected": int(run.rejected.sum()),
        "preemptions": int(run.preemptions.sum()),
        "duration_s": duration,
        "request_throughput_per_s": done.sum() / duration if duration > 0 else None,
        "output_throughput_tokens_per_s": out_tokens / duration if duration > 0 else None,
        "total_throughput_tokens_per_s": (out_tokens + int(run.prompt_tokens[done].sum())) / duration
        if duration > 0
        else None,
        "ttft_s": _stats(r["ttft_s"]),
        "tpot_s": _stats(r["tpot_s"]),
        "itl_s": _stats(run.itl_s, run.itl_weight),
        "e2e_s": _stats(r["e2e_s"]),
        "mean_running": _time_mean(run, run.step_running),
        "mean_waiting": _time_mean(run, run.step_waiting),
        "peak_kv_used": float(run.step_kv_used.max()) if run.step_kv_used.size else 0.0,
    }
    if targets is not None:
        good = meets(run, targets)
        result["goodput_requests_per_s"] = float(good.sum() / duration) if duration > 0 else None
        result["met_targets"] = float(good[done].mean()) if done.any() else 0.0
    return result


def _time_mean(run: Run, values: np.ndarray) -> float:
    """The time-weighted mean of a per-step quantity over the run's busy steps."""
    if not values.size:
        return 0.0
    widths = np.diff(np.concatenate([[run.step_end_s[0]], run.step_end_s]))
    widths[0] = widths[1] if widths.size > 1 else 1.0
    return float(np.sum(values * widths) / np.sum(widths))


def in_system_mean(run: Run, start_s: float, end_s: float) -> float:
    """Mean number of requests in the server (waiting or running) over [start, end): from each
    request's arrival and finish, the quantity Little's law relates to rate x latency. A request
    turned away (larger than the cache) or never sent was never in it."""
    entered = ~run.rejected & ~np.isnan(run.arrival_s)
    a = np.clip(run.arrival_s[entered], start_s, end_s)
    finish = run.finish_s[entered]
    f = np.clip(np.where(np.isnan(finish), end_s, finish), start_s, end_s)
    return float(np.sum(np.maximum(f - a, 0.0)) / (end_s - start_s))
