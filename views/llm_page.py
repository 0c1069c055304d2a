"""LLM inference page: every op of prefill and decode on the roofline, TTFT, TPOT, memory fit."""

from __future__ import annotations

import numpy as np
import streamlit as st

from dashboard import custom
from dashboard.cache import cached, per_device
from dashboard.llm_view import (
    OP_FORMATS,
    ROOF_SHARE_HELP,
    decode_sweeps,
    decode_trajectories,
    device_rows,
    does_not_fit,
    fit_to_context,
    op_frames,
    ranks_note,
    steps_summary,
)
from dashboard.measured import measured_panel, roofs_caption
from dashboard.precision_pickers import fp8_scaling_note, moot_precision_note, precision_params, precision_pickers
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
    warn_bad_params,
)
from dashboard.tabs import VIEW_PARAM, is_open, view_param, view_tabs
from roofline.defaults import (
    ATTENTION_KERNELS,
    DEFAULT_CUDA_GRAPHS,
    DEFAULT_LAUNCH_OVERHEAD_S,
    TP_CHOICES,
)
from roofline.engine import REGIME_LABELS
from roofline.format import dumps_strict, fmt_amount, fmt_bytes, fmt_seconds
from roofline.inference import analyze_request
from roofline.plots import op_table_series, roofline_figure, time_breakdown_figure
from roofline.report import Metric
from roofline.settings import Settings
from roofline.workload import Workload

MAX_TOKENS = 1 << 20
VIEWS = ("Ops on the roofline", "Where the time goes", "Batch and context", "Op table")
devices = custom.devices()
models = custom.models()
device_ids, model_ids = list(devices), list(models)

report = Report()
st.title("LLM inference")
st.caption(
    "Every op of a prefill and a decode step on the roofline, with its time and regime; the request's TTFT, "
    "TPOT and tokens/s; and whether it fits. Numbers are per device of a tensor-parallel group."
)

warn_bad_params(
    {
        "model": one_of(model_ids),
        "hw": devices_param(device_ids),
        "batch": int_in(1, 65536),
        "prompt": int_in(1, MAX_TOKENS),
        "output": int_in(1, MAX_TOKENS),
        **precision_params(),
        "tp": one_of([str(t) for t in TP_CHOICES]),
        "adp": attention_dp_param(),
        "attn": one_of(ATTENTION_KERNELS),
        "graphs": boolean,
        "launch_us": float_in(0.0, 1000.0),
        "mem_util": float_in(0.05, 1.0),
        "engine": engine_param(),
        **moe_params(),
        VIEW_PARAM: view_param(VIEWS),
    }
)

with st.sidebar:
    st.header("Workload")
    model_id = st.selectbox("Model", model_ids, index=model_ids.index("llama-3.1-8b"), key="model", bind="query-params")
    selected = device_picker(
        device_ids, ["h100-sxm"], "The first device is analysed in detail; all are compared in the table."
    )
    c1, c2, c3 = st.columns(3)
    batch = c1.number_input("Batch", 1, 65536, 1, key="batch", bind="query-params")
    prompt = c2.number_input("Prompt", 1, MAX_TOKENS, 1024, key="prompt", bind="query-params")
    output = c3.number_input("Output", 1, MAX_TOKENS, 256, key="output", bind="query-params")
    engine = engine_picker()
    moe = moe_pickers()
    st.header("Precision and parallelism")
    precision = precision_pickers()
    tp = st.selectbox("Tensor parallel degree", TP_CHOICES, key="tp", bind="query-params")
    ranks = attention_dp_picker(help=ATTENTION_DP_HELP + " Batch is then one rank's sequences.")
    attention = st.radio(
        "Attention kernel",
        ATTENTION_KERNELS,
        horizontal=True,
        key="attn",
        bind="query-params",
        help="flash: fused (FlashAttention), reads Q, K, V once; naive: writes and re-reads the score matrix.",
    )
    st.header("Overheads and memory")
    graphs = st.checkbox(
        "CUDA graphs",
        value=DEFAULT_CUDA_GRAPHS,
        key="graphs",
        bind="query-params",
        help="Replay each step's kernels from a CUDA graph, as serving engines do: the host's dispatch cost per "
        "kernel goes away. Off (eager), small steps are overhead-bound where the host is slower than the device.",
    )
    launch_us = st.number_input(
        "Host dispatch per kernel, eager (µs)",
        0.0,
        1000.0,
        DEFAULT_LAUNCH_OVERHEAD_S * 1e6,
        0.5,
        key="launch_us",
        bind="query-params",
        help="Host time to dispatch one tiny PyTorch op (10.6 µs measured on an H100 host; linear layers and "
        "attention cost 1.75×, norms 1.55×). Launches are asynchronous: an eager step takes the longer of the "
        "host's dispatching and the device's work.",
    )
    mem_util = st.slider(
        "Usable memory fraction",
        0.05,
        1.0,
        0.9,
        0.01,
        key="mem_util",
        bind="query-params",
        help="Like a serving engine's gpu-memory-utilization, of what the runtime exposes where it is "
        "recorded (an 80 GB H100 SXM exposes 79.18 GiB), else of the vendor's GB as 10⁹ B.",
    )


