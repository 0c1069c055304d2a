"""The Serving page's tables, built from the engine's results."""

from __future__ import annotations

from dashboard.basis import basis_short
from roofline.format import fmt_bytes, fmt_seconds
from roofline.lazy import pandas as pd


def targets_frame(best: list, roofs: dict[str, str]):
    """The cheapest setup per device that meets the targets, one row per device."""
    return pd.DataFrame(
        [
            {
                "device": b.hardware,
                "rests on": basis_short(roofs[b.hardware]) if b.hardware in roofs else "",
                "meets": b.meets,
                "TP": b.point["tp"] if b.meets else None,
                "batch": b.point["batch"] if b.meets else None,
                "weights / KV": f"{b.weight_dtype} / {b.kv_dtype}" if b.meets else "",
                "TTFT": fmt_seconds(b.point["ttft_s"]) if b.meets else "",
                "TPOT": fmt_seconds(b.point["tpot_s"]) if b.meets else "",
                "tok/s per device": round(b.point["tokens_per_s_per_device"]) if b.meets else None,
                "$ per M output": b.point["usd_per_million_output"] if b.meets else None,
                "$ per M input": b.point["usd_per_million_input"] if b.meets else None,
                "tokens per joule": b.point["tokens_per_joule"] if b.meets else None,
                "what binds": f"{b.binding}-bound" if b.meets else b.binding,
            }
            for b in best
        ]
    )


def disaggregation_frame(disagg: dict):
    """Colocated against disaggregated prefill and decode pools, one row per setup."""
    return pd.DataFrame(
        [
            {
                "setup": name,
                "TTFT": fmt_seconds(v["ttft_s"]),
                "TPOT": fmt_seconds(v["tpot_s"]),
                "tok/s per device": round(v["tokens_per_s_per_device"]),
                "KV per prompt": fmt_bytes(v["kv_bytes_per_prompt"]) if "kv_bytes_per_prompt" in v else "",
                "KV transfer": fmt_seconds(v["kv_transfer_s"]) if "kv_transfer_s" in v else "",
            }
            for name, v in disagg.items()
        ]
    )
