"""Which hardware? Rank every device for one workload, diagnose what binds, and try what-if roofs."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from dashboard import custom
from dashboard.advisor_view import (
    RANKED_BY,
    basis_caption,
    coinciding_roofs,
    on_ideal_bound,
    ranked_figure,
    ranking_table,
    short_names,
    short_regime,
)
from dashboard.cache import cached
from dashboard.llm_view import fit_to_context
from dashboard.measured import measured_panel, roofs_caption
from dashboard.precision_pickers import fp8_scaling_note, moot_precision_note, precision_params, precision_pickers
from dashboard.share import Report, md_escape, share_panel
from dashboard.state import (
    boolean,
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
from dashboard.tabs import VIEW_PARAM, is_open, open_view, view_param, view_tabs
from roofline.advisor import diagnose, ops_on, rank, sensitivity, workload_time
from roofline.defaults import (
    DEFAULT_CUDA_GRAPHS,
    OBJECTIVES,
    TP_CHOICES,
    WORKLOAD_PHASES,
)
from roofline.engine import REGIME_LABELS
from roofline.format import dumps_strict, fmt_seconds
from roofline.lazy import pandas as pd
from roofline.plots import op_table_series, roofline_figure
from roofline.plots.ranking import ranking_figure
from roofline.precision import auto_math_groups, auto_math_line, maths_apart
from roofline.report import Metric
from roofline.settings import Settings
from roofline.workload import Workload

SCALES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
VIEWS = ("Ranking", "Diagnosis", "What-if", "Top roofs")
devices = custom.devices()
models = custom.models()
device_ids, model_ids = list(devices), list(models)


st.title("Which hardware?")
st.caption(
    "Every accelerator in the database on one workload, ranked; what binds it and which change would "
    "help, each change evaluated; and what-if roofs for the device you have."
)

warn_bad_params(
    {
        "model": one_of(model_ids),
        "phase": one_of(WORKLOAD_PHASES),
        "batch": int_in(1, 65536),
        "seq": int_in(1, 1 << 21),
        "output": int_in(1, 1 << 20),
        **precision_params(),
        "tp": one_of([str(t) for t in TP_CHOICES]),
        "objective": one_of(OBJECTIVES),
        "device": one_of(device_ids),
        **{k: one_of([str(s) for s in SCALES]) for k in ("x_compute", "x_memory", "x_capacity", "x_link")},
        "mem_util": float_in(0.05, 1.0),
        "graphs": boolean,
        "engine": engine_param(),
        **moe_params(),
        VIEW_PARAM: view_param(VIEWS),
    }
)

with st.sidebar:
    st.header("Workload")
    model_id = st.selectbox("Model", model_ids, index=model_ids.index("llama-3.1-8b"), key="model", bind="query-params")
    phase = st.radio(
        "Phase",
        WORKLOAD_PHASES,
        index=WORKLOAD_PHASES.index("decode"),
        horizontal=True,
        key="phase",
        bind="query-params",
    )
    c1, c2, c3 = st.columns(3)
    batch = c1.number_input("Batch", 1, 65536, 1, key="batch", bind="query-params")
    seq = c2.number_input("Prompt / context", 1, 1 << 21, 1024, key="seq", bind="query-params")
    output = c3.number_input(
        "Output", 1, 1 << 20, 128, key="output", bind="query-params", help="Generated tokens, for the request phase."
    )
    precision = precision_pickers()
    tp = st.selectbox("Tensor parallel degree", TP_CHOICES, key="tp", bind="query-params")
    graphs = st.checkbox(
        "CUDA graphs",
        value=DEFAULT_CUDA_GRAPHS,
        key="graphs",
        bind="query-params",
        help="Replay each step's kernels from a CUDA graph, as serving engines do for decode: the host's per-kernel "
        "dispatch cost goes away.",
    )
    mem_util = st.slider("Usable memory fraction", 0.05, 1.0, 0.9, 0.01, key="mem_util", bind="query-params")
    engine = engine_picker()
    moe = moe_pickers()
    objective = st.radio(
        "Rank by",
        OBJECTIVES,
        horizontal=True,
        key="objective",
        bind="query-params",
        help="latency: time of the workload; throughput: tokens/s per device; per-watt: "
        "tokens/s per device per TDP watt.",
    )
    st.header("What-if")
    # Each of these changes only the diagnosis and the what-if: touching one brings its tab up.
    target_id = st.selectbox(
        "Your device",
        device_ids,
        index=device_ids.index("h100-sxm"),
        key="device",
        bind="query-params",
        on_change=open_view("Diagnosis", unless=("What-if",)),
    )
    to_what_if = open_view("What-if")
    x_compute = st.select_slider(
        "Peak FLOPS ×", SCALES, value=1.0, key="x_compute", bind="query-params", on_change=to_what_if
    )
    x_memory = st.select_slider(
        "Memory bandwidth ×", SCALES, value=1.0, key="x_memory", bind="query-params", on_change=to_what_if
    )
    x_capacity = st.select_slider(
        "Memory capacity ×", SCALES, value=1.0, key="x_capacity", bind="query-params", on_change=to_what_if
    )
    x_link = st.select_slider(
        "Link bandwidth ×", SCALES, value=1.0, key="x_link", bind="query-params", on_change=to_what_if
    )

custom.model_upload()

model = models[model_id]
target = devices[target_id]
measured = measured_panel()
settings = Settings(
    memory_utilization=mem_util,
    engine=engine,
    **moe,
    **measured.settings_fields(),
)
roofs_note = roofs_caption(measured, list(devices), int(tp))
if roofs_note:
    st.caption(roofs_note)
if moot := moot_precision_note(precision, model):  # picks this model does not use
    st.caption(moot)
if engine != "ideal":  # which engine's kernels the expected times read, on the device diagnosed
    st.caption(engine_notes(engine, devices, [target_id], **moe, calibration=measured.calibration))
    if scaling_note := fp8_scaling_note(precision, model, engine):
        st.caption(scaling_note)
math_groups = auto_math_groups(precision, list(devices.values()), moe=model.moe is not None)
if math_note := auto_math_line(math_groups):  # the ranking's math column is there where devices compute apart
    st.caption(math_note + (" The ranking's math column says which." if maths_apart(math_groups) else ""))
report = Report()


out_len = int(output) if phase == "request" else 1
seq, out_len, cut = fit_to_context(model, int(seq), out_len, phase)
if cut:
    st.warning(cut)
try:
    workload = Workload(model, phase, int(batch), int(seq), out_len, precision, int(tp), cuda_graphs=graphs)
    ranking = [r.to_json() for r in cached(rank, workload, list(devices.values()), objective, settings)]
except ValueError as exc:
    st.error(f"Cannot analyse this workload: {exc}")
    share_panel("Which hardware", report.sections)
    st.stop()

if not any(r["fits"] for r in ranking):
    st.warning(
        f"{md_escape(model.name)} fits on no device at TP={tp} for this workload. The table says which TP degree would "
        "make each one fit."
    )

ranking_tab, diagnosis_tab, what_if_tab, top_tab = view_tabs(VIEWS)

if is_open(ranking_tab):
    with ranking_tab:
        key, label = RANKED_BY[objective]
        shown = [r for r in ranking if r[key] is not None]
        left_out = [r for r in ranking if r[key] is None]
        on_ideal = on_ideal_bound(ranking)
        fig = ranking_figure(
            shown,
            short_names([r["name"] for r in shown]),
            [ranked_figure(r, key) for r in shown],
            objective == "latency",
            label,
            on_ideal,
            f"{model.name} {phase}: ranked by {objective}" + (" at the ideal bound" if on_ideal else ""),
        )
        report.chart(fig, "Ranking", width="stretch", theme=None, key="ranking_chart")
        report.caption(basis_caption(ranking))
        if left_out:
            why = (
                "a TDP (or the peaks this workload needs)"
                if objective == "per-watt"
                else "the peaks this workload needs"
            )
            report.caption(
                f"Not in the chart ({len(left_out)}), for want of {why}; the table gives the reason for each: "
                + ", ".join(r["name"] for r in left_out)
                + "."
            )
        table, table_config = ranking_table(ranking, objective)
        report.table(table, hide_index=True, width="stretch", placeholder="n/a", column_config=table_config)


def target_run():
    """The workload on your device, or None (with a warning) when it cannot run there."""
    try:
        return workload.on(target)[0]
    except ValueError as exc:
        st.warning(
            f"{md_escape(target.name)} cannot run this workload, so there is no diagnosis or what-if for it: {exc}."
        )
        return None


if is_open(diagnosis_tab):
    with diagnosis_tab:
        report.subheader(f"Diagnosis on {md_escape(target.name)}")
        run = target_run()
        if run is not None:
            diagnosis = cached(diagnose, run, target, settings)
            sensitivities = cached(sensitivity, run, target, settings)
            report.markdown("\n".join(f"- {line}" for line in diagnosis["summary"]))
            levers = pd.DataFrame(
                [
                    {
                        "lever": lv["name"],
                        "time": fmt_seconds(lv["time_s"]),
                        # A larger batch makes each step a little slower and every step yield more tokens:
                        # the step's speed-up and the throughput's, apart.
                        "step speed-up": diagnosis["time_s"] / lv["time_s"],
                        "tokens/s": lv["tokens_per_s"],
                        "tokens/s ×": lv["tokens_per_s"] / diagnosis["tokens_per_s"],
                        "regime after": REGIME_LABELS[lv["bound"]],
                        "fits": lv["fits"],
                    }
                    for lv in diagnosis["levers"]
                ]
            )
            SPEEDUP = st.column_config.NumberColumn(format="%.2f×")
            report.table(
                levers,
                "Levers",
                hide_index=True,
                width="stretch",
                column_config={
                    "step speed-up": SPEEDUP,
                    "tokens/s": st.column_config.NumberColumn(format="%,.1f"),
                    "tokens/s ×": SPEEDUP,
                },
            )
            report.caption(
                "Step speed-up: the step's time before over after, the answer for latency; tokens/s ×: the "
                "throughput after over before. A larger batch slows each step a little and multiplies what it "
                "yields."
            )
            sensitivity_frame = pd.DataFrame(
                [
                    {
                        "2× of": "half the launch overhead" if k == "launch_overhead" else k.replace("_", " "),
                        "speed-up": v,
                    }
                    for k, v in sensitivities.items()
                ]
            )
            report.markdown(
                "**Sensitivity**: the speed-up from 2× of each resource alone (of the launch overhead, half of "
                "it); the largest is the binding one."
            )
            report.table(sensitivity_frame, hide_index=True, column_config={"speed-up": SPEEDUP})

if is_open(what_if_tab):
    with what_if_tab:
        run = target_run()
        if run is not None:
            report.subheader("What-if")
            scaled = replace(
                settings,
                compute_scale=x_compute,
                memory_scale=x_memory,
                capacity_scale=x_capacity,
                link_scale=x_link,
            )
            base_time = cached(workload_time, run, target, settings)
            new_time = cached(workload_time, run, target, scaled)
            report.metrics(
                Metric(
                    "Time",
                    fmt_seconds(new_time.time_s),
                    f"{base_time.time_s / new_time.time_s:.2f}× vs the device unchanged",
                    delta_color="off",
                ),
                Metric(
                    "Regime",
                    short_regime(new_time.bound),
                    f"before: {short_regime(base_time.bound)}",
                    delta_color="off",
                ),
                Metric(
                    "Memory",
                    "fits" if new_time.fits else "does not fit",
                    "before: " + ("fits" if base_time.fits else "does not fit"),
                    delta_color="off",
                ),
            )
            base_ceilings = settings.ceilings(target, run.tp, run.cuda_graphs)
            new_ceilings = replace(
                scaled.ceilings(target, run.tp, run.cuda_graphs), name=f"{target.name} what-if", source="what-if"
            )
            table_new = cached(ops_on, run, new_ceilings)
            what_if_fig = roofline_figure(
                [(base_ceilings, run.precision.act_dtype), (new_ceilings, run.precision.act_dtype)],
                [op_table_series(table_new, f"{phase} (what-if)", "diamond", table_new.total_time_s)],
                title=f"{target.name}: datasheet roof and the what-if roof, with the workload's ops",
                height=520,
            )
            report.chart(what_if_fig, width="stretch", theme=None, key="what_if_chart")

if is_open(top_tab):
    with top_tab:
        report.subheader("The top devices' roofs with this workload")
        top = [devices[r["hardware"]] for r in ranking if r["fits"]][:3]
        if top:
            run = workload.on(top[0])[0]
            top_ceilings = [settings.ceilings(hw, run.tp, run.cuda_graphs) for hw in top]
            ops_table = cached(ops_on, run, top_ceilings[0])
            overlay = roofline_figure(
                [(c, run.precision.act_dtype) for c in top_ceilings],
                [op_table_series(ops_table, f"{phase} on {top[0].name}", "circle", ops_table.total_time_s)],
                title=f"The {len(top)} fastest devices that fit, with the ops on {top[0].name}",
                height=520,
            )
            report.chart(overlay, width="stretch", theme=None, key="top_roofs_chart")
            report.caption(
                "Roofs of the fastest devices that fit, in rank order: "
                + ", ".join(md_escape(hw.name) for hw in top)
                + ". The ops are placed on the first. "
                + coinciding_roofs(top_ceilings, run.precision.act_dtype)
            )
        else:
            report.caption("No device fits this workload at this TP degree, so there are no top roofs to show.")

# Below every view: the files hold the whole ranking whichever view is open (built when clicked).
d1, d2 = st.columns(2)
d1.download_button(
    "Download the ranking (CSV)",
    data=lambda: pd.DataFrame(ranking).drop(columns=["workload"], errors="ignore").to_csv(index=False),
    file_name=f"{model_id}_{phase}_ranking.csv",
    mime="text/csv",
    on_click="ignore",
)
d2.download_button(
    "Download the ranking (JSON)",
    data=lambda: dumps_strict({"workload": workload.describe(), "objective": objective, "ranking": ranking}),
    file_name=f"{model_id}_{phase}_ranking.json",
    mime="application/json",
    on_click="ignore",
)
share_panel("Which hardware", report.sections)
