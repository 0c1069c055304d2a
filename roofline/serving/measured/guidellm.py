"""Read GuideLLM's report (guidellm 0.8.1, ``guidellm/benchmark/schemas/report.py``
``GenerativeBenchmarksReport``, ``benchmark.py`` ``GenerativeBenchmark``, ``metrics.py``
``GenerativeMetrics``, ``guidellm/schemas/base/statistics.py`` ``StatusDistributionSummary``):
``benchmarks[i]``, one per strategy of the sweep, with ``config.strategy`` (``type_``:
synchronous, concurrent with ``streams``, throughput, constant or poisson with ``rate``),
``config.backend`` (``kind``, ``model``) and ``metrics.<name>.successful`` summaries
(``mean``, ``median``, ``percentiles.p50/p90/p99``). Reports of guidellm 0.3 (0.3.1,
``guidellm/benchmark/benchmark.py``) keep the strategy in ``args.strategy``, the request
totals beside ``metrics`` and the model in ``worker.backend_model``; both are read.
``inter_token_latency_ms`` is each request's (last token - first token) / (output tokens - 1),
vLLM's TPOT, weighted by the request's output tokens: it is read as TPOT (the same when
outputs are of equal length). ``time_per_output_token_ms`` divides by all output tokens (the
first one's wait counted in since 0.4), which no other tool reports, and is left out.
``request_latency`` is in seconds.
"""

from __future__ import annotations

from roofline.serving.measured.record import (
    MeasuredError,
    MeasuredRun,
    _count,
    _get,
    _latency,
    _number,
    _run,
    _text,
    _where,
)


def _is_guidellm(data: object) -> bool:
    benches = data.get("benchmarks") if isinstance(data, dict) else None
    return isinstance(benches, list) and any(
        isinstance(b, dict) and isinstance(b.get("metrics"), dict) for b in benches
    )


def _guidellm_summary(metrics: dict, path: str, name: str, scale: float) -> dict[str, float | None]:
    """``metrics.<name>.successful``: mean and percentiles, times ``scale`` (to seconds)."""
    base = (name, "successful")
    out = {
        "mean": _number(metrics, path, *base, "mean"),
        "p50": _number(metrics, path, *base, "percentiles", "p50"),
        "p90": _number(metrics, path, *base, "percentiles", "p90"),
        "p99": _number(metrics, path, *base, "percentiles", "p99"),
    }
    if out["p50"] is None:
        out["p50"] = _number(metrics, path, *base, "median")
    return {k: None if v is None else v * scale for k, v in out.items()}


def _guidellm_point(bench: object, path: str, index: int, total: int) -> MeasuredRun:
    if not isinstance(bench, dict):
        raise MeasuredError(f"{path}: expected an object, got {type(bench).__name__}")
    strategy, spath = _get(bench, path, "config", "strategy")
    if strategy is None:  # guidellm before 0.4 kept the strategy in ``args``
        strategy, spath = _get(bench, path, "args", "strategy")
    kind = _text(strategy, spath, "type_")
    metrics, mpath = _get(bench, path, "metrics")
    totals = (metrics, mpath) if isinstance(metrics, dict) and "request_totals" in metrics else (bench, path)
    completed = _count(*totals, "request_totals", "successful")  # in the benchmark before guidellm 0.4
    if not completed:
        raise MeasuredError(
            f"{_where(totals[1], 'request_totals.successful')}: no request completed, nothing to compare"
        )
    notes = []
    rate = concurrency = None
    if kind == "synchronous":
        arrival, concurrency = "concurrency", 1
    elif kind == "concurrent":
        arrival, concurrency = "concurrency", _count(strategy, spath, "streams")
        if not concurrency:
            raise MeasuredError(f"{_where(spath, 'streams')}: expected a positive whole number")
    elif kind == "throughput":
        arrival, concurrency = "concurrency", _count(strategy, spath, "max_concurrency") or completed
        notes.append("throughput strategy: requests sent as fast as possible, simulated as that many clients")
    elif kind in ("poisson", "constant"):
        arrival, rate = kind, _number(strategy, spath, "rate", required=True)
        if not rate:
            raise MeasuredError(f"{_where(spath, 'rate')}: expected a positive rate")
    else:
        raise MeasuredError(
            f"{_where(spath, 'type_')}: strategy {kind!r} cannot be simulated; "
            "supported: synchronous, concurrent, throughput, constant, poisson"
        )
    notes.append("inter_token_latency_ms read as TPOT; time_per_output_token_ms (includes the first token) left out")
    backend, bpath = _get(bench, path, "config", "backend")
    worker, wpath = _get(bench, path, "worker")  # before guidellm 0.4
    return _run(
        "guidellm",
        index,
        total,
        arrival=arrival,
        rate_per_s=rate,
        concurrency=concurrency,
        burstiness=1.0,
        requests=completed,
        prompt_tokens_mean=_number(metrics, mpath, "prompt_token_count", "successful", "mean"),
        output_tokens_mean=_number(metrics, mpath, "output_token_count", "successful", "mean"),
        latency=_latency(
            {
                "ttft_s": _guidellm_summary(metrics, mpath, "time_to_first_token_ms", 1e-3),
                "tpot_s": _guidellm_summary(metrics, mpath, "inter_token_latency_ms", 1e-3),
                "e2e_s": _guidellm_summary(metrics, mpath, "request_latency", 1.0),
            }
        ),
        request_throughput_per_s=_number(metrics, mpath, "requests_per_second", "successful", "mean"),
        output_throughput_tokens_per_s=_number(metrics, mpath, "output_tokens_per_second", "successful", "mean"),
        model=_text(backend, bpath, "model") or _text(worker, wpath, "backend_model"),
        backend=_text(backend, bpath, "kind") or _text(worker, wpath, "backend_type"),
        notes=tuple(notes),
    )
