"""What the Accuracy page shows, from the published report (``roofline.accuracy``): the page only
reads widgets and lays out what these return."""

from __future__ import annotations

import numpy as np
import streamlit as st

from roofline.accuracy import RUN_FIELDS, below_ideal, load_report
from roofline.lazy import pandas as pd

# metric -> (the report's part, its measured column, the expected column, the ideal column, words)
METRICS = {
    "TPOT, simulated under load": ("load", "measured_tpot_ms", "tables_tpot_ms", "datasheet_tpot_ms", "TPOT"),
    "TTFT, simulated under load": ("load", "measured_ttft_ms", "tables_ttft_ms", "datasheet_ttft_ms", "TTFT"),
    "TPOT, steady state": ("steady", "measured_tpot_ms", "tables_tpot_ms", "datasheet_tpot_ms", "TPOT"),
}
RUNS = ("test set", "fit split", "all")


# One copy per server, read and never changed: cache_data would pickle the 3.4 MB report on its first
# run and unpickle a copy on every rerun.
@st.cache_resource(show_spinner=False)
def report() -> dict:
    return load_report()


def runs_frame(data: dict, metric: str, runs: str, engines: list[str]) -> pd.DataFrame:
    """The chosen runs of one metric: measured, expected and ideal, with what each run was."""
    part, measured, expected, ideal, _ = METRICS[metric]
    frame = pd.DataFrame(data[part]["results"])
    if frame.empty:
        return frame
    if runs != "all":
        frame = frame[frame["host_fit_split"] == (runs == "fit split")]
    frame = frame[frame["engine"].isin(engines)]
    frame = frame.rename(columns={measured: "measured_ms", expected: "expected_ms", ideal: "ideal_ms"})
    keep = [*RUN_FIELDS, "measured_ms", "expected_ms", "ideal_ms"]
    frame = frame[keep].dropna(subset=["measured_ms"])
    frame = frame[frame["measured_ms"] > 0]
    # Measured below the ideal bound of the simulated setup (roofline.accuracy.BELOW_IDEAL_WHY):
    # only the runs simulated under their load have one; the steady state is one analytic step.
    flags = below_ideal(frame["measured_ms"], frame["ideal_ms"]) if part == "load" else False
    return frame.assign(below_ideal=flags)


def errors(predicted: pd.Series, measured: pd.Series) -> dict[str, float]:
    ratio = (predicted / measured - 1).dropna()
    if ratio.empty:
        return {"median": np.nan, "p90": np.nan, "bias": np.nan}
    return {
        "median": float(ratio.abs().median()),
        "p90": float(ratio.abs().quantile(0.9)),
        "bias": float(ratio.median()),
    }


def group_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model x device x engine: runs, then median and p90 |error| and bias of both columns."""
    rows = []
    for (model, device, engine), g in frame.groupby(["model", "device", "engine"]):
        e, i = errors(g["expected_ms"], g["measured_ms"]), errors(g["ideal_ms"], g["measured_ms"])
        rows.append(
            {
                "model": model,
                "device": device,
                "engine": engine,
                "runs": len(g),
                "below ideal": int(g["below_ideal"].sum()),
                "expected median": e["median"] * 100,
                "expected p90": e["p90"] * 100,
                "expected bias": e["bias"] * 100,
                "ideal median": i["median"] * 100,
                "ideal bias": i["bias"] * 100,
            }
        )
    return pd.DataFrame(rows)


def hovers(frame: pd.DataFrame, words: str) -> list[str]:
    return [
        f"<b>{r.model}</b> on {r.device}, {r.engine}, TP {r.tp}<br>{r.concurrency} clients, {r.isl} in / {r.osl} out"
        f"<br>{words}: measured {r.measured_ms:,.2f} ms, expected {r.expected_ms:,.2f} ms, ideal {r.ideal_ms:,.2f} ms"
        f"<br>{r.id}" + ("<br><i>measured below the ideal bound of its simulated setup</i>" if r.below_ideal else "")
        for r in frame.itertuples()
    ]


PERCENT = {c: "%.0f%%" for c in ("expected median", "expected p90", "expected bias", "ideal median", "ideal bias")}
