"""What the Accuracy page shows, from the published report (``roofline.accuracy``): the page only
reads widgets and lays out what these return."""

from __future__ import annotations

import numpy as np
import streamlit as st

from roofline.accuracy import REPORT_PATH, RUN_FIELDS, below_ideal, load_report, p90_shown, score
from roofline.inferencex_runs import MAYBE_REASON, SPECULATIVE_REASON
from roofline.lazy import pandas as pd
from roofline.sample_clients import ATTENTION_DP_REASON, SPREAD_REASON
from roofline.sample_twins import SAME_RUN_REASON

# metric -> (the report's part, its measured column, the expected column, the ideal column, words)
METRICS = {
    "TPOT, simulated under load": ("load", "measured_tpot_ms", "tables_tpot_ms", "datasheet_tpot_ms", "TPOT"),
    "TTFT, simulated under load": ("load", "measured_ttft_ms", "tables_ttft_ms", "datasheet_ttft_ms", "TTFT"),
    "TPOT, steady state": ("steady", "measured_tpot_ms", "tables_tpot_ms", "datasheet_tpot_ms", "TPOT"),
}
RUNS = ("test set", "fit split", "all")


# One copy per server and version of the file: cache_data would pickle the 4 MB report on its first
# run and unpickle a copy on every rerun.
@st.cache_resource(show_spinner=False, max_entries=2)
def _report(stamp: tuple[int, int]) -> dict:
    return load_report()


def report() -> dict:
    """The shipped report, read again when the file changes (as ``roofline.known_error`` does)."""
    try:
        stat = REPORT_PATH.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        stamp = (0, 0)  # load_report says what is missing
    return _report(stamp)


class Runs:
    """The chosen runs of one metric, a numpy array per column (``RUN_FIELDS``, then measured_ms,
    expected_ms, ideal_ms and below_ideal): the headline and the chart need no pandas, which the
    table below them imports."""

    def __init__(self, columns: dict[str, np.ndarray]):
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns["measured_ms"])

    def __getitem__(self, column: str) -> np.ndarray:
        return self.columns[column]

    @property
    def empty(self) -> bool:
        return len(self) == 0

    def where(self, keep) -> Runs:
        keep = np.asarray(keep, bool)
        return Runs({k: v[keep] for k, v in self.columns.items()})

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.columns)


def devices_in(data: dict) -> list[str]:
    """The devices of the report's runs, in order."""
    return sorted({str(r.get("device")) for part in ("steady", "load") for r in data[part]["results"]})


def runs_frame(data: dict, metric: str, runs: str, engines: list[str], devices: list[str] | None = None) -> Runs:
    """The chosen runs of one metric: measured, expected and ideal, with what each run was (on
    ``devices``; every device where it is empty or None)."""
    part, measured, expected, ideal, _ = METRICS[metric]
    results = data[part]["results"]

    def column(name: str, numeric: bool = False) -> np.ndarray:
        values = [r.get(name) for r in results]
        return np.array([np.nan if v is None else v for v in values], float) if numeric else np.array(values, object)

    columns = {name: column(name) for name in RUN_FIELDS}
    columns["client"] = column("client")  # who sent the requests (simulated runs only)
    columns["client_warmup"] = column("client_warmup")  # its warm-up requests per client, where known
    columns |= {
        "measured_ms": column(measured, True),
        "expected_ms": column(expected, True),
        "ideal_ms": column(ideal, True),
    }
    keep = np.isin(columns["engine"], list(engines)) & (columns["measured_ms"] > 0)  # NaN: not measured
    if devices:
        keep &= np.isin(columns["device"], list(devices))
    if runs != "all":
        keep &= np.array([bool(r.get("host_fit_split")) == (runs == "fit split") for r in results], bool)
    chosen = Runs(columns).where(keep)
    # Measured below the ideal bound of the simulated setup (roofline.accuracy.BELOW_IDEAL_WHY):
    # only the runs simulated under their load have one; the steady state is one analytic step.
    flags = below_ideal(chosen["measured_ms"], chosen["ideal_ms"]) if part == "load" else np.zeros(len(chosen), bool)
    chosen.columns["below_ideal"] = flags
    return chosen


def errors(predicted, measured) -> dict[str, float]:
    s = score(predicted, measured)
    if s is None:
        return {"median": np.nan, "p90": np.nan, "bias": np.nan}
    return {"median": s.median_abs_error, "p90": s.p90_abs_error, "bias": s.bias}


# The table's rows: one per value of these fields of a run (the URL's ``group``), in words.
GROUPINGS = {"model": ("model", "device", "engine"), "engine": ("engine",), "device": ("device",)}
GROUPING_WORDS = {"model": "model, device and engine", "engine": "engine", "device": "device"}


def group_table(runs: Runs, grouping: str = "model") -> pd.DataFrame:
    """Per group of ``GROUPINGS`` (model x device x engine, engine or device): median and p90
    |error| and bias of both columns, in percent rounded to whole ones (as the tiles and
    ``validate`` print them), then the runs (``with_p90_text`` blanks a p90 of few runs)."""
    fields = GROUPINGS[grouping]
    rows = []
    for values, g in runs.to_frame().groupby(list(fields)):
        e, i = errors(g["expected_ms"], g["measured_ms"]), errors(g["ideal_ms"], g["measured_ms"])
        rows.append(
            {
                **dict(zip(fields, values, strict=True)),
                # The errors first (what a phone shows beside the group), then how many runs.
                "expected median": e["median"],
                "expected p90": e["p90"],
                "expected bias": e["bias"],
                "ideal median": i["median"],
                "ideal bias": i["bias"],
                "runs": len(g),
                "below ideal": int(g["below_ideal"].sum()),
            }
        )
    table = pd.DataFrame(rows)
    if not table.empty:
        table[list(PERCENT)] = (table[list(PERCENT)] * 100).round(0)
    return table


