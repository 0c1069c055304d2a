"""Roofline page: ceilings of one or more devices, a GEMM and its M sweep on top."""

from __future__ import annotations

import json

import numpy as np
import streamlit as st

from dashboard import custom
from dashboard.llm_view import does_not_fit, fit_to_context, llm_step_caption
from dashboard.precision_pickers import precision_params, precision_pickers
from dashboard.share import Report, md_escape, share_panel
from dashboard.state import (
    ATTENTION_DP_HELP,
    attention_dp_param,
    attention_dp_picker,
    boolean,
    device_picker,
    devices_param,
    engine_notes,
    engine_param,
    engine_picker,
    float_in,
    int_in,
    moe_params,
    moe_pickers,
    one_of,
    some_of,
    warn_bad_params,
)
from dashboard.teach import teach_the_roofline
from roofline.api import matmul_result
from roofline.defaults import DEFAULT_GRAPH_LAUNCH_OVERHEAD_S, TP_CHOICES
from roofline.dtypes import COMPUTE_DTYPES
from roofline.engine import REGIME_LABELS, evaluate
from roofline.format import fmt_bytes, fmt_flops, fmt_seconds
from roofline.lazy import pandas as pd
from roofline.matmul import log_sweep_values, matmul_sweep
from roofline.memory import footprint
from roofline.ops import step_ops
from roofline.plots import DEVICE_COLORS, PointSeries, op_table_series, point_hover, roofline_figure
from roofline.report import Metric
from roofline.settings import Settings
from roofline.workload import Workload

MAX_DIM = 1 << 20
devices = custom.devices()
device_ids = list(devices)
models = custom.models()
LLM_CHOICES = ["none", *models]

report = Report()
st.title("Roofline")
st.caption(
    "Where a kernel sits against a device's roofs: left of the ridge it waits on memory, right of it on math. "
    "Points are placed at the performance the model predicts (FLOPs / time), so a latency-bound kernel "
    "sits below the roof."
)

warn_bad_params(
    {
        "hw": devices_param(device_ids),
        "dtypes": some_of(COMPUTE_DTYPES),
        "gemm_dtype": one_of(COMPUTE_DTYPES),
        "m": int_in(1, MAX_DIM),
        "n": int_in(1, MAX_DIM),
        "k": int_in(1, MAX_DIM),
        "sweep": boolean,
        "launch_us": float_in(0.0, 1000.0),
        "llm": one_of(LLM_CHOICES),
        "llm_phase": one_of(["prefill", "decode"]),
        "llm_batch": int_in(1, 65536),
        "llm_seq": int_in(1, MAX_DIM),
        **precision_params(),
        "tp": one_of([str(t) for t in TP_CHOICES]),
        "adp": attention_dp_param(),
        **moe_params(),
        "engine": engine_param(),
        "lesson": boolean,
    }
)

