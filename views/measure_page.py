"""Measure page: this machine's achievable roofs, kernel sweeps and a calibration fitted on them, and
whole model steps measured op by op beside their predictions (or a results file from elsewhere)."""

from __future__ import annotations

import importlib.util

import plotly.graph_objects as go
import streamlit as st

from dashboard import custom
from dashboard.measure_ops import step_error_line, step_op_columns, step_op_rows
from dashboard.measure_view import (
    EXAMPLES,
    calibration_rows,
    ceiling_rows,
    device_caption,
    measured_dtype,
    step_bars_figure,
    step_series,
    sweep_roofs,
    sweep_series,
)
from dashboard.measured import RESULTS_KEY, SOURCE_KEY
from dashboard.share import Report, md_escape, share_panel
from dashboard.state import one_of, warn_bad_params
from roofline.format import fmt_seconds
from roofline.lazy import pandas as pd
from roofline.measure.chains import kernel_chain_line
from roofline.measure.readings import above_roof_line, fitted_above_roof_note, unresolved_note
from roofline.measure.schema import MAX_OPS, MAX_RESULTS_BYTES, Results, ResultsError, load_results, parse_results
from roofline.plots import REGIME_COLORS, roofline_figure, style_figure
from roofline.report import Metric
from roofline.settings import Settings

devices = custom.devices()
models = custom.models()
model_ids = list(models)
has_torch = importlib.util.find_spec("torch") is not None

report = Report()
st.title("Measure")
st.caption(
    "Measure this machine: achievable roofs (copy, read and in-cache bandwidth, large-GEMM peak per dtype in the "
    "layouts fast libraries use, the host's dispatch cost per eager op), kernel sweeps at a model's shapes timed "
    "on the device (CUDA-graph replay), a calibration fitted on the sweeps, and whole model steps measured op by "
    "op, eager and from a CUDA graph, beside what the model predicts. Or open a results file from another machine."
)

warn_bad_params({"mode": one_of(["quick", "full"]), "mdevice": one_of(["auto", "cpu"]), "mmodel": one_of(model_ids)})

custom.model_upload("mmodel")
run_col, upload_col = st.columns(2)
with run_col:
    st.subheader("Run here")
    if not has_torch:
        st.info(
            "PyTorch is not installed here, so nothing can be measured on this machine; open a results file "
            "instead. To measure: `pip install torch==2.13.0`."
        )
    else:
        import torch  # imported only on this page, only once torch is known to be installed

        gpu = torch.cuda.is_available()
        if not gpu:
            st.info("No CUDA device here: the suite measures this CPU, and the results are labelled as such.")
        mode = st.radio(
            "Mode",
            ["quick", "full"],
            horizontal=True,
            key="mode",
            bind="query-params",
            help="quick: seconds on a CPU, a minute on a GPU; full: more sizes and repeats.",
        )
        where = st.radio(
            "Device",
            ["auto", "cpu"],
            horizontal=True,
            key="mdevice",
            bind="query-params",
            help="auto: CUDA if present.",
        )
        default_model = "llama-3.1-8b" if gpu else "llama-3.2-1b"
        step_model = st.selectbox(
            "Model (sweep shapes and the measured steps)",
            model_ids,
            index=model_ids.index(default_model),
            key="mmodel",
            bind="query-params",
            help="A model too large for this device is measured a few layers at a time and scaled; the page says so.",
        )
        if st.button("Run the suite", type="primary"):
            from roofline.measure.suite import run_suite

            with st.status("Measuring…", expanded=True) as status:
                bar = st.progress(0.0)

                def progress(fraction: float, message: str) -> None:
                    bar.progress(min(1.0, fraction), text=message)

                try:
                    measured = run_suite(
                        device=None if where == "auto" else "cpu",
                        quick=mode == "quick",
                        model_id=models[step_model],
                        progress=progress,
                    )
                except (RuntimeError, ValueError) as exc:
                    status.update(label=f"Measurement failed: {exc}", state="error")
                else:
                    st.session_state[RESULTS_KEY] = measured
                    st.session_state[SOURCE_KEY] = "run"
                    status.update(label=f"Measured {measured.device.name}", state="complete", expanded=False)