def with_p90_text(table: pd.DataFrame) -> pd.DataFrame:
    """``group_table`` as the page shows it: the p90 as text, "–" under ``P90_MIN_RUNS`` runs (a
    table cell shows a missing number as "None")."""
    if table.empty:
        return table
    shown = [p90_shown(v / 100, n) for v, n in zip(table["expected p90"], table["runs"], strict=True)]
    return table.assign(**{"expected p90": shown})


def hovers(runs: Runs, words: str) -> list[str]:
    c = runs.columns
    return [
        f"<b>{model}</b> on {device}, {engine}, TP {tp}<br>{clients} clients, {isl} in / {osl} out"
        f"<br>{words}: measured {m:,.2f} ms, expected {e:,.2f} ms, ideal {i:,.2f} ms"
        f"<br>{run_id}" + ("<br><i>measured below the ideal bound of its simulated setup</i>" if below else "")
        for run_id, model, device, engine, tp, isl, osl, clients, m, e, i, below in zip(
            c["id"],
            c["model"],
            c["device"],
            c["engine"],
            c["tp"],
            c["isl"],
            c["osl"],
            c["concurrency"],
            c["measured_ms"],
            c["expected_ms"],
            c["ideal_ms"],
            c["below_ideal"],
            strict=True,
        )
    ]


# Shares, as whole percents (``group_table`` rounds them), a bias with its sign ("3,569%", "+2%").
PERCENT = ("expected median", "expected p90", "expected bias", "ideal median", "ideal bias")


def percent_format(column: str) -> str:
    return "%+,.0f%%" if column.endswith("bias") else "%,.0f%%"


def by_client(runs: Runs) -> list[tuple[str, int, dict[str, float]]]:
    """The expected figure's errors again for each client that ran the runs (simulated runs only:
    InferenceX's documented client, or none recorded), as (client, runs, errors)."""
    out = []
    for name in dict.fromkeys(c for c in runs["client"] if isinstance(c, str)):
        pick = runs["client"] == name
        out.append((name, int(pick.sum()), errors(runs["expected_ms"][pick], runs["measured_ms"][pick])))
    return out


def by_warmup(runs: Runs) -> list[tuple[str, int, dict[str, float]]]:
    """The expected figure's errors again for the runs whose client warmed the server up before
    measuring and for those whose client did not (InferenceX's, by its measured date:
    ``roofline.benchmark_clients.client_warmup``), as (which, runs, errors); runs with no
    client recorded are in neither."""
    out = []
    for words, wanted in (("warmed up first", True), ("no warm-up", False)):
        pick = np.array([isinstance(w, int) and (w > 0) == wanted for w in runs["client_warmup"]], bool)
        if pick.any():
            out.append((words, int(pick.sum()), errors(runs["expected_ms"][pick], runs["measured_ms"][pick])))
    return out


def _left_out(data: dict, part: str) -> dict[str, int]:
    return data[part].get("not_scored" if part == "load" else "skipped") or {}


def repeats_left_out(data: dict, part: str) -> int:
    """The report's rows of ``part`` that repeat a run another row holds (``roofline.sample_twins``)."""
    return _left_out(data, part).get(SAME_RUN_REASON, 0)


def batch_left_out(data: dict, part: str) -> int:
    """The report's rows of ``part`` left out because their batch is not their client's concurrency
    (``roofline.sample_clients``)."""
    reasons = _left_out(data, part)
    return reasons.get(ATTENTION_DP_REASON, 0) + reasons.get(SPREAD_REASON, 0)


def speculative_left_out(data: dict, part: str) -> tuple[int, int]:
    """The report's runs of ``part`` left out because their configuration decoded speculatively,
    and because it may have (``roofline.inferencex_runs.why_speculative``): (runs, maybe)."""
    reasons = _left_out(data, part)
    maybe = sum(n for why, n in reasons.items() if why.startswith(MAYBE_REASON))
    return sum(n for why, n in reasons.items() if why.startswith(SPECULATIVE_REASON)) - maybe, maybe


def host_floors(runs: Runs) -> list[tuple[str, float, int, int]]:
    """Per engine of ``runs``, the least TPOT its prediction can give, its host work per step (each
    step takes at least it, overlapped or not; fitted on one model on one device): (the engine's
    name, that floor in ms, the runs measured faster than it, the engine's runs)."""
    from roofline.engines import engine_profile

    out = []
    for engine in dict.fromkeys(runs["engine"]):
        profile = engine_profile(str(engine))
        if profile is None or not profile.host_step_us:
            continue
        floor_ms, pick = profile.host_step_us / 1e3, runs["engine"] == engine
        out.append((profile.name, floor_ms, int((runs["measured_ms"][pick] < floor_ms).sum()), int(pick.sum())))
    return out
