"""Small pieces of the Training page that are not layout: the sequence lengths its memory chart
sweeps, a parameter count in words, the headline's fit metrics."""

from __future__ import annotations

import numpy as np

from roofline.format import fmt_bytes
from roofline.report import Metric


def sequence_lengths(max_context: int, first: int = 256, most: int = 10) -> np.ndarray:
    """Powers of two from ``first`` up to the model's maximum context, and the maximum itself:
    labels that read (1,024, 2,048, …), every other power where there would be more than ``most``."""
    top = int(np.log2(max_context))
    powers = [2**k for k in range(int(np.log2(min(first, max_context))), top + 1)]
    if len(powers) > most:
        powers = powers[:: -(-len(powers) // most)]
    return np.unique(np.array([*powers, max_context], dtype=int))


def fmt_params(count: float) -> str:
    """6.82 M, 8.03 B: a parameter count in the unit that reads."""
    return f"{count / 1e9:,.2f} B" if count >= 1e9 else f"{count / 1e6:,.3g} M"


def token_label(tokens: int) -> str:
    """256, 2k, 128k: a context length as model cards write it (k = 1,024 tokens)."""
    return f"{tokens // 1024}k" if tokens >= 1024 and tokens % 1024 == 0 else f"{tokens:,}"


def fit_metrics(result, peak_bytes: float, peak_at: str, device: str, seq: int) -> tuple[Metric, Metric]:
    """The headline's peak per device (and whether it fits on ``device``, a name made safe for
    markdown) and the largest micro-batch that fits at ``seq`` tokens, or that none does."""
    usable = fmt_bytes(result.capacity_bytes)
    return (
        Metric(
            "Peak / device",
            fmt_bytes(peak_bytes),
            "fits" if result.fits else "does not fit",
            delta_color="normal" if result.fits else "inverse",
            help=f"at the {peak_at} of the step; {usable} usable on {device}",
        ),
        Metric(
            "Max micro-batch",
            f"{result.largest_micro_batch:,}" if result.largest_micro_batch else "none fits",
            help=f"the largest that fits, at {seq:,} tokens",
        ),
    )


def headline_device(name: str, fits: bool, devices: int) -> str:
    """Whose figures the headline shows, where that is not plain: several devices picked (the
    first picked that the setup fits), or none that fits (the step is what it would take)."""
    if devices == 1 and fits:
        return ""
    if not fits:
        return (
            f"On {name}: the setup fits none of the picked devices, so the step figures are what it "
            "would take with the memory"
            + ("; the Memory view's charts compare every picked device." if devices > 1 else ".")
        )
    return f"On {name}, the first picked device this setup fits: the Memory view's charts compare every picked device."


def lever_device(results: dict, headline: str) -> str:
    """Where the levers are evaluated: they answer "what makes it fit", so on the first picked
    device the setup does not fit where there is one (the headline is the first it fits), else on
    the headline's."""
    return next((hid for hid, r in results.items() if not r.fits), headline)


def fit_plan(name: str, plan: list[str], planned, result) -> str:
    """The Levers view's verdict on device ``name``: the levers that together make the setup fit
    (``plan_to_fit``'s answer) and what they cost in step time, or that it fits as it is."""
    from dashboard.basis import basis_short
    from roofline.format import fmt_bytes, fmt_seconds

    if plan and planned is not None:
        return (
            f"**To fit on {name}**: " + " + ".join(plan) + f" → {fmt_bytes(float(planned.memory.peak_bytes))}, "
            f"{'fits' if planned.fits else 'still does not fit'}, step {fmt_seconds(planned.step_time_s)} against "
            f"{fmt_seconds(result.step_time_s)} ({basis_short(result.table.ceilings.source)})."
        )
    return f"It fits on {name} as it is." if result.fits else ""


def levers_frame(lever_rows, peak_bytes: float):
    """The Levers tab's table: each lever alone against this setup."""
    from roofline.format import fmt_bytes
    from roofline.lazy import pandas as pd

    return pd.DataFrame(
        [
            {
                "lever": lv.name,
                "peak per device": fmt_bytes(lv.peak_bytes),
                "change": f"{fmt_bytes(peak_bytes)} → {fmt_bytes(lv.peak_bytes)}",
                "fits": lv.fits,
                "time per token (× now)": f"{lv.slowdown:.2f}×",
            }
            for lv in lever_rows
        ]
    )


STEP_SYMBOLS = (("forward", "circle"), ("backward", "diamond"), ("recompute", "square"), ("optimizer", "x"))


def step_series(table, step_time_s: float) -> list:
    """The step's ops on the roofline, one series per phase (communication has no roofline point)."""
    from roofline.engine import evaluate
    from roofline.plots import op_table_series

    series = []
    for phase, symbol in STEP_SYMBOLS:
        ops = [op for op in table.ops if op.phase == phase]
        if ops:
            series.append(op_table_series(evaluate(ops, table.ceilings), phase, symbol, step_time_s))
    return series


def loading_frame(peaks):
    """The Loading tab's table: each way to load the checkpoint and its peaks."""
    from roofline.format import fmt_bytes
    from roofline.lazy import pandas as pd

    return pd.DataFrame(
        [
            {
                "method": pk.method,
                "host RAM peak": fmt_bytes(pk.host_bytes) + (" (file pages)" if pk.host_file_backed else ""),
                "device peak": fmt_bytes(pk.device_bytes),
                "how": pk.description,
            }
            for pk in peaks
        ]
    )


def page_setup(model, **fields):
    """The page's training setup, refusing (ValueError, as ``TrainSetup`` does) a global batch that
    does not split into whole micro-batches on every device, as the command line does."""
    from roofline.training import TrainSetup
    from roofline.training.setup import global_batch_problem

    if problem := global_batch_problem(fields.get("global_batch"), fields["micro_batch"], fields["dp"]):
        raise ValueError(f"global batch: {problem}")
    return TrainSetup(model, **fields)
