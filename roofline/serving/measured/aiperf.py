"""Read aiperf's ``profile_export_aiperf.json`` (aiperf 0.13.0, ``aiperf/common/models/
export_models.py`` ``JsonExportData`` and ``JsonMetricResult``, metric definitions in
``aiperf/metrics/types/``), whose metric shape is genai-perf's ``profile_export_genai_perf.json``:
one point, each metric ``{"unit", "avg", "p50", "p90", "p99", ...}`` in its display unit.
aiperf's ``inter_token_latency`` is per request (request latency - TTFT) / (output tokens -
1), read as TPOT; ``inter_chunk_latency``, the gaps between streamed chunks, is read as ITL.
The load is the profiling phase of ``input_config.phases`` (``type`` concurrency with
``concurrency`` and its ``concurrency_ramp``, seconds or ``{"duration", "strategy"}``; poisson /
constant / gamma with ``rate``, gamma's ``smoothness``) or, in older exports,
``input_config.loadgen`` (``concurrency``, ``concurrency_ramp_duration``, ``request_rate``). A
ramp is simulated as aiperf's linear one starts the clients (``--concurrency-ramp-duration``:
1 to C clients, one more every duration / (C - 1)); its other shapes are refused.
"""

from __future__ import annotations

from roofline.serving.measured.record import (
    _SECONDS_PER_UNIT,
    STATS,
    MeasuredError,
    MeasuredRun,
    _count,
    _get,
    _latency,
    _number,
    _run,
    _shown,
    _text,
    _where,
)

_AIPERF_METRICS = {
    "time_to_first_token": "ttft_s",
    "inter_token_latency": "tpot_s",
    "inter_chunk_latency": "itl_s",
    "request_latency": "e2e_s",
}


def _is_aiperf(data: object) -> bool:
    return isinstance(data, dict) and any(
        isinstance(data.get(k), dict) and "unit" in data[k] for k in ("time_to_first_token", "request_latency")
    )


def _aiperf_seconds(data: dict, name: str) -> dict[str, float | None]:
    metric, where = _get(data, "", name)
    if metric is None:
        return dict.fromkeys(STATS)
    unit = _text(metric, where, "unit")
    if unit not in _SECONDS_PER_UNIT:
        raise MeasuredError(f"{where}.unit: expected one of {', '.join(_SECONDS_PER_UNIT)}, got {_shown(unit)}")
    scale = _SECONDS_PER_UNIT[unit]
    values = {"mean": _number(metric, where, "avg"), **{s: _number(metric, where, s) for s in STATS[1:]}}
    return {k: None if v is None else v * scale for k, v in values.items()}


def _aiperf_ramp(ramp: object, where: str) -> float:
    """Seconds over which a concurrency ramp starts the clients (0 where none)."""
    if ramp is None:
        return 0.0
    if isinstance(ramp, dict):
        strategy = (_text(ramp, where, "strategy") or "linear").lower()  # aiperf reads its names in any case
        if strategy != "linear":
            raise MeasuredError(
                f"{_where(where, 'strategy')}: ramp {strategy!r} cannot be simulated; supported: linear"
            )
        ramp, where = ramp.get("duration"), _where(where, "duration")
    number = isinstance(ramp, int | float) and not isinstance(ramp, bool)
    if not number or not 0 <= ramp <= 1e7:  # NaN fails the comparison too
        raise MeasuredError(f"{where}: expected seconds in [0, 1e7], got {_shown(ramp)}")
    return float(ramp)