def _on_upload_change() -> None:
    """Parse a new upload once; when the file is removed, forget the results it brought (only a
    user's change calls this: leaving the page and coming back keeps them)."""
    uploaded = st.session_state.get("upload")
    st.session_state.pop("upload_error", None)
    if uploaded is None:
        if st.session_state.get(SOURCE_KEY) == "upload":
            st.session_state.pop(RESULTS_KEY, None)
            st.session_state.pop(SOURCE_KEY, None)
        return
    try:
        st.session_state[RESULTS_KEY] = parse_results(uploaded.getvalue(), uploaded.name)
        st.session_state[SOURCE_KEY] = "upload"
    except ResultsError as exc:
        st.session_state["upload_error"] = str(exc)
        if st.session_state.get(SOURCE_KEY) == "upload":
            st.session_state.pop(RESULTS_KEY, None)


with upload_col:
    st.subheader("Or open a results file")
    st.file_uploader(
        f"Results file (JSON, up to {MAX_RESULTS_BYTES // 2**20} MB and {MAX_OPS:,} kernels and ops)",
        type=["json"],
        max_upload_size=MAX_RESULTS_BYTES // 2**20,
        key="upload",
        on_change=_on_upload_change,
        help="Written by `python -m roofline measure --out results.json` (or torchrun … collectives).",
    )
    if st.session_state.get("upload_error"):
        st.error(f"Cannot use this file: {md_escape(st.session_state['upload_error'])}")
    st.caption("Or open a shipped example, measured on an H100 SXM (80 GB HBM3) or an H200 SXM (torch 2.11, CUDA 13):")
    for key, (label, path) in EXAMPLES.items():
        if st.button(label, key=key, width="stretch"):
            st.session_state[RESULTS_KEY] = load_results(path)
            st.session_state[SOURCE_KEY] = "example"

results: Results | None = st.session_state.get(RESULTS_KEY)
if results is None:
    st.caption("Results live in this session only: the page's link does not carry them (download the JSON to share).")
    share_panel("Measure", report.sections, note="The link restores this page's settings; no results are open.")
    st.stop()

info = results.device
hw = devices.get(info.matched_hardware_id or "")
st.divider()
report.subheader(md_escape(info.name))
report.caption(device_caption(results, hw))
for note in results.notes:
    st.caption(md_escape(note))
st.download_button(
    "Download the results (JSON)",
    data=results.to_json,
    file_name="roofline_measure.json",
    mime="application/json",
    on_click="ignore",
)

datasheet = Settings().ceilings(hw, cuda_graphs=True) if hw else None
measured = results.ceilings_for_engine(launch_from_graphs=True) if results.ceilings else None

# ---- ceilings ----------------------------------------------------------------------------------
if results.ceilings:
    report.subheader("Achievable ceilings")
    rows = ceiling_rows(results.ceilings, datasheet)
    report.table(pd.DataFrame(rows), "Achievable ceilings", hide_index=True, width="stretch")
    if above := above_roof_line(results):
        report.caption(md_escape(above))
    if results.ceilings.eager_host_probe:
        report.caption(
            "Host probe: " + md_escape(results.ceilings.eager_host_probe) + ". An eager step's prediction is as "
            "good as the host's speed is steady: the spread of the probe's rounds is that speed's drift."
        )


# ---- calibration -------------------------------------------------------------------------------
cal = results.calibration
if cal is not None:
    report.subheader("Calibration: achievable roofs per op class, fitted on the kernel sweeps")
    report.caption(
        "time = latency + max(bytes / bandwidth, FLOPs / peak), with an occupancy term where a kernel's parallelism "
        "varies (decode attention: batch x KV heads). Fitted on the sweeps only; "
        + (
            "the model steps below are the held-out check. "
            if results.steps
            else "this file measured no whole model step to check it on. "
        )
        + "Linear layers are fitted by the rows they see (GEMV, up to 64, more)."
    )
    cal_table = pd.DataFrame(calibration_rows(results, datasheet))
    report.table(cal_table, "Calibration", hide_index=True, width="stretch", placeholder="—")
    for note in (unresolved_note(results), fitted_above_roof_note(results)):
        if note:
            report.caption(md_escape(note))
    report.caption(
        f"Use it on the other pages' device ({cal.hardware_id or 'no database match'}): "
        "`--calibration results.json` on the command line, or the sidebar's *Measured roofs* panel on the LLM "
        "inference, KV cache and Advisor pages (this session's results are offered there)."
    )

