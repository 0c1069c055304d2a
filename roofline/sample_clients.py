"""A run's clients as its source records them, against the row's ``batch_size``.

Some of the silicon sample's sources record the benchmark client's concurrency in
``silicon_data_source`` (``silicon_concurrency=N``) beside the row's ``batch_size``. Where a row
records attention data parallelism (``attention_dp_size`` D > 1, which ``roofline.sample_ranks``
checks before it asks here), its ``batch_size`` is the client's concurrency over D, the sequences one
attention rank held: every such row of the sample (2026-04 dump) but one reads so. A row that
records no D with a ``batch_size`` of the client's concurrency over its TP carries the same
signature: each rank of the TP group held its share of the sequences, most likely attention data
parallelism over ranks the row does not record. Any other gap means the clients were spread over
ranks or replicas that the row does not name. Either way the row's TP and batch are not the setup
that ran, and it is not scored.
"""

from __future__ import annotations

import re

# The key whole (not the tail of a longer one) and a count of at most nine digits, then the field's end.
_CLIENTS = re.compile(r"(?<![\w.])silicon_concurrency=(\d{1,9})\s*(?:;|$)")

ATTENTION_DP_REASON = (
    "its batch is its client's concurrency over its TP, as the rows that record attention data parallelism "
    "write theirs (attention data parallelism, most likely)"
)
SPREAD_REASON = (
    "its client's concurrency is not its batch (the clients were spread over ranks or replicas it does not name)"
)


def _number(value: object, default: float) -> float:
    try:
        return float(str(value)) if value not in (None, "") else default
    except ValueError:
        return float("nan")


def recorded_clients(row: dict[str, str]) -> int | None:
    """The client's concurrency the row's source records (its first), None where it records none
    (or records 0)."""
    found = _CLIENTS.search(str(row.get("silicon_data_source") or ""))
    return (int(found[1]) or None) if found else None


def why_clients_not_batch(row: dict[str, str]) -> str | None:
    """Why the row cannot be simulated at its TP with its batch as the clients (None: it can)."""
    clients = recorded_clients(row)
    batch = _number(row.get("batch_size"), float("nan"))
    if _number(row.get("attention_dp_size"), 1.0) > 1:  # its own check: roofline.sample_ranks
        return None
    if clients is None or not batch > 0 or clients == batch:
        return None
    tp = _number(row.get("tp_size"), 1.0)
    return ATTENTION_DP_REASON if tp > 1 and clients == batch * tp else SPREAD_REASON
