"""Measured serving benchmarks beside the simulation: the result files of the three serving
benchmarks read into one record per benchmark point, and each point simulated at the same load
with, per metric and percentile, the predicted value, the measured one and their ratio. Nothing
is fitted from a measurement.

Formats, each read from the package's own source:

- ``vllm bench serve --save-result`` (vllm 0.33.0, ``vllm/benchmarks/serve.py``: the
  ``result_json`` of ``main`` merged with ``benchmark``'s ``result``): ``request_rate`` (a number
  or ``"inf"``), ``burstiness``, ``max_concurrency``, ``num_prompts``, ``completed``,
  ``total_input_tokens``, ``total_output_tokens``, ``request_throughput``, ``output_throughput``,
  ``model_id``, ``backend`` and, for each metric of ``--percentile-metrics`` (``ttft``, ``tpot``,
  ``itl`` by default, ``e2el`` on request), ``mean_<m>_ms``, ``median_<m>_ms`` and
  ``p<P>_<m>_ms`` for each of ``--metric-percentiles`` (``99`` by default). ``--append-result``
  writes one such object per line: each line is a point.
- GuideLLM's report (guidellm 0.8.1, ``guidellm/benchmark/schemas/report.py``
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
- aiperf's ``profile_export_aiperf.json`` (aiperf 0.13.0, ``aiperf/common/models/
  export_models.py`` ``JsonExportData`` and ``JsonMetricResult``, metric definitions in
  ``aiperf/metrics/types/``), whose metric shape is genai-perf's ``profile_export_genai_perf.json``:
  one point, each metric ``{"unit", "avg", "p50", "p90", "p99", ...}`` in its display unit.
  aiperf's ``inter_token_latency`` is per request (request latency - TTFT) / (output tokens -
  1), read as TPOT; ``inter_chunk_latency``, the gaps between streamed chunks, is read as ITL.
  The load is the profiling phase of ``input_config.phases`` (``type`` concurrency with
  ``concurrency``, poisson / constant / gamma with ``rate``, gamma's ``smoothness``) or, in
  older exports, ``input_config.loadgen`` (``concurrency``, ``request_rate``).

Times are converted to seconds. A file is strict JSON (no NaN or Infinity), at most 16 MiB,
nested at most 32 deep; a wrong value is an error that names its field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from roofline.datafiles import MAX_NESTING, depth, read_regular_file, shown_path

MAX_MEASURED_BYTES = 16 * 2**20
MAX_POINTS = 1000
MAX_VALUE = 1e15  # above any latency in ms, rate, length or count a benchmark records
METRICS = ("ttft_s", "tpot_s", "itl_s", "e2e_s")  # the simulation summary's keys
STATS = ("mean", "p50", "p90", "p99")
FORMATS = {
    "vllm": "vllm bench serve --save-result JSON (or --append-result JSON lines)",
    "guidellm": "GuideLLM report JSON (guidellm benchmark --output-path benchmarks.json)",
    "aiperf": "aiperf profile_export_aiperf.json (or genai-perf's profile_export_genai_perf.json)",
}
ARRIVALS = ("poisson", "gamma", "constant", "concurrency")
_SECONDS_PER_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}


class MeasuredError(ValueError):
    """A measured result file that cannot be read; the message names the file and the field."""


@dataclass(frozen=True)
class MeasuredRun:
    """One benchmark point: its load, its mean lengths and the latencies it measured (seconds).

    ``arrival`` is in ARRIVALS: an open loop at ``rate_per_s`` (Poisson, gamma with
    ``burstiness``, or evenly spaced) or a closed loop of ``concurrency`` clients. ``latency``
    maps each of METRICS to each of STATS, None where the file lacks it (listed in ``missing``);
    ``notes`` say how the file's figures were read."""

    format: str
    label: str
    arrival: str
    rate_per_s: float | None
    concurrency: int | None
    burstiness: float
    requests: int | None
    prompt_tokens_mean: float | None
    output_tokens_mean: float | None
    latency: dict[str, dict[str, float | None]]
    request_throughput_per_s: float | None
    output_throughput_tokens_per_s: float | None
    model: str | None = None
    backend: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(f"{m}.{s}" for m in METRICS for s in STATS if self.latency[m][s] is None)

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        data["missing"] = list(self.missing)
        return data


