"""The one record of a measured benchmark point, whichever file it came from, and the checks
the readers share: each value read at its field path, a wrong one an error that names it.
Times are converted to seconds."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

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
    ``burstiness``, or evenly spaced) or a closed loop of ``concurrency`` clients (started over
    ``ramp_s``, 0 for all at once). ``latency``
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
    ramp_s: float = 0.0  # a closed loop's clients started one at a time over this window (aiperf's ramp)
    rate_ramp: tuple[str, float, float] | None = None  # an open loop's rate ramp (vllm bench serve's ramp-up)

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


def _load_label(arrival: str, rate: float | None, concurrency: int | None, burstiness: float, ramp_s: float) -> str:
    if arrival == "concurrency":
        return f"{concurrency} concurrent" + (f", started over {ramp_s:g} s" if ramp_s else "")
    shape = {"poisson": "Poisson", "constant": "evenly spaced", "gamma": f"gamma, burstiness {burstiness:g}"}[arrival]
    return f"{rate:g} requests/s ({shape})"


def _run(fmt: str, index: int, total: int, **kw) -> MeasuredRun:
    where = f"point {index + 1} of {total}: " if total > 1 else ""
    label = where + _load_label(
        kw["arrival"], kw["rate_per_s"], kw["concurrency"], kw["burstiness"], kw.get("ramp_s", 0)
    )
    return MeasuredRun(format=fmt, label=label, **kw)


def _ratio(total: float | None, count: int) -> float | None:
    return None if total is None else total / count