with st.sidebar:
    st.header("Devices")
    selected = device_picker(
        device_ids, ["h100-sxm"], "Each device draws its own roofs. The first one's regions are shaded."
    )
    roof_dtypes = st.multiselect(
        "Roof dtypes",
        COMPUTE_DTYPES,
        default=["bf16"],
        key="dtypes",
        bind="query-params",
        help="One compute roof per dtype the device has.",
    )
    engine = engine_picker()
    st.header("GEMM  C[M,N] = A[M,K] · B[K,N]")
    gemm_dtype = st.selectbox(
        "GEMM dtype", COMPUTE_DTYPES, index=COMPUTE_DTYPES.index("bf16"), key="gemm_dtype", bind="query-params"
    )
    c1, c2, c3 = st.columns(3)
    m = c1.number_input("M", min_value=1, max_value=MAX_DIM, value=4096, step=1, key="m", bind="query-params")
    n = c2.number_input("N", min_value=1, max_value=MAX_DIM, value=4096, step=1, key="n", bind="query-params")
    k = c3.number_input("K", min_value=1, max_value=MAX_DIM, value=4096, step=1, key="k", bind="query-params")
    sweep = st.checkbox(
        "Sweep M from 1 to 16384 (the decode-to-prefill trajectory)", value=True, key="sweep", bind="query-params"
    )
    launch_us = st.number_input(
        "Kernel latency floor (µs)",
        min_value=0.0,
        max_value=1000.0,
        value=DEFAULT_GRAPH_LAUNCH_OVERHEAD_S * 1e6,
        step=0.1,
        key="launch_us",
        bind="query-params",
        help="The least device time of one kernel (1.2 µs measured for tiny kernels replayed from a CUDA graph "
        "on an H100). A kernel is placed at its device time; dispatching it from the host is a fact of a whole "
        "step, shown on the LLM inference page.",
    )

    st.header("LLM step (optional)")
    llm_id = st.selectbox(
        "Model",
        LLM_CHOICES,
        key="llm",
        bind="query-params",
        help="Place every op of one prefill or decode step on the first device's roofs.",
    )
    llm_phase = st.radio("Phase", ["prefill", "decode"], horizontal=True, key="llm_phase", bind="query-params")
    c1, c2 = st.columns(2)
    llm_batch = c1.number_input("Batch", 1, 65536, 1, key="llm_batch", bind="query-params")
    llm_seq = c2.number_input(
        "Prompt / context",
        1,
        MAX_DIM,
        1024,
        key="llm_seq",
        bind="query-params",
        help="Prompt length for prefill; tokens already cached for decode.",
    )
    if llm_id != "none":  # the step's setup, as the LLM inference page takes it
        llm_precision = precision_pickers()
        llm_tp = int(st.selectbox("Tensor parallel degree", TP_CHOICES, key="tp", bind="query-params"))
        llm_ranks = attention_dp_picker(help=ATTENTION_DP_HELP + " Batch is then one rank's sequences.")
        llm_moe = moe_pickers()

custom.model_upload("llm")

if not selected:
    st.info("Pick at least one device in the sidebar.")
    st.stop()

# A kernel on the roofline is its device time: the floor is the least time one kernel takes.
settings = Settings(
    launch_overhead_s=0.0,
    graph_launch_overhead_s=launch_us * 1e-6,
    engine=engine,
    **(llm_moe if llm_id != "none" else {}),
)
ceilings_by_id = {hid: settings.ceilings(devices[hid], serving=False) for hid in selected}
if engine != "ideal":
    st.caption(engine_notes(engine, devices, selected, **(llm_moe if llm_id != "none" else {})))
# The GEMM's own roof always, beside the roof dtypes picked: its point sits under that roof.
drawn = list(dict.fromkeys([*roof_dtypes, gemm_dtype]))
roofs = [(ceilings_by_id[hid], d) for hid in selected for d in drawn if d in devices[hid].peak_tflops.as_dict()]
missing = [
    f"{md_escape(devices[hid].name)} has no {d}"
    for hid in selected
    for d in roof_dtypes
    if d not in devices[hid].peak_tflops.as_dict() and d != gemm_dtype  # the GEMM's own: its warning below says it
]
if missing:
    st.info("Not drawn (the datasheet gives no figure): " + "; ".join(missing) + ".")

