"""Accuracy page: the predictions against public measured serving runs, the product's published error."""

from __future__ import annotations

import streamlit as st

from dashboard.accuracy_view import (
    GROUPING_WORDS,
    GROUPINGS,
    METRICS,
    PERCENT,
    RUNS,
    batch_left_out,
    by_client,
    by_warmup,
    devices_in,
    errors,
    group_table,
    host_floors,
    hovers,
    percent_format,
    repeats_left_out,
    report,
    runs_frame,
    speculative_left_out,
    with_p90_text,
)
from dashboard.share import Report, md_escape, share_panel
from dashboard.state import boolean, one_of, some_of, warn_bad_params
from roofline.accuracy import BELOW_IDEAL_WHY, P90_MIN_RUNS, p90_shown
from roofline.benchmark_clients import WARMUP_PER_CLIENT, WARMUP_SINCE
from roofline.engines import HOST_FIT_SPLIT
from roofline.format import dumps_strict
from roofline.plots.accuracy import ENGINE_NAMES, accuracy_figure
from roofline.report import Metric

ENGINES = list(ENGINE_NAMES)
page_report = Report()
st.title("Accuracy")
st.caption(
    "Every prediction scored against measured serving runs nobody on this project made: the aggregated runs of "
    "vLLM, SGLang and TensorRT-LLM in aiconfigurator's silicon sample (Apache-2.0) for the models and devices "
    "in the database. Each run is predicted twice: on the datasheet's roofs (the ideal bound) and on its "
    "engine's measured kernels with its host work per step (the expected figure). The host work was fitted on "
    "one declared split (Qwen3-32B on H100); the test set is every other run, and nothing else was fitted on them."
)
with st.expander("How each run is read"):
    st.markdown(
        "- **InferenceX's runs** in the setup its sources document: its client's lengths (uniform in 0.8–1× the "
        "nominal), the KV-cache format its script set that day, and the scheduler settings it gave the server "
        "(token budget, SGLang's intake interval, TensorRT-LLM's batch waiting, the CUDA graphs).\n"
        "- **Other sources** as recorded: fixed lengths, bf16 KV, the engines' defaults.\n"
        "- **Scheduling:** a request joins the first step its engine composes after it arrives; vLLM since 0.14, "
        "SGLang and TensorRT-LLM compose each step while the one before runs.\n"
        "- **CUDA graphs:** a step with prompt tokens past the limit its script set or its engine's default (vLLM's "
        "512 tokens; any in SGLang and TensorRT-LLM) has the host dispatch every kernel."
    )
warn_bad_params(
    {
        "metric": one_of(list(METRICS)),
        "runs": one_of(list(RUNS)),
        "engines": some_of(ENGINES),
        "within": boolean,
        "group": one_of(list(GROUPINGS)),
    }
)

try:
    data = report()
except ValueError as exc:
    st.error(f"No accuracy report: {exc}")
    st.stop()

DEVICES = devices_in(data)
warn_bad_params({"devices": some_of(DEVICES)})
c1, c2, c3, c4 = st.columns([2, 1, 2, 2])
metric = c1.selectbox("Metric", list(METRICS), key="metric", bind="query-params")
runs = c2.selectbox("Runs", RUNS, key="runs", bind="query-params", help="test set: the runs no figure was fitted on")
engines = c3.multiselect("Engines", ENGINES, default=ENGINES, key="engines", bind="query-params")
devices = c4.multiselect("Devices", DEVICES, key="devices", bind="query-params", placeholder="every device")
simulated = METRICS[metric][0] == "load"
within = st.toggle(
    "Leave out the runs measured below the ideal bound",
    False,
    key="within",
    bind="query-params",
    disabled=not simulated,
    help="A run measured faster than the ideal bound of its simulated setup most likely did something the sample "
    "does not record. Off: every run counts, as in the published headline. For the runs simulated under load.",
)
frame = runs_frame(data, metric, runs, engines, devices)
words = METRICS[metric][4]
below = int(frame["below_ideal"].sum())
if frame.empty:
    st.info("No runs match: choose at least one engine, or a device that engine ran on.")
    st.stop()
if within and simulated:
    frame = frame.where(~frame["below_ideal"])
    if frame.empty:
        st.info("Every run of this choice was measured below its ideal bound: turn the toggle off to see them.")
        st.stop()

