"""Measure page: this machine's achievable roofs, kernel sweeps and a calibration fitted on them, and
whole model steps measured op by op beside their predictions (or a results file from elsewhere)."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import custom
from dashboard.measured import RESULTS_KEY, SOURCE_KEY
from dashboard.share import Report, md_escape, share_panel
from dashboard.state import one_of, warn_bad_params
from roofline.calibration import CLASSES, linear_bucket
from roofline.dtypes import peak_unit
from roofline.engine import Ceilings
from roofline.format import fmt_seconds
from roofline.measure.schema import MAX_OPS, MAX_RESULTS_BYTES, Results, ResultsError, load_results, parse_results
from roofline.plots import DEVICE_COLORS, REGIME_COLORS, PointSeries, point_hover, roofline_figure, style_figure
from roofline.report import Metric
from roofline.settings import Settings

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "h100-sxm-kernel-sweeps.json"
CLASS_COLORS = dict(
    zip(
        CLASSES,
        ["#1F77B4", "#17BECF", "#D62728", "#2CA02C", "#98DF8A", "#9467BD", "#8C564B", "#E377C2"],
        strict=True,
    )
)
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
    if st.button("Open the example: kernel sweeps measured on an H100", key="example"):
        st.session_state[RESULTS_KEY] = load_results(EXAMPLE)
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
report.caption(
    f"{info.kind.upper()} · torch {md_escape(info.torch_version)}"
    + (f" · CUDA {md_escape(info.cuda_version)}" if info.cuda_version else "")
    + (f" · driver {md_escape(info.driver)}" if info.driver else "")
    + f" · {md_escape(info.date)} · {results.mode} run"
    + (
        f" · datasheet: {md_escape(hw.name)}"
        if hw
        else " · no datasheet device matches, so only measured roofs are drawn"
    )
)
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
    c = results.ceilings
    report.subheader("Achievable ceilings")

    def share(value: float, sheet: float | None) -> str:
        return f"{value / sheet:.0%}" if sheet else "n/a"

    sheet_bw = datasheet.memory_bandwidth_bytes_per_s if datasheet else None
    rows = [
        (
            "memory bandwidth, copy (read + write)",
            f"{c.memory_bandwidth_tbps * 1e3:,.1f} GB/s",
            sheet_bw,
            c.memory_bandwidth_tbps * 1e12,
        ),
        (
            "memory bandwidth, read-only",
            f"{c.read_bandwidth_tbps * 1e3:,.1f} GB/s",
            sheet_bw,
            (c.read_bandwidth_tbps or 0) * 1e12,
        ),
    ]
    table_rows = [
        {
            "ceiling": name,
            "measured": text,
            "datasheet": f"{sheet / 1e9:,.0f} GB/s" if sheet else "none published",
            "% of datasheet": share(value, sheet),
        }
        for name, text, sheet, value in rows
    ]
    if c.cache_bandwidth_tbps:
        table_rows.append(
            {
                "ceiling": "cache bandwidth (a working set that fits in L2)",
                "measured": f"{c.cache_bandwidth_tbps * 1e3:,.1f} GB/s",
                "datasheet": "none published",
                "% of datasheet": "",
            }
        )
    for dtype, value in c.peak_tflops.items():
        sheet = datasheet.peak_flops_per_s.get(dtype) if datasheet else None
        table_rows.append(
            {
                "ceiling": f"peak {dtype} ({c.peak_layouts.get(dtype, 'GEMM')})",
                "measured": f"{value:,.2f} {peak_unit(dtype)}",
                "datasheet": f"{sheet / 1e12:,.1f} {peak_unit(dtype)}" if sheet else "none published",
                "% of datasheet": share(value * 1e12, sheet),
            }
        )
    for kind, seconds in c.host_dispatch_s.items():
        table_rows.append(
            {
                "ceiling": f"host dispatch, one eager {kind} op",
                "measured": fmt_seconds(seconds),
                "datasheet": "none published",
                "% of datasheet": "",
            }
        )
    if c.graph_launch_overhead_s is not None:
        table_rows.append(
            {
                "ceiling": "one tiny kernel replayed from a CUDA graph",
                "measured": fmt_seconds(c.graph_launch_overhead_s),
                "datasheet": "none published",
                "% of datasheet": "",
            }
        )
    report.table(pd.DataFrame(table_rows), "Achievable ceilings", hide_index=True, width="stretch")


def measured_op_hover(op, roofs: Ceilings, dtype: str, predicted_on: str) -> str:
    """A measured op's hover: its place against the measured roofs and its prediction."""
    intensity = max(op.flops, 1.0) / op.bytes
    roof = float(roofs.attainable_flops_per_s(intensity, dtype))
    return point_hover(
        f"{op.name} (measured)",
        max(op.flops, 1.0),
        op.bytes,
        op.time_s,
        "compute" if intensity >= roofs.ridge_intensity(dtype) else "memory",
        roof,
        [
            f"{max(op.flops, 1.0) / op.time_s / roof:.0%} of the measured roof",
            f"predicted ({predicted_on}) {fmt_seconds(op.predicted_s.get(predicted_on, 0.0))}",
        ],
    )