# --- reading values --------------------------------------------------------------------------


def _where(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key


def _get(obj: object, path: str, *keys: str | int) -> tuple[object, str]:
    """The value at ``keys`` under ``obj`` (None where a level is absent) and its field path."""
    for key in keys:
        where = _where(path, key)
        if obj is None:
            return None, where
        if isinstance(key, int):
            if not isinstance(obj, list):
                raise MeasuredError(f"{path}: expected a list, got {type(obj).__name__}")
            obj = obj[key] if key < len(obj) else None
        else:
            if not isinstance(obj, dict):
                raise MeasuredError(f"{path or 'the file'}: expected an object, got {type(obj).__name__}")
            obj = obj.get(key)
        path = where
    return obj, path


def _number(obj: object, path: str, *keys: str | int, required: bool = False) -> float | None:
    """A non-negative finite number at ``keys``, None where absent (an error if ``required``)."""
    value, where = _get(obj, path, *keys)
    if value is None:
        if required:
            raise MeasuredError(f"{where}: missing")
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 0 <= value <= MAX_VALUE or not math.isfinite(value):
        raise MeasuredError(f"{where}: expected a non-negative number, got {_shown(value)}")
    return float(value)


def _count(obj: object, path: str, *keys: str | int) -> int | None:
    value = _number(obj, path, *keys)
    if value is None:
        return None
    if value != int(value) or value > 2**53:
        _, where = _get(obj, path, *keys)
        raise MeasuredError(f"{where}: expected a whole number, got {value!r}")
    return int(value)


def _text(obj: object, path: str, *keys: str | int) -> str | None:
    value, where = _get(obj, path, *keys)
    if value is None:
        return None
    if not isinstance(value, str):
        raise MeasuredError(f"{where}: expected text, got {_shown(value)}")
    return value[:200]


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}…"


def _latency(stats: dict[str, dict[str, float | None]] | None = None) -> dict[str, dict[str, float | None]]:
    out = {m: dict.fromkeys(STATS) for m in METRICS}
    for metric, values in (stats or {}).items():
        out[metric].update(values)
    return out


def _load_label(arrival: str, rate: float | None, concurrency: int | None, burstiness: float) -> str:
    if arrival == "concurrency":
        return f"{concurrency} concurrent"
    shape = {"poisson": "Poisson", "constant": "evenly spaced", "gamma": f"gamma, burstiness {burstiness:g}"}[arrival]
    return f"{rate:g} requests/s ({shape})"


def _run(fmt: str, index: int, total: int, **kw) -> MeasuredRun:
    where = f"point {index + 1} of {total}: " if total > 1 else ""
    label = where + _load_label(kw["arrival"], kw["rate_per_s"], kw["concurrency"], kw["burstiness"])
    return MeasuredRun(format=fmt, label=label, **kw)


# --- vLLM --------------------------------------------------------------------------------------

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
    max_concurrency = _count(data, path, "max_concurrency")
    burstiness = _number(data, path, "burstiness") or 1.0
    notes = []
    if rate is not None and rate > 0:
        arrival, concurrency = ("poisson" if burstiness == 1 else "gamma"), None
        if max_concurrency:
            notes.append(f"max_concurrency {max_concurrency} capped the open loop; simulated without the cap")
    else:
        arrival, rate, concurrency = "concurrency", None, max_concurrency or completed
        if not max_concurrency:
            notes.append("request_rate inf: every request sent at once, simulated as that many clients")
    ramp = _text(data, path, "ramp_up_strategy")
    if ramp is not None and arrival != "concurrency":
        notes.append(f"ramp_up_strategy {ramp!r}: the ramp is not simulated (its end rate is)")
        rate = _number(data, path, "ramp_up_end_rps") or rate
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
    )


def _ratio(total: float | None, count: int) -> float | None:
    return None if total is None else total / count


# --- GuideLLM ----------------------------------------------------------------------------------


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


# --- aiperf / genai-perf -----------------------------------------------------------------------

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


