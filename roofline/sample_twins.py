"""One measurement, several rows: the silicon sample carries InferenceX's results as three exports
(``source_file=2026-03-25.csv``, ``source_file=2026-04-06.csv`` and ``db-dump/2026-04-27``), and
most runs measured before March 2026 are in two or three of them. The rows of one run agree on the
device, the engine, the precision, the lengths, the concurrency and the measured day, and carry the
same TTFT and TPOT to 12 significant digits (the exports write the 16th or 17th differently), which
two measurements never do; the exports differ only in what
they record beside them (the 2026-03-25 export the time of day, the db-dump a config id, one of them
DeepSeek-R1's runs under ``deepseek-ai/DeepSeek-V3``).

A run counts once: every row but one of its twins is marked ``same_as`` the row kept, and the
accuracy report leaves it out with that reason (``roofline.silicon_sample.why_not_scored``). The
row kept records the most: a measured time of day (which ties a run to the change that ran it,
``roofline.inferencex_runs``), then a source that names the model, then the file's order.
"""

from __future__ import annotations

import re

SAME_RUN_REASON = "the same run as another row (another export of its source)"
SAME_RUN_FIELDS = ("system", "backend", "precision", "isl", "osl", "batch_size")
MEASURED_FIELDS = ("silicon_ttft_ms", "silicon_tpot_ms")
_MEASURED = re.compile(r"measured=(\d{4}-\d\d-\d\d)(?:T(\d\d:\d\d:\d\d))?")


def _measured(row: dict[str, str]) -> tuple[str, bool]:
    """The row's measured day ('' where none) and whether it records a time of day (a midnight
    stamp is how the exports that keep only the day write it)."""
    found = _MEASURED.search(row.get("silicon_data_source") or "")
    if not found:
        return "", False
    return found[1], bool(found[2]) and found[2] != "00:00:00"


def _records(row: dict[str, str]) -> tuple[bool, bool]:
    """What a row records beside the measurement, in the order that picks the row kept."""
    return _measured(row)[1], "model=" in (row.get("silicon_data_source") or "")


def mark_twins(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows, each later export of a run marked ``same_as`` the id of the row kept (module
    notes). Rows without both measured figures are never twins."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, row in enumerate(rows):
        try:
            measured = tuple(f"{float(row[f]):.12g}" for f in MEASURED_FIELDS)
        except (KeyError, TypeError, ValueError):  # a figure missing or not a number: never a twin
            continue
        key = tuple(row.get(f) or "" for f in SAME_RUN_FIELDS) + measured + (_measured(row)[0],)
        groups.setdefault(key, []).append(i)
    out = list(rows)
    for members in groups.values():
        if len(members) < 2:
            continue
        kept = max(members, key=lambda i: (_records(rows[i]), -i))
        for i in members:
            if i != kept:
                out[i] = rows[i] | {"same_as": rows[kept]["id"]}
    return out