def _aiperf_load(
    config: object, path: str
) -> tuple[str, float | None, int | None, float, int | None, float, tuple[str, ...]]:
    """The profiling phase's arrival, rate, concurrency, burstiness, requests, clients' ramp, and
    notes on what of it is not simulated."""
    phases, ppath = _get(config, path, "phases")
    if isinstance(phases, list) and phases:
        chosen, where = None, ppath
        for i, phase in enumerate(phases):
            if isinstance(phase, dict) and not phase.get("exclude_from_results") and phase.get("name") != "warmup":
                chosen, where = phase, f"{ppath}[{i}]"
        if chosen is None:
            raise MeasuredError(f"{ppath}: no profiling phase")
        kind = _text(chosen, where, "type")
        requests = _count(chosen, where, "requests")
        if kind == "concurrency":
            concurrency = _count(chosen, where, "concurrency")
            if not concurrency:
                raise MeasuredError(f"{_where(where, 'concurrency')}: expected a positive whole number")
            ramp = _aiperf_ramp(chosen.get("concurrency_ramp"), _where(where, "concurrency_ramp"))
            return "concurrency", None, concurrency, 1.0, requests, ramp, ()
        if kind in ("poisson", "constant", "gamma"):
            rate = _number(chosen, where, "rate", required=True)
            if not rate:
                raise MeasuredError(f"{_where(where, 'rate')}: expected a positive rate")
            burstiness = (_number(chosen, where, "smoothness") or 1.0) if kind == "gamma" else 1.0
            notes = tuple(
                f"{_where(where, key)}: the ramp is not simulated (the target {what} is)"
                for key, what in (("rate_ramp", "rate"), ("concurrency_ramp", "concurrency cap"))
                if chosen.get(key) not in (None, 0)
            )
            return kind, rate, None, burstiness, requests, 0.0, notes
        raise MeasuredError(
            f"{_where(where, 'type')}: phase {kind!r} cannot be simulated; "
            "supported: concurrency, poisson, constant, gamma"
        )
    rate = _number(config, path, "loadgen", "request_rate")
    concurrency = _count(config, path, "loadgen", "concurrency")
    requests = _count(config, path, "loadgen", "request_count")
    if rate:
        ramp, rpath = _get(config, path, "loadgen", "request_rate_ramp_duration")
        notes = (f"{rpath}: the ramp is not simulated (the target rate is)",) if ramp not in (None, 0) else ()
        return "poisson", rate, None, 1.0, requests, 0.0, notes
    if concurrency:
        ramp, rpath = _get(config, path, "loadgen", "concurrency_ramp_duration")
        return "concurrency", None, concurrency, 1.0, requests, _aiperf_ramp(ramp, rpath), ()
    raise MeasuredError(f"{_where(path, 'phases')}: the load (concurrency or request rate) is not recorded")


def _aiperf_model(config: object, path: str) -> str | None:
    for keys in (("models", "items", 0, "name"), ("endpoint", "model_names", 0), ("model_names", 0)):
        name = _text(config, path, *keys)
        if name is not None:
            return name
    return None


def _aiperf_point(data: dict) -> MeasuredRun:
    config, cpath = _get(data, "", "input_config")
    arrival, rate, concurrency, burstiness, requests, ramp_s, ramp_notes = _aiperf_load(config, cpath)
    completed = _count(data, "", "request_count", "avg")
    if completed == 0:
        raise MeasuredError("request_count.avg: no request completed, nothing to compare")
    return _run(
        "aiperf",
        0,
        1,
        arrival=arrival,
        rate_per_s=rate,
        concurrency=concurrency,
        burstiness=burstiness,
        requests=completed or requests,
        prompt_tokens_mean=_number(data, "", "input_sequence_length", "avg"),
        output_tokens_mean=_number(data, "", "output_sequence_length", "avg"),
        latency=_latency({metric: _aiperf_seconds(data, name) for name, metric in _AIPERF_METRICS.items()}),
        request_throughput_per_s=_number(data, "", "request_throughput", "avg"),
        output_throughput_tokens_per_s=_number(data, "", "output_token_throughput", "avg"),
        model=_aiperf_model(config, cpath),
        backend=_text(config, cpath, "endpoint", "type"),
        notes=("inter_token_latency read as TPOT, inter_chunk_latency as ITL", *ramp_notes),
        ramp_s=ramp_s,
    )