# ---- kernel sweeps on the roofline -------------------------------------------------------------
if results.sweeps:
    report.subheader("Kernel sweeps on the roofline")
    roofs, roof_names = sweep_roofs(results, datasheet, measured)
    series = sweep_series(results)
    if roofs:
        fig = roofline_figure(roofs, series, title="Measured kernels against the " + ", ".join(roof_names) + " roofs")
        report.chart(fig, "Kernel sweeps", width="stretch", theme=None, key="sweeps_roofline")

# ---- model steps -------------------------------------------------------------------------------
for i, step in enumerate(results.steps):
    report.subheader(
        f"{step.model} {step.phase}, batch {step.batch}, {step.seq_len:,} tokens "
        f"({step.layers_measured} of {step.layers_total} layers measured)"
    )
    report.metrics(
        Metric(
            "Eager step",
            fmt_seconds(step.eager.median_s),
            "measured",
            help="wall time, host and device together",
            delta_color="off",
        ),
        Metric(
            "From a CUDA graph",
            fmt_seconds(step.graph.median_s) if step.graph else "n/a",
            "measured" if step.graph else "",
            help=step.graph_note or "",
            delta_color="off",
        ),
        Metric(
            "Kernel time",
            fmt_seconds(step.kernel_time_s),
            "measured",
            help=f"{step.kernels} kernels a step, their durations summed and averaged over profiled runs (runs apart "
            "from the timed ones: it can read a little above a CUDA graph's wall time)",
            delta_color="off",
        ),
        Metric(
            "Overhead (eager − kernels)",
            fmt_seconds(step.overhead_s),
            "measured",
            help="the host's dispatching the device waits for: the overhead regime, measured",
            delta_color="off",
        ),
        Metric(
            "Attributed to ops",
            f"{step.attribution:.0%}",
            help="kernel time inside ranges named like the engine's ops, over the step's kernel time, both read from "
            "the same profiled runs. Over 100% means the profiler placed more kernel time under the ranges than it "
            "listed as the step's kernels; why, this suite has not established",
        ),
    )
    report.chart(step_bars_figure(step, f"step{i}"), "", width="stretch", theme=None, key=f"step_bars_{i}")
    op_rows = step_op_rows(step)
    report.markdown(step_error_line(step))
    report.table(
        pd.DataFrame(op_rows),
        f"{step.phase} ops",
        hide_index=True,
        width="stretch",
        column_config=step_op_columns(op_rows),
    )
    if chain_line := kernel_chain_line(step):
        report.caption(md_escape(chain_line))
    if measured is not None and op_rows:
        dtype = measured_dtype(measured, step.dtype)
        series = step_series(step, measured, dtype)
        # the datasheet's roof first, as on the sweeps' chart, so each roof keeps its colour
        step_roofs = ([(datasheet, dtype)] if datasheet and dtype in datasheet.peak_flops_per_s else []) + [
            (measured, dtype)
        ]
        report.chart(
            roofline_figure(
                step_roofs,
                series,
                title="The step's ops: measured (filled) and predicted (open)",
                height=500,
                shade_from=len(step_roofs) - 1,  # the measured roof's regions, which the points rest on
            ),
            "",
            width="stretch",
            theme=None,
            key=f"step_roofline_{i}",
        )

if results.collectives:
    coll = results.collectives
    report.subheader(f"All-reduce over {coll.world_size} ranks ({coll.backend})")
    fig = go.Figure(
        go.Scatter(
            x=[p.message_bytes for p in coll.points],
            y=[p.bus_bandwidth_gbps for p in coll.points],
            mode="lines+markers",
            line=dict(color=REGIME_COLORS["communication"], width=2.5),
            name="bus bandwidth",
            hovertemplate="%{x:,.0f} B<br>%{y:,.2f} GB/s<extra></extra>",
        )
    )
    fig.update_xaxes(type="log", title="message (bytes)", gridcolor="#E5E5E5")
    fig.update_yaxes(type="log", title="bus bandwidth (GB/s)", gridcolor="#E5E5E5")
    style_figure(fig, 380, "collectives")
    report.chart(fig, "All-reduce", width="stretch", theme=None, key="collectives_chart")
    report.caption(
        f"Choose it in the *Measured roofs* panel of the LLM inference or Advisor page to use "
        f"{coll.link_bandwidth_bytes_per_s / 1e9:,.1f} GB/s and {fmt_seconds(coll.latency_s)} as the "
        "communication ceiling."
    )

share_panel(
    "Measure",
    report.sections,
    note="The link restores this page's settings, not the results (they can be megabytes): download the results "
    "JSON above to share them, or the offline report, which holds every table and chart of this page.",
)