sweeps: list[PointSeries] = []
stars: list[PointSeries] = []
results = []
for i, hid in enumerate(selected):
    c = ceilings_by_id[hid]
    color = DEVICE_COLORS[i % len(DEVICE_COLORS)]
    if gemm_dtype not in c.peak_flops_per_s:
        has = ", ".join(c.peak_flops_per_s)
        st.warning(
            f"{md_escape(c.name)} has no {gemm_dtype} peak; neither its {gemm_dtype} roof nor its GEMM point is drawn. "
            + (f"It has: {has}." if has else "Its datasheet gives no compute peak at all (memory bandwidth only).")
        )
        continue
    if sweep:
        # The sweep leaves out the points that would sit under the GEMM's star, so the star's hover is its own.
        ms = np.array([v for v in log_sweep_values(1, 16384, 48) if abs(np.log2(v / int(m))) > 0.15])
        sw = matmul_sweep(ms, int(n), int(k), gemm_dtype, c)
        attainable = c.attainable_flops_per_s(sw.intensity, gemm_dtype)
        hover = [
            point_hover(f"M={int(mv)} (sweep) on {c.name}", f, b, t, r, a, [f"N={n}, K={k}, {gemm_dtype}"])
            for mv, f, b, t, r, a in zip(sw.m, sw.flops, sw.bytes, sw.time_s, sw.bounds, attainable)
        ]
        sweeps.append(
            PointSeries(
                f"M sweep · {c.name}",
                sw.intensity,
                sw.achieved_flops_per_s,
                sw.bounds,
                hover,
                sizes=6.0,
                line_color=color,
                outline_color=color,
            )
        )
    r = matmul_result(c, int(m), int(n), int(k), gemm_dtype)
    results.append(r)
    hover = point_hover(
        f"GEMM {m}×{n}×{k} {gemm_dtype} on {c.name}",
        r["flops"],
        r["bytes"],
        r["time_s"],
        r["bound"],
        r["attainable_tflops"] * 1e12,
    )
    stars.append(
        PointSeries(
            f"GEMM {m}×{n}×{k} · {c.name}",
            np.array([r["intensity"] or np.inf]),
            np.array([r["expected_tflops"] * 1e12]),
            [r["bound"]],
            [hover],
            sizes=17.0,
            symbol="star",
            outline_color=color,
        )
    )
if len(stars) > 1:  # one legend entry for all sweeps and one for all stars: the colour says the device
    for group, label in ((sweeps, "M sweep"), (stars, f"GEMM {m}×{n}×{k}")):
        for j, ps in enumerate(group):
            ps.show_legend = j == 0
            ps.name = f"{label} (in each device's colour)" if j == 0 else ps.name
series: list[PointSeries] = sweeps + stars  # stars drawn last: on top, and first for the hover

llm_drawn = False
if llm_id != "none":
    hw0 = devices[selected[0]]
    llm_seq, _, cut = fit_to_context(models[llm_id], int(llm_seq), 1, llm_phase)  # as the LLM page cuts it
    if cut:
        st.info(cut)
    try:
        llm_w, _ = Workload(
            models[llm_id],
            llm_phase,
            int(llm_batch),
            int(llm_seq),
            precision=llm_precision,
            tp=llm_tp,
            attention_dp=llm_ranks,
        ).on(hw0)
        llm_table = evaluate(step_ops(llm_w), settings.ceilings(hw0, llm_w.tp, serving=False))
    except ValueError as exc:
        st.warning(f"LLM step not drawn: {md_escape(str(exc))}")
    else:
        series.append(op_table_series(llm_table, f"{llm_id} {llm_phase}", "diamond", llm_table.total_time_s))
        llm_drawn = True
        st.caption(llm_step_caption(models[llm_id].name, llm_w, hw0.name, llm_table.total_time_s))
        if llm_w.precision.act_dtype not in roof_dtypes:
            st.caption(
                f"Its linear layers compute in {llm_w.precision.act_dtype}: add it to Roof dtypes for their roof."
            )
        mem = footprint(llm_w, hw0, Settings()).to_json()
        if not mem["fits"]:
            st.warning(does_not_fit(models[llm_id].name, llm_w.tp, hw0, mem))

fig = roofline_figure(
    roofs,
    series,
    title=f"GEMM {m}×{n}×{k} ({gemm_dtype})"
    + (f" and a {llm_id} {llm_phase} step" if llm_drawn else "")
    + " on the roofs of "
    + ", ".join(devices[h].name for h in selected[:3])
    + (f" and {len(selected) - 3} more" if len(selected) > 3 else ""),
)
report.chart(fig, width="stretch", theme=None, key="roofline_chart")

