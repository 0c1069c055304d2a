"""A silicon-sample row's attention data parallelism, as its source records it.

aiconfigurator's rows write a run with attention data parallelism as ``attention_dp_size`` D ranks
of ``tp_size`` GPUs each (one rank's attention TP), and its experts as ``moe_tp_size x
moe_ep_size`` over the same ``tp_size x D`` GPUs; ``batch_size`` is one rank's sequences, the
client's concurrency over D where the source records the client (``silicon_concurrency=N``): 168
of the 169 aggregated rows that record D > 1 read so (2026-04 dump). Such a run is simulated as
one of its D ranks with ``batch_size`` clients, the MLP and experts over every rank's tokens
(``roofline.workload.Workload.attention_dp``). A row whose figures do not hold together is left
out, by name: the ranks' GPUs against the experts', experts split both ways or more GPUs than one
scale-up domain of its device (InferenceX's 2026-04-06 export writes D as the run's TP x EP: a run
of TP 2 and EP 2 as 4 ranks, one of TP 8 and EP 8 as 64), or clients that are not its batch times D.
"""

from __future__ import annotations

import math

from roofline.sample_clients import _number as _value
from roofline.sample_clients import recorded_clients


def _number(row: dict[str, str], key: str, default: float) -> float:
    return _value(row.get(key), default)


def attention_ranks(row: dict[str, str]) -> int:
    """The attention data parallel ranks a row records (1 where it records none, or 0 or 1)."""
    d = _number(row, "attention_dp_size", 1.0)
    return int(d) if math.isfinite(d) and d > 1 and d == int(d) else 1


def run_parallelism(row: dict[str, str]) -> tuple[int, int]:
    """(devices, attention ranks) a row ran on: its D ranks of ``tp_size`` devices (D = 1 without
    attention data parallelism)."""
    d = attention_ranks(row)
    return int(_number(row, "tp_size", 1.0)) * d, d


def why_ranks_not_scored(row: dict[str, str]) -> str | None:
    """Why a row that records attention data parallelism cannot be simulated as it ran (None: it
    can, or it records none)."""
    d = _number(row, "attention_dp_size", 1.0)
    if not (d > 1):  # none recorded (NaN, 0 or 1)
        return None if not math.isnan(d) else "attention data parallel size is not a number"
    tp = _number(row, "tp_size", 1.0)
    if d != int(d) or not math.isfinite(tp) or tp < 1 or tp != int(tp) or d > 1024:
        return "attention data parallel, with a rank count or TP that is not a whole number"
    gpus = tp * d
    moe_tp, moe_ep = _number(row, "moe_tp_size", 0.0), _number(row, "moe_ep_size", 0.0)
    if moe_tp >= 1 and moe_ep >= 1 and moe_tp * moe_ep != gpus:
        return (
            f"attention data parallel: its ranks' {tp:g} x {d:g} GPUs are not its experts' "
            f"{moe_tp:g} x {moe_ep:g}, so the row's parallelism does not hold together"
        )
    if moe_tp > 1 and moe_ep > 1:
        return (
            f"attention data parallel with its experts split both ways ({moe_tp:g} x {moe_ep:g}): one export writes "
            "such a run's ranks as its TP x EP, so the row's ranks are not certain"
        )
    from roofline.hardware import get_hardware
    from roofline.silicon_sample import DEVICE_IDS

    link = get_hardware(DEVICE_IDS[row["system"]]).interconnect if row.get("system") in DEVICE_IDS else None
    domain = link.domain_size if link is not None else None
    if domain is not None and gpus > domain:
        return (
            f"attention data parallel over {gpus:g} GPUs ({d:g} ranks of {tp:g}), more than its device's scale-up "
            f"domain of {domain}: the row's ranks are not the run's"
        )
    clients, batch = recorded_clients(row), _number(row, "batch_size", float("nan"))
    if clients is not None and clients != batch * d:
        return (
            f"attention data parallel: its client's concurrency ({clients}) is not its batch times its ranks "
            f"({batch:g} x {d:g})"
        )
    return None
