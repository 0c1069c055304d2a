"""Read ``vllm bench serve --save-result`` (vllm 0.33.0, ``vllm/benchmarks/serve.py``: the
``result_json`` of ``main`` merged with ``benchmark``'s ``result``): ``request_rate`` (a number
or ``"inf"``), ``burstiness``, ``max_concurrency``, ``num_prompts``, ``completed``,
``total_input_tokens``, ``total_output_tokens``, ``request_throughput``, ``output_throughput``,
``model_id``, ``backend`` and, for each metric of ``--percentile-metrics`` (``ttft``, ``tpot``,
``itl`` by default, ``e2el`` on request), ``mean_<m>_ms``, ``median_<m>_ms`` and
``p<P>_<m>_ms`` for each of ``--metric-percentiles`` (``99`` by default). ``--append-result``
writes one such object per line: each line is a point. A run whose rate ramped
(``ramp_up_strategy``, ``ramp_up_start_rps``, ``ramp_up_end_rps``; its ``request_rate`` then reads
``"inf"``) is simulated with the same ramp.
"""

from __future__ import annotations

import re

from roofline.defaults import RATE_RAMPS
from roofline.serving.measured.record import (
    MeasuredError,
    MeasuredRun,
    _count,
    _get,
    _latency,
    _number,
    _ratio,
    _run,
    _shown,
    _text,
    _where,
)

_VLLM_METRICS = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_s", "e2el": "e2e_s"}
_VLLM_KEY = re.compile(r"^(mean|median|p[0-9.]+)_(ttft|tpot|itl|e2el)_ms$")


def _is_vllm(data: object) -> bool:
    return isinstance(data, dict) and "completed" in data and any(_VLLM_KEY.match(k) for k in data)


def _vllm_point(data: dict, path: str, index: int, total: int) -> MeasuredRun:
    stats: dict[str, dict[str, float | None]] = {}
    for short, metric in _VLLM_METRICS.items():
        ms = {
            "mean": _number(data, path, f"mean_{short}_ms"),
            "p50": _number(data, path, f"median_{short}_ms"),
            "p90": _number(data, path, f"p90_{short}_ms"),
            "p99": _number(data, path, f"p99_{short}_ms"),
        }
        if ms["p50"] is None:
            ms["p50"] = _number(data, path, f"p50_{short}_ms")
        stats[metric] = {k: None if v is None else v / 1e3 for k, v in ms.items()}
    completed = _count(data, path, "completed")
    if not completed:
        raise MeasuredError(f"{_where(path, 'completed')}: no request completed, nothing to compare")
    rate_value, rate_where = _get(data, path, "request_rate")
    if isinstance(rate_value, str) and rate_value != "inf":
        raise MeasuredError(f"{rate_where}: expected a number or 'inf', got {_shown(rate_value)}")
    rate = None if rate_value == "inf" else _number(data, path, "request_rate")
    if rate == 0:  # vllm bench serve takes a rate above 0, or inf for every request at once
        raise MeasuredError(f"{rate_where}: expected a rate above 0 requests/s or 'inf', got 0")
    max_concurrency = _count(data, path, "max_concurrency")
    burstiness = _number(data, path, "burstiness")
    if burstiness == 0:
        raise MeasuredError(f"{_where(path, 'burstiness')}: expected a factor above 0 (1: Poisson), got 0")
    burstiness = burstiness or 1.0
    notes = []
    rate_ramp = _rate_ramp(data, path)
    if rate_ramp is not None:  # its request_rate is "inf": the ramp sets the rate
        arrival, rate, concurrency = ("poisson" if burstiness == 1 else "gamma"), rate_ramp[2], None
        if max_concurrency:
            notes.append(f"max_concurrency {max_concurrency} capped the open loop; simulated without the cap")
    elif rate is not None and rate > 0:
        arrival, concurrency = ("poisson" if burstiness == 1 else "gamma"), None
        if max_concurrency:
            notes.append(f"max_concurrency {max_concurrency} capped the open loop; simulated without the cap")
    else:
        arrival, rate, concurrency = "concurrency", None, max_concurrency or completed
        if not max_concurrency:
            notes.append("request_rate inf: every request sent at once, simulated as that many clients")
    return _run(
        "vllm",
        index,
        total,
        arrival=arrival,
        rate_per_s=rate,
        concurrency=concurrency,
        burstiness=burstiness,
        requests=completed,
        prompt_tokens_mean=_ratio(_number(data, path, "total_input_tokens"), completed),
        output_tokens_mean=_ratio(_number(data, path, "total_output_tokens"), completed),
        latency=_latency(stats),
        request_throughput_per_s=_number(data, path, "request_throughput"),
        output_throughput_tokens_per_s=_number(data, path, "output_throughput"),
        model=_text(data, path, "model_id"),
        backend=_text(data, path, "backend"),
        notes=tuple(notes),
        rate_ramp=rate_ramp,
    )


def _rate_ramp(data: dict, path: str) -> tuple[str, float, float] | None:
    """The run's ramp-up of the rate (``ramp_up_strategy``, ``ramp_up_start_rps``,
    ``ramp_up_end_rps``), checked as vllm bench serve checks it; None without one."""
    strategy = _text(data, path, "ramp_up_strategy")
    if strategy is None:
        return None
    if strategy not in RATE_RAMPS:
        raise MeasuredError(
            f"{_where(path, 'ramp_up_strategy')}: expected one of {', '.join(RATE_RAMPS)}, got {_shown(strategy)}"
        )
    start = _number(data, path, "ramp_up_start_rps", required=True)
    end = _number(data, path, "ramp_up_end_rps", required=True)
    if not 0 < start <= end:
        raise MeasuredError(
            f"{_where(path, 'ramp_up_start_rps')}: expected a rate above 0 and at most ramp_up_end_rps ({end:g}), "
            f"got {start:g}"
        )
    return strategy, start, end
