"""A row whose batch is not its client's concurrency is not simulated at its TP: the sample's rows
that record attention data parallelism write the batch per attention rank (the client's
concurrency over D), and rows with the same signature over their TP ran so too."""

from __future__ import annotations

from collections import Counter

import pytest

from roofline.sample_clients import (
    ATTENTION_DP_REASON,
    SPREAD_REASON,
    recorded_clients,
    why_clients_not_batch,
)
from roofline.silicon_sample import load_silicon_sample, why_not_scored


def _row(clients: str | None, batch: str, tp: str = "4", dp: str = "") -> dict[str, str]:
    source = "source_file=x.csv" + (f"; silicon_concurrency={clients}; measured=2026-03-17" if clients else "")
    return {"silicon_data_source": source, "batch_size": batch, "tp_size": tp, "attention_dp_size": dp}


@pytest.mark.parametrize(
    "row, why",
    [
        (_row("224", "56", tp="4"), ATTENTION_DP_REASON),  # 224 clients over TP 4: 56 a rank
        (_row("80", "10", tp="8"), ATTENTION_DP_REASON),
        (_row("416", "13", tp="2"), SPREAD_REASON),  # 32 x 13: not its TP
        (_row("8", "8", tp="8"), None),  # the clients are the batch
        (_row(None, "8", tp="8"), None),  # no concurrency recorded: the batch is the clients
        (_row("6", "3", tp="1"), SPREAD_REASON),  # TP 1 has no ranks to share sequences
        (_row("6", "", tp="2"), None),  # no batch: why_not_scored says so first
    ],
)
def test_a_batch_that_is_not_the_clients_is_named(row, why):
    assert why_clients_not_batch(row) == why


def test_the_concurrency_is_read_whole_from_the_source():
    assert recorded_clients(_row("128", "128")) == 128
    assert recorded_clients({"silicon_data_source": "silicon_concurrency=12x; measured=1"}) is None
    assert recorded_clients({"silicon_data_source": ""}) is None and recorded_clients({}) is None


@pytest.mark.parametrize(
    "source, clients",
    [
        ("silicon_concurrency=" + "9" * 5000, None),  # no count that long: not one
        ("max_silicon_concurrency=7", None),  # another key's tail
        ("silicon_concurrency=0; measured=1", None),  # no clients: not recorded
        ("silicon_concurrency=-5", None),
        ("silicon_concurrency= 7", None),
        ("a=1; silicon_concurrency=7 ;b", 7),
        ("silicon_concurrency=7\n", 7),
        (123, None),  # not text
        (None, None),
    ],
)
def test_a_hostile_source_is_read_or_left_alone_never_raises(source, clients):
    assert recorded_clients({"silicon_data_source": source}) == clients
    assert why_clients_not_batch({"silicon_data_source": source, "batch_size": "3"}) == (clients and SPREAD_REASON)


def test_a_bad_tp_does_not_hide_a_batch_that_is_not_the_clients():
    for tp in ("abc", "", "0", None):
        assert why_clients_not_batch(_row("8", "4", tp=tp)) == SPREAD_REASON
    assert why_clients_not_batch(_row("8", "1e3")) == SPREAD_REASON  # a number, not the clients
    assert why_clients_not_batch(_row("8", "8.0")) is None


def test_rows_that_record_attention_data_parallelism_write_the_batch_per_rank():
    """The rule's evidence, in the shipped sample: of the aggregated rows that record D > 1 and the
    client's concurrency, nearly every one's batch is the concurrency over D; those rows, and the
    rows with a batch of the concurrency over TP, are not scored."""
    rows = load_silicon_sample()
    ratios = Counter()
    for row in rows:
        clients, dp = recorded_clients(row), float(row.get("attention_dp_size") or 0)
        if row.get("mode") == "agg" and clients and dp > 1 and row.get("batch_size"):
            ratios[clients / float(row["batch_size"]) == dp] += 1
    assert ratios[True] >= 150 and ratios[False] <= 0.01 * ratios[True]
    by_rank = [r for r in rows if why_clients_not_batch(r) == ATTENTION_DP_REASON]
    assert all(why_not_scored(r) is not None for r in by_rank)
    # Rows that would otherwise be scored are left out for this reason, by name.
    assert sum(why_not_scored(r) == ATTENTION_DP_REASON for r in by_rank) >= 10