expected, ideal = errors(frame["expected_ms"], frame["measured_ms"]), errors(frame["ideal_ms"], frame["measured_ms"])
page_report.metrics(
    Metric("Runs", f"{len(frame):,}", runs, delta_color="off"),
    Metric(
        "Median |error|, expected",
        f"{expected['median']:.0%}",
        f"ideal bound {ideal['median']:.0%}",
        help="|predicted / measured - 1|: engine-measured kernels and host work, against the datasheet alone",
        delta_color="off",
    ),
    Metric(
        "p90 |error|, expected",
        p90_shown(expected["p90"], len(frame)),
        f"ideal bound {p90_shown(ideal['p90'], len(frame))}",
        help=f"shown from {P90_MIN_RUNS} runs",
        delta_color="off",
    ),
    Metric(
        "Bias, expected",
        f"{expected['bias']:+.0%}".replace("-", "−"),  # a minus sign, not a hyphen
        f"ideal bound {ideal['bias']:+.0%}".replace("-", "−"),
        help="median of predicted / measured - 1: above 0 predicts slower than measured",
        delta_color="off",
    ),
)
page_report.chart(
    accuracy_figure(
        frame["measured_ms"],
        frame["expected_ms"],
        frame["engine"],
        hovers(frame, words),
        f"{metric}: expected against measured, {len(frame):,} runs ({runs})",
        words,
        frame["below_ideal"],
    ),
    width="stretch",
    theme=None,
    key="accuracy_chart",
)
page_report.caption(
    "Points above the line are predicted slower than measured. The ideal bound (the datasheet alone) sits below "
    f"the line for almost every run: it is a bound, not a prediction. Report of {md_escape(data['generated'])} "
    f"(commit {md_escape(data['commit'])}); regenerate it with `{data['command']}`."
)
floors = host_floors(frame) if words == "TPOT" else []
if any(below for _, _, below, _ in floors):
    page_report.caption(
        "No predicted TPOT is shorter than its engine's host work a step, fitted on one model on one device "
        f"({md_escape(HOST_FIT_SPLIT[0])} on {md_escape(HOST_FIT_SPLIT[1].replace('_', ' ').upper())}): "
        + "; ".join(
            f"{name} {floor:.1f} ms ({below:,} of its {n:,} runs here measured faster)"
            for name, floor, below, n in floors
        )
        + ". Where a faster run sits, its prediction flattens at the floor (a horizontal band): what one model on "
        "one GPU shows of an engine's host work is not all of it."
    )
# The runs' provenance below the chart, folded: the chart and its reading stay in view on a phone.
with st.expander("Which runs are scored, and the error by client and warm-up"):
    clients = by_client(frame) if simulated else []
    if len(clients) > 1:
        page_report.caption(
            "By the client that sent the requests, expected: "
            + "; ".join(
                f"{md_escape(name)}, {n:,} runs, median {e['median']:.0%}, p90 {p90_shown(e['p90'], n)}, bias "
                + f"{e['bias']:+.0%}".replace("-", "−")
                for name, n, e in clients
            )
            + ". Where no client is recorded, every client is simulated starting at once with fixed lengths, and they "
            "stay in step: a guess about the harness, not a fact about the engine."
        )
    warmups = by_warmup(frame) if simulated else []
    if len(warmups) > 1:
        page_report.caption(
            "InferenceX's runs by whether its client warmed the server up before measuring "
            f"({WARMUP_PER_CLIENT} requests per client from {WARMUP_SINCE}, none before), expected: "
            + "; ".join(
                f"{words}, {n:,} runs, median {e['median']:.0%}, bias " + f"{e['bias']:+.0%}".replace("-", "−")
                for words, n, e in warmups
            )
            + ". The simulation has no one-time costs (a kernel compiled or tuned for the first batch of its shape), "
            "so it predicts both alike; they differ in models and engines too."
        )
    speculative, maybe = speculative_left_out(data, METRICS[metric][0])
    if speculative or maybe:
        page_report.caption(
            f"Not scored: {speculative:,} runs that InferenceX's configurations decoded speculatively (MTP: a draft "
            "head proposes tokens the model verifies in one step; the simulation decodes one token a step, and the "
            f"sample records neither the setting nor an acceptance rate), and {maybe:,} that may have (a plain and an "
            "MTP configuration ran the same shape that day, or a multi-node run, which InferenceX swept with MTP on "
            "and off; the row does not say). "
            "`python -m roofline validate --explain RUN_ID` names the configurations."
        )
    if repeats := repeats_left_out(data, METRICS[metric][0]):
        page_report.caption(
            f"Each run counts once: {repeats:,} rows of the sample repeat a run another row holds, scored here or not "
            "(InferenceX's results come in three exports, the same setup and day with the same TTFT and TPOT to 12 "
            "significant digits; two gap analyses copy some of its runs with both figures rounded to 0.01 ms)."
        )
    if batch := batch_left_out(data, METRICS[metric][0]):
        page_report.caption(
            f"Across the whole report, {batch:,} rows are not scored because their batch is not the concurrency their "
            "source records for the client: most record a batch of the client's concurrency over their TP, as the rows "
            "that record attention data parallelism write the sequences one attention rank held, a setup the "
            "simulation does not run."
        )
if below and simulated:
    page_report.caption(
        f"{below:,} of these runs were {BELOW_IDEAL_WHY}."
        + (" They are left out above." if within else " They are drawn hollow and counted in every figure above.")
    )
page_report.subheader("Errors by group")
grouping = st.columns([1, 2])[0].selectbox(
    "One row per",
    list(GROUPINGS),
    format_func=GROUPING_WORDS.get,
    key="group",
    bind="query-params",
    help="the runs chosen above, grouped by model, device and engine, by engine or by device",
)
page_report.table(
    with_p90_text(group_table(frame, grouping)),
    hide_index=True,
    width="stretch",
    column_config={c: st.column_config.NumberColumn(format=percent_format(c)) for c in PERCENT}
    | {"expected p90": st.column_config.TextColumn(help=f"shown from {P90_MIN_RUNS} runs", alignment="right")},
)
d1, d2 = st.columns(2)
d1.download_button(
    "Download these runs (CSV)",
    data=lambda: frame.to_frame().to_csv(index=False),
    file_name="roofline_accuracy.csv",
    mime="text/csv",
    on_click="ignore",
)
d2.download_button(
    "Download the report (JSON)",
    data=lambda: dumps_strict(data),
    file_name="roofline_accuracy.json",
    mime="application/json",
    on_click="ignore",
)
share_panel("Accuracy", page_report.sections)
