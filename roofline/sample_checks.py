"""Checks on a silicon sample a user hands ``validate --sample``: the file itself, then each row's
figures, so that a file that is not a sample is refused by name and a row that is not a run is
left out with a reason instead of being scored."""

from __future__ import annotations

import math
from pathlib import Path

from roofline.sample_clients import _number  # blank: the default; not a number: nan

# The columns every scored row reads (aiconfigurator-core's systems/silicon_sample.csv).
REQUIRED_COLUMNS = (
    "id",
    "model_path",
    "system",
    "backend",
    "mode",
    "isl",
    "osl",
    "batch_size",
    "tp_size",
    "silicon_tpot_ms",
)
_FIGURES = ("isl", "osl", "batch_size", "tp_size", "silicon_tpot_ms", "silicon_ttft_ms")
NOT_A_RUN_REASON = (
    "its figures are not a run's (a length, TP or concurrency that is not a positive whole number, or a "
    "measured time that is not positive)"
)


def check_sample_path(path: Path) -> None:
    """Refuse, naming the option, a path that is not a readable file."""
    if not path.exists():
        raise ValueError(f"--sample: {path}: no such file")
    if path.is_dir():
        raise ValueError(f"--sample: {path} is a folder; name a silicon_sample.csv or .csv.gz")


def check_sample_columns(path: Path, columns: list[str] | None) -> None:
    """Refuse a CSV without the columns a run is read from."""
    missing = [c for c in REQUIRED_COLUMNS if c not in (columns or [])]
    if missing:
        raise ValueError(
            f"--sample: {path} is not a silicon sample: no column {', '.join(missing)} "
            "(aiconfigurator-core's systems/silicon_sample.csv has them)"
        )


def unreadable(path: Path, exc: Exception) -> ValueError:
    """The error for a file that is not text CSV (or gzip of it), or cannot be read at all."""
    if isinstance(exc, PermissionError):
        return ValueError(f"--sample: {path} cannot be read (permission denied)")
    return ValueError(f"--sample: {path} is not a CSV or .csv.gz ({type(exc).__name__}: {exc})")


def why_figures_not_a_run(row: dict[str, str]) -> str | None:
    """A row whose lengths, TP or clients, where it gives them, are not positive whole numbers, or
    whose measured TPOT or TTFT, where it gives one, is not positive (a blank one is another
    reason's: disaggregated runs leave them blank)."""
    given = {k: _number(row.get(k), math.nan) for k in _FIGURES if row.get(k) not in (None, "")}
    for key, value in given.items():
        whole = key in ("isl", "osl", "batch_size", "tp_size")
        if not math.isfinite(value) or not (value >= 1 and value == round(value) if whole else value > 0):
            return NOT_A_RUN_REASON
    return None