def _aiperf_load(config: object, path: str) -> tuple[str, float | None, int | None, float, int | None]:
    """The profiling phase's arrival, rate, concurrency, burstiness and requests."""
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
            return "concurrency", None, concurrency, 1.0, requests
        if kind in ("poisson", "constant", "gamma"):
            rate = _number(chosen, where, "rate", required=True)
            if not rate:
                raise MeasuredError(f"{_where(where, 'rate')}: expected a positive rate")
            burstiness = (_number(chosen, where, "smoothness") or 1.0) if kind == "gamma" else 1.0
            return kind, rate, None, burstiness, requests
        raise MeasuredError(
            f"{_where(where, 'type')}: phase {kind!r} cannot be simulated; "
            "supported: concurrency, poisson, constant, gamma"
        )
    rate = _number(config, path, "loadgen", "request_rate")
    concurrency = _count(config, path, "loadgen", "concurrency")
    requests = _count(config, path, "loadgen", "request_count")
    if rate:
        return "poisson", rate, None, 1.0, requests
    if concurrency:
        return "concurrency", None, concurrency, 1.0, requests
    raise MeasuredError(f"{_where(path, 'phases')}: the load (concurrency or request rate) is not recorded")


def _aiperf_model(config: object, path: str) -> str | None:
    for keys in (("models", "items", 0, "name"), ("endpoint", "model_names", 0), ("model_names", 0)):
        name = _text(config, path, *keys)
        if name is not None:
            return name
    return None


def _aiperf_point(data: dict) -> MeasuredRun:
    config, cpath = _get(data, "", "input_config")
    arrival, rate, concurrency, burstiness, requests = _aiperf_load(config, cpath)
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
        notes=("inter_token_latency read as TPOT, inter_chunk_latency as ITL",),
    )


# --- files -------------------------------------------------------------------------------------


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not allowed (strict JSON)")


def _loads(text: str) -> object:
    data = json.loads(text, parse_constant=_refuse_constant)
    if depth(data) > MAX_NESTING:
        raise RecursionError
    return data


def parse_measured(raw: str | bytes, origin: str = "measured results") -> list[MeasuredRun]:
    """The benchmark points of a result file's text, whichever of FORMATS it is."""
    if len(raw) > MAX_MEASURED_BYTES:
        raise MeasuredError(f"{origin}: {len(raw):,} bytes is more than a result file can hold (16 MiB at most)")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MeasuredError(f"{origin}: not UTF-8 text (byte {exc.start})") from None
    try:
        try:
            documents = [_loads(raw)]
        except json.JSONDecodeError as exc:
            lines = [line for line in raw.splitlines() if line.strip()]
            if exc.msg != "Extra data" or len(lines) < 2:
                raise
            if len(lines) > MAX_POINTS:
                raise MeasuredError(f"{origin}: more than {MAX_POINTS:,} lines of results") from None
            documents = [_loads(line) for line in lines]  # vllm bench serve --append-result
    except RecursionError:
        raise MeasuredError(f"{origin}: nested deeper than {MAX_NESTING} levels: not a result file") from None
    except ValueError as exc:
        raise MeasuredError(f"{origin}: not JSON ({str(exc)[:120]})") from None
    try:
        return _points(documents)
    except MeasuredError as exc:
        raise MeasuredError(f"{origin}: {exc}") from None


def _points(documents: list[object]) -> list[MeasuredRun]:
    first = documents[0]
    if len(documents) == 1 and _is_guidellm(first):
        benches = first["benchmarks"]
        if len(benches) > MAX_POINTS:
            raise MeasuredError(f"benchmarks: {len(benches):,} points; at most {MAX_POINTS:,}")
        return [_guidellm_point(b, f"benchmarks[{i}]", i, len(benches)) for i, b in enumerate(benches)]
    if len(documents) == 1 and _is_aiperf(first):
        return [_aiperf_point(first)]
    if all(_is_vllm(d) for d in documents):
        prefix = (lambda i: f"line {i + 1}") if len(documents) > 1 else (lambda i: "")
        return [_vllm_point(d, prefix(i), i, len(documents)) for i, d in enumerate(documents)]
    raise MeasuredError("not a serving benchmark result this reads; supported: " + "; ".join(FORMATS.values()))


def read_measured(path: str | Path) -> list[MeasuredRun]:
    """The benchmark points of a result file (see ``parse_measured``)."""
    raw = read_regular_file(path, MAX_MEASURED_BYTES)
    return parse_measured(raw, shown_path(path))


# --- comparison --------------------------------------------------------------------------------