if results:
    first = results[0]
    report.subheader(f"GEMM {m} × {n} × {k} ({gemm_dtype})")
    report.metrics(
        Metric("FLOPs", fmt_flops(first["flops"]), help="2·M·N·K"),
        Metric("Bytes (ideal)", fmt_bytes(first["bytes"]), help="A, B read once and C written once"),
        Metric(
            "Intensity (FLOP/B)",
            f"{first['intensity']:,.0f}" if first["intensity"] >= 100 else f"{first['intensity']:.3g}",
            help="FLOPs ÷ bytes",
        ),
        Metric("Bound by", first["bound"], help=f"{REGIME_LABELS[first['bound']]} on {first['hardware_name']}"),
        Metric(
            "Time",
            fmt_seconds(first["time_s"]),
            f"ideal bound {fmt_seconds(first['ideal_time_s'])}" if first["ceilings"] != "datasheet" else "",
            help=f"on {first['hardware_name']}: {first['rests_on']}",
            delta_color="off",
        ),
    )
    report.markdown(
        f"On **{first['hardware_name']}** this GEMM is **{REGIME_LABELS[first['bound']]}**: its ideal bound is "
        f"{fmt_seconds(first['ideal_time_s'])} (compute {fmt_seconds(first['compute_s'])}, "
        f"memory {fmt_seconds(first['memory_s'])}, kernel floor {fmt_seconds(first['overhead_s'])}); "
        f"the ridge is at {first['ridge_intensity']:,.0f} FLOP/B."
        + (
            f" Measured inside the engine ({md_escape(first['rests_on'])}) it takes {fmt_seconds(first['time_s'])}, "
            f"{first['ideal_time_s'] / first['time_s']:.0%} of its roof."
            if first["ceilings"] != "datasheet"
            else ""
        )
    )
    teach_the_roofline(first, ceilings_by_id[first["hardware"]])
    frame = pd.DataFrame(
        [
            {
                "device": r["hardware_name"],
                "time": fmt_seconds(r["time_s"]),
                "ideal bound": fmt_seconds(r["ideal_time_s"]),
                "time_s": r["time_s"],
                "regime": r["bound_label"],
                # The ideal bound's three terms beside it, in view at 1440 px: the largest names the regime.
                "compute time": fmt_seconds(r["compute_s"]),
                "memory time": fmt_seconds(r["memory_s"]),
                "kernel floor": fmt_seconds(r["overhead_s"]),
                "expected TFLOP/s": r["expected_tflops"],
                "attainable (ideal bound) TFLOP/s": r["ideal_bound_tflops"],
                "roof at this intensity TFLOP/s": r["attainable_tflops"],
                "peak TFLOP/s": r["peak_tflops"],
                "ridge FLOP/B": r["ridge_intensity"],
                "rests on": r["rests_on"],  # last: a long source would push the results off a narrow table
            }
            for r in results
        ]
    )
    report.table(
        # The peak and the ridge are the device's (the text above and the chart's roofs say them; the
        # CSV keeps them): on the page they had pushed the rates past the table's right edge at 1440 px.
        frame.drop(columns=["time_s", "peak TFLOP/s", "ridge FLOP/B"]),
        hide_index=True,
        width="stretch",
        # Short headings on the rates (the CSV keeps the long names, the help says them): long ones had
        # pushed the table's last rates past its right edge at 1440 px, their numbers cut off.
        column_config={
            c: st.column_config.NumberColumn(label, format="%,.2f", help=words)
            for c, label, words in (
                ("expected TFLOP/s", None, "The GEMM's FLOPs over its expected time."),
                (
                    "attainable (ideal bound) TFLOP/s",
                    "ideal TFLOP/s",
                    "Attainable at the ideal bound: the FLOPs over the ideal bound's time (kernel floor included).",
                ),
                (
                    "roof at this intensity TFLOP/s",
                    "roof TFLOP/s",
                    "The roof at the GEMM's arithmetic intensity: min(peak, bandwidth x intensity).",
                ),
            )
        },
    )
    d1, d2 = st.columns(2)
    d1.download_button(
        "Download CSV",
        data=lambda: frame.to_csv(index=False),
        file_name="roofline_gemm.csv",
        mime="text/csv",
        on_click="ignore",
    )
    d2.download_button(
        "Download JSON",
        data=json.dumps(results, indent=2),
        file_name="roofline_gemm.json",
        mime="application/json",
        on_click="ignore",
    )
    st.caption(
        "The chart's camera icon saves a PNG; the address bar holds every input, so the URL reproduces this view."
    )

share_panel("Roofline", report.sections)
