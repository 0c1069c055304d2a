"""One measurement, several rows: the silicon sample carries InferenceX's results as three exports
(``source_file=2026-03-25.csv``, ``source_file=2026-04-06.csv`` and ``db-dump/2026-04-27``), and
most runs measured before March 2026 are in two or three of them (a few twice in one export). The
rows of one run agree on the device, the engine, the precision, the lengths, the clients (the
source's ``silicon_concurrency``, else ``batch_size``, which some exports write per attention data
parallel rank) and the measured day, and carry the same TTFT and TPOT to 12 significant digits (the
exports write the 16th or 17th differently), which two measurements never do; the exports differ
only in what they record beside them (the 2026-03-25 export the time of day, the db-dump a config
id and the image's full tag, one of them DeepSeek-R1's runs under ``deepseek-ai/DeepSeek-V3``).

Two gap analyses in the sample (``kimi-k2.5-gap-analysis.csv``, 47 rows, and
``qwen3.5-397b-gap-analysis.csv``, 76 rows) copy InferenceX runs with both figures rounded to
0.01 ms and without the measured day: every one of their rows equals an InferenceX row of the same
device, engine, precision, lengths and clients once that row is rounded as the copy writes it.
A copy reads as a run whose client the source does not name, so it would be scored a second time
as another benchmark (fixed lengths, no warm-up). Such a rounded copy is a twin of the run it
rounds; two separate measurements agreeing on TTFT and TPOT to 0.01 ms on one setup is not a
chance worth allowing for. A copy writes both figures to 1 to 3 decimal places (in plain or
exponent form) and records no measured day; a row written in whole milliseconds says too little to
be tied to one run. Where two runs of the setup round to it, the copy goes with the one the exact
rule would keep.

A run counts once: every row but one of its twins is marked ``same_as`` the row kept, and the
accuracy report leaves it out with that reason (``roofline.silicon_sample.why_not_scored``). The
row kept is the one with a measured time of day (which ties a run to the change that ran it,
``roofline.inferencex_runs``), then one whose source names the model, then the first in the file;
a rounded copy is never kept over the run it rounds.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from roofline.sample_checks import why_figures_not_a_run

SAME_RUN_REASON = "the same run as another row (the sample repeats it)"
SAME_RUN_FIELDS = ("system", "backend", "precision", "isl", "osl")
MEASURED_FIELDS = ("silicon_ttft_ms", "silicon_tpot_ms")
ROUNDED_DECIMALS = 3  # a copy writes its figures to 1 to 3 decimal places; a run's own export, more
_MEASURED = re.compile(r"measured=(\d{4}-\d\d-\d\d)(?:T(\d\d:\d\d:\d\d))?")
_CLIENTS = re.compile(r"silicon_concurrency=([^;]+)")


def _clients(row: dict[str, str]) -> str:
    """The run's clients as its source records them, else its ``batch_size``; '' where neither."""
    found = _CLIENTS.search(row.get("silicon_data_source") or "")
    value = found[1].strip() if found else row.get("batch_size") or ""
    try:
        return f"{float(value):g}"
    except ValueError:
        return value


def _measured(row: dict[str, str]) -> tuple[str, bool]:
    """The row's measured day ('' where none) and whether it records a time of day (a midnight
    stamp is how the exports that keep only the day write it)."""
    found = _MEASURED.search(row.get("silicon_data_source") or "")
    if not found:
        return "", False
    return found[1], bool(found[2]) and found[2] != "00:00:00"


def _decimals(text: str) -> int:
    """How many decimal places a figure is written to, in plain or exponent form ("328.87" and
    "3.2887e2" both 2; "329" 0)."""
    exponent = Decimal(text.strip()).as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _rounds_to(full: list[float], copy_text: list[str]) -> bool:
    """Whether figures written in full are within half a unit of the last place the copy writes
    (either way of rounding a half)."""
    return all(abs(x - float(t)) <= 0.5 * 10.0 ** -_decimals(t) * (1 + 1e-9) for x, t in zip(full, copy_text))


def _records(row: dict[str, str]) -> tuple[bool, bool]:
    """What a row records beside the measurement, in the order that picks the row kept."""
    return _measured(row)[1], "model=" in (row.get("silicon_data_source") or "")


def mark_twins(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows, each repeat of a run marked ``same_as`` the id of the row kept (module notes).
    Rows without both measured figures as finite numbers, or whose figures are not a run's
    (``roofline.sample_checks``), are never twins."""
    groups: dict[tuple[str, ...], list[int]] = {}
    by_setup: dict[tuple[str, ...], list[tuple[int, list[float]]]] = {}
    for i, row in enumerate(rows):
        try:
            figures = [float(row[f]) for f in MEASURED_FIELDS]
        except (KeyError, TypeError, ValueError):  # a figure missing or not a number: never a twin
            continue
        if not all(math.isfinite(x) for x in figures) or why_figures_not_a_run(row):
            continue
        measured = tuple(f"{x:.12g}" for x in figures)
        setup = tuple(row.get(f) or "" for f in SAME_RUN_FIELDS) + (_clients(row),)
        groups.setdefault(setup + measured + (_measured(row)[0],), []).append(i)
        by_setup.setdefault(setup, []).append((i, figures))
    out = list(rows)

    def name(kept: int) -> str:
        return rows[kept].get("id") or f"row {kept + 1} of the sample"

    for members in groups.values():
        if len(members) < 2:
            continue
        kept = max(members, key=lambda i: (_records(rows[i]), -i))
        for i in members:
            if i != kept:
                out[i] = rows[i] | {"same_as": name(kept)}
    for runs in by_setup.values():  # rounded copies (module notes)
        for i, _ in runs:
            texts = [rows[i][f] for f in MEASURED_FIELDS]
            places = [_decimals(t) for t in texts]
            if "same_as" in out[i] or _measured(rows[i])[0] or not 1 <= min(places) <= max(places) <= ROUNDED_DECIMALS:
                continue  # a whole number says too little to tie it to one run
            full = [j for j, figures in runs if j != i and not out[j].get("same_as") and _rounds_to(figures, texts)]
            full = [j for j in full if min(_decimals(rows[j][f]) for f in MEASURED_FIELDS) > ROUNDED_DECIMALS]
            if full:  # the one the exact rule would keep, wherever the rows stand in the file
                out[i] = rows[i] | {"same_as": name(max(full, key=lambda j: (_records(rows[j]), -j)))}
    return out
