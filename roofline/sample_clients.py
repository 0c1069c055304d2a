"""A run's clients as its source records them, against the row's ``batch_size``.

Some of the silicon sample's sources record the benchmark client's concurrency in
``silicon_data_source`` (``silicon_concurrency=N``) beside the row's ``batch_size``. Where a row
records attention data parallelism (``attention_dp_size`` D > 1), its ``batch_size`` is the
client's concurrency over D, the sequences one attention rank holds: every such row of the sample
(2026-04 dump) reads so. Rows that leave ``attention_dp_size`` blank or 0 with a ``batch_size`` of
the client's concurrency over the run's TP carry the same signature: the TP group's ranks each held
their share of the sequences (attention data parallelism, DEP), which the simulation does not run.
Any other gap means the clients were spread over ranks or replicas that the row does not name.
Either way the row's TP and batch are not the setup that ran, and it is not scored.
"""

from __future__ import annotations

import re

_CLIENTS = re.compile(r"silicon_concurrency=(\d+)\s*(?:;|$)")

ATTENTION_DP_REASON = (
    "attention data parallel (the row's batch is its client's concurrency over its TP, as the rows that record "
    "attention data parallelism write it)"
)
SPREAD_REASON = (
    "its client's concurrency is not its batch (the clients were spread over ranks or replicas it does not name)"
)


def recorded_clients(row: dict[str, str]) -> int | None:
    """The client's concurrency the row's source records, None where it records none."""
    found = _CLIENTS.search(row.get("silicon_data_source") or "")
    return int(found[1]) if found else None


def why_clients_not_batch(row: dict[str, str]) -> str | None:
    """Why the row cannot be simulated at its TP with its batch as the clients (None: it can)."""
    clients = recorded_clients(row)
    try:
        batch, tp = float(row.get("batch_size") or "nan"), float(row.get("tp_size") or 1)
    except ValueError:
        return None
    if clients is None or not batch > 0 or clients == batch:
        return None
    return ATTENTION_DP_REASON if tp > 1 and clients == batch * tp else SPREAD_REASON