custom.model_upload()

if not selected:
    st.info("Pick at least one device in the sidebar.")
    st.stop()

model = models[model_id]
measured = measured_panel()
settings = Settings(
    launch_overhead_s=launch_us * 1e-6,
    memory_utilization=mem_util,
    engine=engine,
    **moe,
    **measured.settings_fields(),
)
roofs_note = roofs_caption(measured, list(selected), int(tp))
if roofs_note:
    st.caption(roofs_note)
if moot := moot_precision_note(precision, model):  # picks this model does not use
    st.caption(moot)
st.caption(engine_notes(engine, devices, selected, **moe, calibration=measured.calibration))
if scaling_note := fp8_scaling_note(precision, model, engine):
    st.caption(scaling_note)
prompt, output, cut = fit_to_context(model, prompt, output)
if cut:
    st.warning(cut)
try:
    workload = Workload(
        model, "request", int(batch), int(prompt), int(output), precision, int(tp), attention, graphs, ranks
    )
except ValueError as exc:
    st.error(f"Cannot analyse this workload: {exc}")
    share_panel("LLM inference", report.sections)
    st.stop()

# Every device analysed on its own: one that cannot run this choice (no peak for the compute dtype,
# say) gets a row saying why, and the first device that can is analysed in detail.
analyses, why_not = per_device(analyze_request, workload, [devices[h] for h in selected], settings)


def devices_table() -> None:
    report.subheader("Devices")
    report.table(
        device_rows(selected, {h: devices[h].name for h in selected}, analyses, why_not),
        hide_index=True,
        width="stretch",
        column_config={"tokens/s": st.column_config.NumberColumn(format="%,.1f")},
    )


if not analyses:
    st.error(
        "None of the chosen devices can run this workload: "
        + "; ".join(f"{md_escape(devices[h].name)}: {why}" for h, why in why_not.items())
    )
    devices_table()
    share_panel("LLM inference", report.sections)
    st.stop()
hw_id = next(iter(analyses))
hw = devices[hw_id]
request = analyses[hw_id]
for hid, why in why_not.items():
    st.warning(
        f"{md_escape(devices[hid].name)} cannot run this workload ({why}); the Devices table says so, "
        "the rest is shown."
    )
if hw_id != selected[0]:
    st.info(f"Analysed in detail: {md_escape(hw.name)}, the first chosen device that can run this workload.")
elif len(selected) > 1:
    st.caption(
        f"The figures below are {md_escape(hw.name)}'s, the first device chosen; the Devices table compares them all."
    )
run = request.workload
if ranks > 1:
    st.info(ranks_note(ranks, int(tp), int(batch)))
for note in request.notes:
    if "roofs" not in note:  # the engine's roofs are in the caption above
        st.info(note)
data = request.to_json()
mem = data["memory"]
prefill, decode = request.prefill, request.decode
# The decode trajectories' context: the output's middle, or (no decode) the prompt, leaving room for a token.
mid_context = int(decode.workload.seq_len) if decode else min(int(prompt), model.max_context - 1)
# No published compute peak: every time is a lower bound (and every rate an upper one).
at_least, at_most = ("≥ ", "≤ ") if data["time_is_lower_bound"] else ("", "")


def beside_ideal(time_s: float | None, ideal_s: float | None) -> str:
    """The ideal bound under an expected figure (nothing when the figure is the ideal bound; a
    serving engine's host work on datasheet roofs makes it more)."""
    return f"ideal bound {fmt_seconds(ideal_s)}" if ideal_s and time_s and abs(time_s / ideal_s - 1) >= 0.005 else ""


# A workload that does not fit has times the device cannot reach: each time and rate says so in its name.
IF_IT_FIT = "" if mem["fits"] else " (if it fit)"


# Before the figures: a workload that does not fit has times it cannot reach (each figure says so too).
for hid, analysis in analyses.items():  # every chosen device that it does not fit, the one in detail first
    if not (fit := analysis.footprint.to_json())["fits"]:
        st.warning(does_not_fit(model.name, int(tp), devices[hid], fit) + " Its times assume it would.")
report.metrics(
    Metric(
        "TTFT" + IF_IT_FIT,
        at_least + fmt_seconds(request.ttft_s),
        beside_ideal(request.ttft_s, data["ideal_ttft_s"]),
        help=f"prefill is {REGIME_LABELS[prefill.bound]}; {data['expected_rests_on']} roofs",
        delta_color="off",
    ),
    Metric(
        "TPOT" + IF_IT_FIT,
        at_least + fmt_seconds(request.tpot_s) if request.tpot_s else "n/a",
        beside_ideal(request.tpot_s, data["ideal_tpot_s"]),
        help="mean decode step over the output, context growing",
        delta_color="off",
    ),
    Metric("End to end" + IF_IT_FIT, at_least + fmt_seconds(request.e2e_s)),
    Metric(
        "Output tokens/s" + IF_IT_FIT,
        f"{at_most}{fmt_amount(data['tokens_per_s'])}",
        help=f"over the batch (the prompt tokens not counted); {fmt_amount(data['tokens_per_s_per_user'])} per user",
    ),
    Metric(
        "MFU",
        "n/a" if data["mfu"] is None else f"{data['mfu'] * 100:.1f}%",
        help=f"MBU (memory-bandwidth utilisation) {data['mbu'] * 100:.1f}%",
    ),
    Metric(
        "Memory / device",
        fmt_bytes(mem["total_bytes"]),
        "fits" if mem["fits"] else "does not fit",
        delta_color="normal" if mem["fits"] else "inverse",
    ),
)
report.markdown(steps_summary(prefill, decode, int(batch), int(prompt), mid_context, md_escape(hw.name)))

