"""How far off this kind of prediction has been: the published accuracy report's test-set scores
(``roofline.accuracy``, ``python -m roofline validate --report``) for the prediction a command or
page is making, shown beside it.

A simulated TTFT or TPOT rests on one of the roofs the report scores, or on neither:

- an engine's measured kernels with its host work per step (``engine-measured``): the report's
  expected figure, over the test runs of that engine;
- the datasheet with no host work (the ideal engine): the report's ideal bound, over every test run;
- anything else (a calibration of the user's own; an engine named on a device it has no kernel
  tables for, whose datasheet roofs carry its host work): no published error, and the words say so.

The scores are those of the test runs on the same device where the report has at least
``MIN_RUNS`` of them, else on every device of the sample (and the words say which). They are the
error of closed-loop benchmark runs at their own concurrency (the silicon sample's), not of the
user's load: a measure of how far this kind of prediction has been off, never a correction. No
figure is adjusted by them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from roofline.accuracy import REPORT_COMMAND, REPORT_PATH, Score, load_report, score

MIN_RUNS = 20
ON_EVERY_DEVICE = (
    f"*: pooled over every device's test runs (fewer than {MIN_RUNS} on this one), so the devices "
    "without their own runs share one figure"
)
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
METRICS = ("ttft", "tpot")
# What each part of the report scored, for the words: the runs simulated under load, or one steady-state step.
PARTS = {"load": "closed loops at their own concurrency", "steady": "each run's steady state, no queueing"}


@dataclass(frozen=True)
class KnownError:
    """The test-set error of one kind of prediction, or why there is none (``why_none``)."""

    whose: str  # "vLLM's expected figure", "the ideal bound"
    where: str  # "on NVIDIA B200", or every device where the device has too few test runs
    scores: dict[str, Score]  # per metric ("ttft", "tpot")
    report: str  # which report: its date and commit
    why_none: str = ""
    on_device: bool = True  # scored on the device's own test runs (else every device's)
    basis: str = PARTS["load"]  # what the report's part simulated
    engine: str = ""  # whose runs were scored ("": every engine's)
    device: str = ""  # on which device ("": every device)

    def short(self) -> str:
        """The bias per metric in a table cell: "TTFT -36%, TPOT -5%" (below 0: predicted too fast), with
        a * where it is every device's (``ON_EVERY_DEVICE``)."""
        if not self.scores:
            return "not scored"
        cell = ", ".join(
            f"{m.upper()} " + (f"{s.bias:+.0%}".replace("-", "−") if s.leans else "0%") for m, s in self.scores.items()
        )
        return cell if self.on_device else f"{cell}*"

    def words(self) -> str:
        if not self.scores:
            return f"published error: none for this prediction ({self.why_none})"
        parts = "; ".join(f"{m.upper()} {s.words()}" for m, s in self.scores.items())
        runs = max(s.runs for s in self.scores.values())
        return (
            f"published error of {self.whose} {self.where}: {parts}; over {runs:,} test runs, {self.basis}, "
            f"each in its own setup (accuracy report of {self.report})"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "whose": self.whose,
            "where": self.where,
            "report": self.report,
            "why_none": self.why_none or None,
            "words": self.words(),
            "short": self.short(),
            "on_device": self.on_device,
            "engine": self.engine or None,
            "device": self.device or None,
            **{
                m: None if m not in self.scores else vars(self.scores[m]) | {"words": self.scores[m].words()}
                for m in METRICS
            },
        }


@lru_cache(maxsize=8)
def _test_runs(path: str, mtime_ns: int, size: int, part: str) -> tuple[tuple[dict, ...], str]:
    """The test runs of one part of the report (never the host-work split), and its stamp."""
    data = load_report(Path(path))
    times = tuple(f"{c}_{m}_ms" for c in ("measured", "tables", "datasheet") for m in METRICS)
    results = [r for r in data[part]["results"] if isinstance(r, dict) and not r.get("host_fit_split")]
    rows = tuple(
        {"device": r.get("device"), "engine": r.get("engine")} | {k: _ms(r.get(k)) for k in times} for r in results
    )
    date = str(data.get("generated") or "")[:10] or "an unknown date"
    return rows, f"{date}, commit {data.get('commit') or 'unknown'}"