def requests_for(run: MeasuredRun, seed: int = 0, default_requests: int = 1000, most_requests: int = 200_000):
    """The simulated requests at a point's load: its rate or clients, its number of requests,
    and prompts and outputs of its mean lengths (the files record means, not the lengths)."""
    from roofline.serving.simulation.load import Lengths, Load, make_requests

    for value, name in ((run.prompt_tokens_mean, "prompt"), (run.output_tokens_mean, "output")):
        if not value:
            raise MeasuredError(f"{run.label}: the file records no mean {name} length; the load cannot be simulated")
    count = min(run.requests or default_requests, most_requests)
    prompt = Lengths(max(1, round(run.prompt_tokens_mean)))
    output = Lengths(max(1, round(run.output_tokens_mean)))
    if run.arrival == "concurrency":
        load = Load("concurrency", count, prompt, output, concurrency=run.concurrency, seed=seed)
    else:
        load = Load(run.arrival, count, prompt, output, rate_per_s=run.rate_per_s, burstiness=run.burstiness, seed=seed)
    return make_requests(load)


def simulator(model, hw, precision=None, tp: int = 1, settings=None, chunked_prefill: bool = True, seed: int = 0):
    """``simulate_fn`` for ``compare``: each point's load through the serving simulation, the
    step times computed once and shared by the points."""
    from roofline.serving.simulation.api import simulate_serving
    from roofline.serving.simulation.metrics import summary

    shared = {}

    def simulate_fn(run: MeasuredRun) -> dict[str, object]:
        try:
            requests = requests_for(run, seed)
            sim = simulate_serving(model, hw, requests, precision, tp, settings, chunked_prefill, shared.get("times"))
        except MeasuredError:
            raise
        except ValueError as exc:
            raise MeasuredError(f"{run.label or 'the measured point'}: {exc}") from None
        shared["times"] = sim.times
        return summary(sim.run)

    return simulate_fn


def _gap(predicted: float | None, measured: float | None) -> dict[str, float | None]:
    ratio = predicted / measured if predicted is not None and measured else None
    return {"measured": measured, "predicted": predicted, "ratio": ratio}


def compare(
    measured_runs: Iterable[MeasuredRun], simulate_fn: Callable[[MeasuredRun], dict]
) -> list[dict[str, object]]:
    """For each measured point, the simulation at the same load and, per metric and statistic,
    the measured and predicted values and their ratio (predicted / measured; None where either
    is missing). Nothing is fitted: the prediction never sees the measurement."""
    out = []
    for run in measured_runs:
        predicted = simulate_fn(run)
        rows = [
            {"metric": metric, "stat": stat} | _gap((predicted.get(metric) or {}).get(stat), run.latency[metric][stat])
            for metric in METRICS
            for stat in STATS
        ]
        throughput = [
            {"metric": key} | _gap(predicted.get(key), getattr(run, key))
            for key in ("request_throughput_per_s", "output_throughput_tokens_per_s")
        ]
        out.append(
            {
                "point": run.label,
                "measured": run.to_json(),
                "latency": rows,
                "throughput": throughput,
                "predicted_summary": {
                    k: predicted.get(k) for k in ("requests", "completed", "duration_s", "preemptions", "roofs")
                },
            }
        )
    return out


def curve(comparisons: list[dict[str, object]], metric: str, stat: str) -> list[dict[str, object]]:
    """One metric and statistic of ``compare``'s points in order of load, open-loop points (by
    requests per second) before closed-loop ones (by clients): the measured points a rate or
    concurrency curve draws beside the predicted ones."""
    if metric not in METRICS or stat not in STATS:
        raise ValueError(f"curve: expected a metric in {METRICS} and a statistic in {STATS}, got {metric!r}, {stat!r}")
    rows = []
    for point in comparisons:
        m = point["measured"]
        row = next(r for r in point["latency"] if (r["metric"], r["stat"]) == (metric, stat))
        closed = m["arrival"] == "concurrency"
        rows.append(
            {
                "point": point["point"],
                "load": m["concurrency"] if closed else m["rate_per_s"],
                "load_unit": "clients" if closed else "requests/s",
                "measured": row["measured"],
                "predicted": row["predicted"],
                "ratio": row["ratio"],
            }
        )
    return sorted(rows, key=lambda r: (r["load_unit"] == "clients", r["load"]))