ceilings = prefill.table.ceilings
tables = {"prefill": prefill.table, **({"decode": decode.table} if decode else {})}
if data["time_is_lower_bound"]:
    st.warning(f"Times are lower bounds (≥): {data['time_rests_on']}.")
if len(selected) > 1:
    devices_table()
roofline_tab, breakdown_tab, trajectory_tab, ops_tab = view_tabs(VIEWS)

if is_open(roofline_tab):
    with roofline_tab:
        series = [
            op_table_series(t, phase, "circle" if phase == "prefill" else "diamond", t.total_time_s)
            for phase, t in tables.items()
        ]
        roof_dtypes = list(dict.fromkeys([run.precision.act_dtype, run.precision.attention_dtype]))
        fig = roofline_figure(
            [(ceilings, d) for d in roof_dtypes],  # a dtype without a peak: the memory slope alone
            series,
            title=f"{model.name} on {hw.name}: ops of one prefill (●) and one decode (◆) step",
        )
        report.chart(fig, width="stretch", theme=None, key="llm_roofline")
        report.caption(
            "Marker area is the op's share of its step's time; colour is its regime. Points sit at the "
            "performance the model predicts (FLOPs / time), so overhead-bound ops (a launch or a kernel's floor "
            "sets their time) fall below the roof."
        )

if is_open(breakdown_tab):
    with breakdown_tab:
        report.subheader("Where the time goes")
        report.chart(
            time_breakdown_figure({p: t.rows() for p, t in tables.items()}),
            width="stretch",
            theme=None,
            key="llm_breakdown",
        )

if is_open(trajectory_tab):
    with trajectory_tab:
        report.subheader("How decode moves as batch and context grow")
        batches = np.unique(np.round(np.geomspace(1, 1024, 28)).astype(int))
        max_ctx = model.max_context - 1
        contexts = np.unique(np.round(np.geomspace(min(128, max_ctx), max_ctx, 28)).astype(int))
        sweeps = cached(decode_sweeps, run, hw, settings, ceilings, mid_context, batches, contexts)
        trajectories = decode_trajectories(sweeps, run, ceilings, mid_context, int(batch), batches, contexts)
        report.chart(
            roofline_figure(
                [(ceilings, d) for d in (run.precision.act_dtype,) if ceilings.has_peak(d)],
                trajectories,
                title=f"{model.name} on {hw.name}: one decode step as the batch grows and as the context grows",
                height=520,
            ),
            width="stretch",
            theme=None,
            key="llm_trajectory",
        )
        report.caption(
            "Batching reuses each weight byte for more tokens, so the step moves right (more FLOP per byte). "
            "A longer context adds KV bytes that every sequence reads alone, at attention's few FLOPs per byte "
            "(more with more query heads per KV head): the step's intensity moves toward attention's, left when "
            "batching had taken it past that, right when it had not, and the step takes longer."
        )

if is_open(ops_tab):
    with ops_tab:
        report.subheader("Op table")
        report.caption(
            "Values are totals over the op's count, per device; MB = 10⁶ B. The CSV has them in FLOPs, bytes and s."
        )
        report.table(
            op_frames(tables)[1],
            hide_index=True,
            width="stretch",
            placeholder="—",  # a share of roof the datasheet cannot read
            column_config={"op": st.column_config.TextColumn(pinned=True)}
            | {col: st.column_config.NumberColumn(format=f) for col, f in OP_FORMATS.items()}
            | {
                "% of its roof": st.column_config.NumberColumn(format=OP_FORMATS["% of its roof"], help=ROOF_SHARE_HELP)
            },
        )
# Below every tab: the files hold the whole analysis, whichever view is open (built when clicked).
d1, d2 = st.columns(2)
d1.download_button(
    "Download ops (CSV)",
    data=lambda: op_frames(tables)[0].to_csv(index=False),
    file_name=f"{model_id}_ops.csv",
    mime="text/csv",
    on_click="ignore",
)
d2.download_button(
    "Download analysis (JSON)",
    data=lambda: dumps_strict(
        {"request": data, "prefill": prefill.to_json(), **({"decode": decode.to_json()} if decode else {})}
    ),
    file_name=f"{model_id}_analysis.json",
    mime="application/json",
    on_click="ignore",
)

share_panel("LLM inference", report.sections)