def percent(share: float) -> str:
    return f"{share:.0%}" if share >= 0.01 else "<1%"


# ---- calibration -------------------------------------------------------------------------------
cal = results.calibration
if cal is not None:
    report.subheader("Calibration: achievable roofs per op class, fitted on the kernel sweeps")
    report.caption(
        "time = latency + max(bytes / bandwidth, FLOPs / peak), with an occupancy term where a kernel's parallelism "
        "varies (decode attention: batch x KV heads). Fitted on the sweeps only; the model steps below are the "
        "held-out check. Linear layers are fitted by the rows they see (GEMV, up to 64, more)."
    )
    sheet_bw = datasheet.memory_bandwidth_bytes_per_s if datasheet else None
    sheet_peak = datasheet.peak_flops_per_s.get("bf16") if datasheet else None
    cal_table = pd.DataFrame(
        [
            {
                "class": f.op_class,
                "latency": fmt_seconds(f.latency_s),
                "bandwidth GB/s": float(f"{f.bandwidth_bytes_per_s / 1e9:.4g}") if f.bandwidth_bytes_per_s else None,
                "% of datasheet bandwidth": percent(f.bandwidth_bytes_per_s / sheet_bw)
                if f.bandwidth_bytes_per_s and sheet_bw
                else "",
                "TFLOP/s": float(f"{f.flops_per_s / 1e12:.4g}") if f.flops_per_s else None,
                "% of datasheet bf16": percent(f.flops_per_s / sheet_peak) if f.flops_per_s and sheet_peak else "",
                "occupancy half (parallelism)": round(f.parallel_half, 2) if f.parallel_half else None,
                "sweep points": f.points,
                "median error": f"{f.median_abs_error:.1%}",
                "worst error": f"{f.max_abs_error:.1%}",
            }
            for f in cal.fits.values()
        ]
    )
    report.table(cal_table, "Calibration", hide_index=True, width="stretch", placeholder="—")
    report.caption(
        f"Use it on the other pages' device ({cal.hardware_id or 'no database match'}): "
        "`--calibration results.json` on the command line, or the sidebar's *Measured roofs* panel on the LLM "
        "inference, KV cache and Advisor pages (this session's results are offered there)."
    )

# ---- kernel sweeps on the roofline -------------------------------------------------------------
if results.sweeps:
    report.subheader("Kernel sweeps on the roofline")
    roofs: list[tuple[Ceilings, str]] = []
    if datasheet and "bf16" in datasheet.peak_flops_per_s:
        roofs.append((datasheet, "bf16"))
    if measured is not None:
        dtype = next(iter(measured.peak_flops_per_s), None)
        if dtype:
            roofs.append((measured, dtype))
            if results.ceilings.cache_bandwidth_tbps:
                l2 = replace(
                    measured,
                    name=f"{measured.name} · in cache (L2)",
                    source="measured",
                    memory_bandwidth_bytes_per_s=results.ceilings.cache_bandwidth_tbps * 1e12,
                )
                roofs.append((l2, dtype))
    roof_names = [n for n, on in (("datasheet", datasheet), ("measured", measured)) if on is not None]
    if len(roofs) > len(roof_names):
        roof_names.append("in-cache")
    series = []

    def class_of(point) -> str:
        return linear_bucket(point.shape.get("m", 1)) if point.op_class == "linear" else point.op_class

    for op_class in CLASS_COLORS:
        pts = [p for p in results.sweeps if class_of(p) == op_class]
        if not pts:
            continue
        hover = [
            f"<b>{p.name}</b> {p.shape}<br>{fmt_seconds(p.time_s)}<br>{p.flops / p.time_s / 1e12:,.2f} TFLOP/s · "
            f"{p.bytes / p.time_s / 1e9:,.1f} GB/s<br>intensity {p.flops / p.bytes:,.2f} FLOP/B"
            for p in pts
        ]
        series.append(
            PointSeries(
                op_class.replace("_", " "),
                np.array([max(p.flops, 1.0) / p.bytes for p in pts]),
                np.array([max(p.flops, 1.0) / p.time_s for p in pts]),
                ["memory"] * len(pts),
                hover,
                sizes=9.0,
                outline_color="#FFFFFF",
                color=CLASS_COLORS[op_class],
            )
        )
    if roofs:
        fig = roofline_figure(roofs, series, title="Measured kernels against the " + ", ".join(roof_names) + " roofs")
        report.chart(fig, "Kernel sweeps", width="stretch", theme=None, key="sweeps_roofline")

