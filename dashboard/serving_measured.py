"""Measured serving benchmarks beside the simulation on the Serving page: a result file of
`vllm bench serve`, GuideLLM or aiperf, each of its points simulated at its own load and drawn
on the latency-rate curves, with the gap per metric. Nothing is fitted on it."""

from __future__ import annotations

import streamlit as st

from dashboard.cache import cached
from roofline.lazy import pandas as pd
from roofline.serving.measured import FORMATS, MeasuredError, compare, parse_measured, simulator
from roofline.serving.measured.record import MeasuredRun

MAX_MEASURED_REQUESTS = 20_000  # simulated over all the file's points, so the page answers in seconds


def measured_upload() -> list[MeasuredRun]:
    """The points of an uploaded result file, or none; a bad file is one error line."""
    upload = st.file_uploader(
        "Measured results to set beside the simulation",
        type=["json", "jsonl"],
        key="measured_serving",
        help="One of: " + "; ".join(FORMATS.values()) + ". Each point is simulated at its own load; nothing is fitted.",
    )
    if upload is None:
        return []
    try:
        runs = parse_measured(upload.getvalue(), upload.name)
    except MeasuredError as exc:
        st.error(str(exc))
        return []
    total = sum(min(r.requests or 1000, 200_000) for r in runs)
    if total > MAX_MEASURED_REQUESTS:
        st.warning(
            f"{upload.name}: {total:,} requests over {len(runs)} points; the page simulates at most "
            f"{MAX_MEASURED_REQUESTS:,} (the command line's `serve --measured` takes more). Not drawn."
        )
        return []
    return runs


def _compared(runs: tuple[MeasuredRun, ...], model, hw, precision, tp: int, settings, chunked: bool) -> list[dict]:
    return compare(list(runs), simulator(model, hw, precision, tp, settings, chunked))


def measured_gaps(runs: list[MeasuredRun], model, hw, precision, tp: int, settings, chunked: bool) -> pd.DataFrame:
    """Per point and metric: measured and simulated p50 and p90 and their ratio, after a warning
    where the file's model is not recognizably the model simulated."""
    from roofline.models import load_models
    from roofline.serving.measured.naming import model_mismatch

    if note := model_mismatch(model, (r.model for r in runs), load_models().values(), "the Model picker"):
        st.warning(f"Measured results: {note}.")
    try:
        points = cached(_compared, tuple(runs), model, hw, precision, tp, settings, chunked)
    except MeasuredError as exc:
        st.error(str(exc))
        return pd.DataFrame()
    rows = []
    for point in points:
        load = point["measured"]
        where = (
            f"{load['concurrency']} clients" if load["arrival"] == "concurrency" else f"{load['rate_per_s']:.3g} req/s"
        )
        for r in point["latency"]:
            if r["stat"] in ("p50", "p90") and r["metric"] in ("ttft_s", "tpot_s", "itl_s"):
                rows.append(
                    {
                        "point": point["point"],
                        "load": where,
                        "metric": f"{r['metric'].removesuffix('_s').upper()} {r['stat']}",
                        "measured (ms)": None if r["measured"] is None else r["measured"] * 1e3,
                        "simulated (ms)": None if r["predicted"] is None else r["predicted"] * 1e3,
                        "simulated / measured": r["ratio"],
                    }
                )
    return pd.DataFrame(rows)