def _ms(value) -> float:
    """A time of the report as a number: NaN for anything that is not a positive finite one."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        return math.nan
    return float(value)


def _column(engine: str, source: str, part: str) -> tuple[str, str] | str:
    """The report's column that scores this prediction, and whose figure it is; or why none does."""
    state = " in steady state" if part == "steady" else ""
    if source == "engine-measured" and engine in ENGINE_NAMES:
        return "tables", f"{ENGINE_NAMES[engine]}'s expected figure{state}"
    if source == "datasheet" and engine == "ideal":
        # The report's bound runs each run's own engine scheduler on the datasheet's roofs.
        return "datasheet", f"the ideal bound{state} (each run's own engine scheduler)"
    if source == "calibrated":
        return "a calibration of your own: compare it with your measured runs instead"
    if source == "datasheet" and engine in ENGINE_NAMES:
        return f"datasheet roofs with {ENGINE_NAMES[engine]}'s host work are not scored by the report"
    return f"the report scores no {source} prediction of engine {engine!r}"


def known_error(
    engine: str,
    source: str,
    hardware_id: str,
    hardware_name: str = "",
    path: Path = REPORT_PATH,
    part: str = "load",
) -> KnownError:
    """The test-set error of a simulated TTFT and TPOT (``part`` "load") or of the steady state's
    TPOT ("steady") made with ``engine`` (resolved: vllm, sglang, trtllm or ideal) on ``source``
    roofs (engine-measured, datasheet or calibrated) on ``hardware_id``; a ``KnownError`` without
    scores, saying why, where the report scores no such prediction or cannot be read."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {sorted(PARTS)}, got {part!r}")
    column = _column(engine, source, part)
    if isinstance(column, str):
        return KnownError("", "", {}, "", column)
    try:
        stat = Path(path).stat()
        rows, stamp = _test_runs(str(path), stat.st_mtime_ns, stat.st_size, part)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        why = f"no accuracy report to read ({str(exc)[:120]}); write one with `{REPORT_COMMAND}`"
        return KnownError("", "", {}, "", why)
    col, whose = column
    mine = [r for r in rows if col == "datasheet" or r["engine"] == engine]
    here = [r for r in mine if r["device"] == hardware_id]
    name = hardware_name or hardware_id
    if len(here) >= MIN_RUNS:
        chosen, where = here, f"on {name}"
    else:
        chosen, where = mine, f"on every device (fewer than {MIN_RUNS} test runs on {name})"
    scores = {}
    for m in METRICS:
        s = score([r[f"{col}_{m}_ms"] for r in chosen], [r[f"measured_{m}_ms"] for r in chosen])
        if s is not None:
            scores[m] = s
    if not scores:
        return KnownError("", "", {}, stamp, f"the report has no test run of {whose}")
    return KnownError(
        whose,
        where,
        scores,
        stamp,
        on_device=chosen is here,
        basis=PARTS[part],
        engine="" if col == "datasheet" else engine,
        device=hardware_id if chosen is here else "",
    )


@dataclass(frozen=True)
class FasterThanHost:
    """The test runs of one engine measured faster a token than its fitted host work per step."""

    under: int  # runs whose measured TPOT is under the host work
    runs: int  # the engine's test runs with a measured TPOT
    fastest_ms: float  # the fastest measured TPOT among them
    report: str  # which report: its date and commit


def faster_than_host(engine: str, host_step_s: float, path: Path = REPORT_PATH) -> FasterThanHost | None:
    """How many of ``engine``'s test runs (simulated under load) measured a TPOT under
    ``host_step_s``: a step its fitted host work sets is longer than those runs' mean step. None
    where the report cannot be read or holds no run of the engine."""
    try:
        stat = Path(path).stat()
        rows, stamp = _test_runs(str(path), stat.st_mtime_ns, stat.st_size, "load")
    except (OSError, ValueError, TypeError, KeyError):
        return None
    tpots = [r["measured_tpot_ms"] for r in rows if r["engine"] == engine and math.isfinite(r["measured_tpot_ms"])]
    if not tpots:
        return None
    return FasterThanHost(sum(t < host_step_s * 1e3 for t in tpots), len(tpots), min(tpots), stamp)


def for_settings(settings, hw, part: str = "load") -> KnownError:
    """``known_error`` of a prediction on ``hw`` under ``settings`` (its engine and roofs there)."""
    from roofline.roofs import resolved_engine

    source = settings.ceilings(hw, 1, cuda_graphs=True).source
    return known_error(resolved_engine(settings.engine, hw.id), source, hw.id, hw.name, part=part)