# ---- model steps -------------------------------------------------------------------------------
for i, step in enumerate(results.steps):
    report.subheader(
        f"{step.model} {step.phase}, batch {step.batch}, {step.seq_len} tokens "
        f"({step.layers_measured} of {step.layers_total} layers measured)"
    )
    report.metrics(
        Metric("Eager step", fmt_seconds(step.eager.median_s), help="wall time, host and device together"),
        Metric(
            "From a CUDA graph",
            fmt_seconds(step.graph.median_s) if step.graph else "n/a",
            help=step.graph_note or "",
        ),
        Metric("Kernel time", fmt_seconds(step.kernel_time_s), help=f"{step.kernels} kernels"),
        Metric(
            "Overhead (eager − kernels)",
            fmt_seconds(step.overhead_s),
            help="the host's dispatching the device waits for: the overhead regime, measured",
        ),
        Metric(
            "Attributed to ops", f"{step.attribution:.0%}", help="kernel time inside ranges named like the engine's ops"
        ),
    )
    # Measured wall time beside the device's kernel time (the gap is the host: the overhead regime)
    # and the predictions; the CUDA-graph column only where the step was captured.
    columns = ["eager", "CUDA graph"] if step.graph else ["eager"]
    compare = {
        "measured": [step.eager.median_s, step.graph.median_s if step.graph else None],
        "measured kernel time": [step.kernel_time_s, None],
        **{
            f"predicted · {roofs}": [step.predicted_s.get(roofs), step.predicted_s.get(f"{roofs}, graph")]
            for roofs in ("datasheet", "measured", "calibrated")
            if roofs in step.predicted_s
        },
    }
    fig = go.Figure()
    for j, (name, values) in enumerate(compare.items()):
        fig.add_trace(
            go.Bar(
                x=columns,
                y=[v * 1e3 if v else None for v in values[: len(columns)]],
                name=name,
                marker_color=DEVICE_COLORS[j % len(DEVICE_COLORS)],
                hovertemplate=f"{name}<br>%{{x}}: %{{y:,.3f}} ms<extra></extra>",
            )
        )
    fig.update_yaxes(title="ms per step", gridcolor="#E5E5E5")
    title = (
        "Eager vs CUDA graph, measured and predicted"
        if step.graph
        else f"Eager step, measured and predicted ({step.graph_note or 'no CUDA graph'})"
    )
    style_figure(fig, 340, f"step{i}", title, barmode="group")
    report.chart(fig, "", width="stretch", theme=None, key=f"step_bars_{i}")
    roofs_name = "calibrated" if any("calibrated" in op.predicted_s for op in step.ops) else "measured"
    op_rows = []
    for op in step.ops:
        predicted = op.predicted_s.get(roofs_name)
        op_rows.append(
            {
                "op": op.name,
                "class": op.op_class,
                "measured (µs)": op.time_s * 1e6,
                **{
                    f"predicted {r} (µs)": op.predicted_s[r] * 1e6
                    for r in ("datasheet", "measured", "calibrated")
                    if r in op.predicted_s
                },
                f"measured / predicted ({roofs_name})": op.time_s / predicted if predicted else None,
                "GB/s": op.bytes / op.time_s / 1e9 if op.time_s else None,
                "TFLOP/s": op.flops / op.time_s / 1e12 if op.time_s else None,
            }
        )
    errors = {r: step.op_error(r) for r in ("datasheet", "measured", "calibrated") if step.op_error(r) is not None}
    report.markdown(
        " · ".join(
            f"on {r} roofs: step {step.step_ratio(r):.2f}x measured, per-op median error {e:.0%}"
            for r, e in errors.items()
        )
    )
    report.table(
        pd.DataFrame(op_rows),
        f"{step.phase} ops",
        hide_index=True,
        width="stretch",
        column_config={
            col: st.column_config.NumberColumn(format="%,.2f") for col in op_rows[0] if col not in ("op", "class")
        }
        if op_rows
        else None,
    )
    if measured is not None and op_rows:
        dtype = next(iter(measured.peak_flops_per_s))
        points = [op for op in step.ops if op.time_s > 0 and op.bytes > 0]
        hover = [measured_op_hover(op, measured, dtype, roofs_name) for op in points]
        series = [
            PointSeries(
                "measured ops",
                np.array([max(o.flops, 1.0) / o.bytes for o in points]),
                np.array([max(o.flops, 1.0) / o.time_s for o in points]),
                ["memory"] * len(points),
                hover,
                sizes=12.0,
                color="#222222",
            ),
            PointSeries(
                f"predicted ({roofs_name})",
                np.array([max(o.flops, 1.0) / o.bytes for o in points]),
                np.array([max(o.flops, 1.0) / o.predicted_s.get(roofs_name, o.time_s) for o in points]),
                ["compute"] * len(points),
                [
                    f"<b>{o.name}</b> predicted ({roofs_name})<br>{fmt_seconds(o.predicted_s.get(roofs_name, 0.0))}"
                    for o in points
                ],
                sizes=11.0,
                symbol="circle-open",
                color="#D62728",
            ),
        ]
        step_roofs = [(measured, dtype)] + (
            [(datasheet, dtype)] if datasheet and dtype in datasheet.peak_flops_per_s else []
        )
        report.chart(
            roofline_figure(
                step_roofs, series, title="The step's ops: measured (filled) and predicted (open)", height=500
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
