"""The product's published accuracy: the predictions scored against every aggregated run of the
silicon sample, as ``python -m roofline validate --report FILE`` writes it and the Accuracy page
reads it.

One report holds both scores of ``roofline.validate``: TPOT of the serving steady state (one step
per run), and TTFT and TPOT of each run simulated request by request at its concurrency
(``roofline.validate_load``, every run). Each predicts twice: on the datasheet's roofs (the ideal
bound) and on the run's engine's measured kernels with its host work per step (the expected
figure). The engines' host work was fitted on one declared split of the runs
(``roofline.engines.HOST_FIT_SPLIT``); every other run is the test set, and the report scores the
two apart. No value of the sample enters any other figure or default.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from roofline.datafiles import strict_json
from roofline.format import dumps_strict

# What names a run: the keys of every report row (the Accuracy page keeps them beside the figures).
RUN_FIELDS = ("id", "model", "device", "engine", "tp", "isl", "osl", "concurrency")

REPORT_PATH = Path(__file__).resolve().parents[1] / "docs" / "accuracy.json"
SCHEMA = "roofline.accuracy"
MAX_REPORT_BYTES = 32 * 2**20
REPORT_COMMAND = "python -m roofline validate --report docs/accuracy.json"
# A run measured this much below the ideal bound of its simulated setup: the datasheet's roofs with
# no host work give the least time that setup takes under the simulation's scheduler and token budget
# (its arrivals, KV-cache format, one token per step), so a faster measurement most likely comes
# from something its source does not record. The margin leaves room for a slightly better schedule.
BELOW_IDEAL_MARGIN = 0.10
BELOW_IDEAL_WHY = (
    "measured more than 10% below the ideal bound of the setup simulated from what its source records (datasheet "
    "roofs, no host work, the engine's scheduler and token budget, the run's client and KV-cache format where "
    "documented): such a run most likely differed from that setup (requests paced otherwise, a smaller KV-cache "
    "format holding more sequences, speculative decoding, engine flags), and its error says more about the setup "
    "than about the kernels"
)


def below_ideal(measured, ideal) -> np.ndarray:
    """Whether each measurement is more than ``BELOW_IDEAL_MARGIN`` below its ideal bound (NaN: no)."""
    measured, ideal = np.asarray(measured, float), np.asarray(ideal, float)
    with np.errstate(invalid="ignore"):
        return measured < (1.0 - BELOW_IDEAL_MARGIN) * ideal


# Under this many runs a p90 is printed as "–": a run or two have no 90th percentile to speak of.
P90_MIN_RUNS = 10


def p90_shown(p90: float, runs: int | None) -> str:
    """A p90 |error| as the reports print it: whole percents, "–" under ``P90_MIN_RUNS`` runs."""
    return f"{p90:.0%}" if runs is None or runs >= P90_MIN_RUNS else "–"


@dataclass(frozen=True)
class Score:
    runs: int
    median_abs_error: float
    p90_abs_error: float
    bias: float  # median of predicted / measured - 1: below 0, predicted faster than measured

    @property
    def leans(self) -> bool:
        """Whether the bias shows at whole percents (one rule for the words and the table cell)."""
        return f"{abs(self.bias):.0%}" != "0%"

    def words(self) -> str:
        lean = f"{abs(self.bias):.0%} too {'fast' if self.bias < 0 else 'slow'}" if self.leans else "no lean either way"
        p90 = f" (p90 {self.p90_abs_error:.0%})" if self.runs >= P90_MIN_RUNS else ""
        return f"median {self.median_abs_error:.0%} off{p90}, {lean}"


def score(predicted, measured) -> Score | None:
    """Median and p90 |error| and bias of the finite pairs (None: none)."""
    ratio = np.asarray(predicted, float) / np.asarray(measured, float) - 1.0
    ratio = ratio[np.isfinite(ratio)]
    if ratio.size == 0:
        return None
    return Score(
        int(ratio.size),
        float(np.median(np.abs(ratio))),
        float(np.percentile(np.abs(ratio), 90)),
        float(np.median(ratio)),
    )


# The test set again per engine and per device, as the figures the product is held to are read
# (``test_set_by_engine`` and ``test_set_by_device`` of both parts of the report).
BREAKDOWNS = ("engine", "device")


def by_field(results: list[dict], field: str) -> dict[str, list[dict]]:
    """``results`` split by the value of ``field``, the values in sorted order."""
    groups: dict[str, list[dict]] = {}
    for r in results:
        groups.setdefault(str(r[field]), []).append(r)
    return dict(sorted(groups.items()))


def breakdowns(test: list[dict], scores) -> dict[str, dict[str, object]]:
    """The test set's ``scores`` per engine and per device: ``test_set_by_engine`` and
    ``test_set_by_device`` of a report's part."""
    return {f"test_set_by_{f}": {k: scores(rs) for k, rs in by_field(test, f).items()} for f in BREAKDOWNS}


def _commit() -> str:
    """The commit the report is written from, "-dirty" after it where the working tree differs from
    it (the report itself aside), as ``git describe --dirty`` marks one."""
    root = REPORT_PATH.parents[1]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        changed = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                f":(exclude){REPORT_PATH.relative_to(root)}",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = head.stdout.strip() or "unknown"
    return commit + "-dirty" if commit != "unknown" and changed.stdout.strip() else commit


def build_report(sample: Path | None = None, every: int = 1) -> dict[str, object]:
    """Both scores over the sample (the simulation on every ``every``-th run)."""
    from roofline.validate import load_silicon_sample, validate
    from roofline.validate_load import score_load

    steady = validate(sample)
    load = score_load(load_silicon_sample(sample), every)
    return {
        "schema": SCHEMA,
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "command": REPORT_COMMAND + (f" --every {every}" if every != 1 else ""),
        "steady": steady,
        "load": load,
    }


def write_report(path: Path, report: dict[str, object]) -> None:
    Path(path).write_text(dumps_strict(report))


def load_report(path: Path = REPORT_PATH) -> dict[str, object]:
    """A report written by ``write_report``; a clear error for anything else."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no accuracy report at {path}: write one with `{REPORT_COMMAND}`")
    if path.stat().st_size > MAX_REPORT_BYTES:
        raise ValueError(f"{path}: larger than {MAX_REPORT_BYTES // 2**20} MiB, not an accuracy report")
    try:
        data = strict_json(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not JSON ({str(exc)[:80]})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not an accuracy report (schema {SCHEMA!r})")
    for part in ("steady", "load"):
        if not isinstance(data.get(part), dict) or not isinstance(data[part].get("results"), list):
            raise ValueError(f"{path}: the {part!r} part has no results")
    return data


def headline(report: dict[str, object]) -> dict[str, dict[str, object]]:
    """The test set's scores (the runs no figure was fitted on), per metric and column."""
    steady, load = report["steady"]["test_set"], report["load"]["test_set"]
    return {
        "tpot_steady": {"runs": steady["runs"], "ideal": steady.get("datasheet"), "expected": steady.get("tables")},
        "tpot_load": {"runs": load["runs"], "ideal": load.get("datasheet_tpot"), "expected": load.get("tables_tpot")},
        "ttft_load": {"runs": load["runs"], "ideal": load.get("datasheet_ttft"), "expected": load.get("tables_ttft")},
    }
