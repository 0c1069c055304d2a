"""Profile page: your own model on the roofline. Upload Chrome traces exported by torch.profiler
(one per rank) or profile a small model here; the ops go on the roofline with the step's regime
split, the top ops by time, and what would move the step."""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from dashboard import custom
from dashboard.share import Report, share_panel
from dashboard.state import boolean, int_in, one_of, warn_bad_params
from roofline.engine import REGIME_LABELS, REGIMES, Ceilings
from roofline.format import fmt_bytes, fmt_flops, fmt_seconds
from roofline.lazy import pandas as pd
from roofline.plots import REGIME_COLORS, PointSeries, point_hover, roofline_figure, style_figure
from roofline.profile import Profile, TraceError, import_traces, match_hardware, summarize
from roofline.profile.trace import MAX_EVENTS, MAX_RANKS, MAX_TRACE_BYTES
from roofline.report import Metric

THIS_CPU = "this CPU (measured)"
LEVELS = ["aten", "kernel", "module"]
PROFILE_KEY, ERROR_KEY, UPLOAD_IDS = "profile_result", "profile_error", "profile_upload_ids"
devices = custom.devices()
device_ids = list(devices)
has_torch = importlib.util.find_spec("torch") is not None

report = Report()
st.title("Profile")
st.caption(
    "Your own model on the roofline: upload Chrome traces exported by `torch.profiler` (`export_chrome_trace`, "
    "with `record_shapes=True`; one file per rank) from any machine, or profile a small model here. Each op's "
    "FLOPs and bytes come from its recorded shapes, its time from the profile (a GPU's kernels, or a CPU's ops); "
    "the device's idle time between ops is the host's overhead, measured."
)
warn_bad_params(
    {
        "proofs": one_of([THIS_CPU, *device_ids]),
        "plevel": one_of(LEVELS),
        "players": int_in(1, 4),
        "pseq": int_in(8, 256),
        "ptrain": boolean,
    }
)

upload_col, run_col = st.columns(2)
with upload_col:
    st.subheader("Upload traces")
    files = st.file_uploader(
        f"Chrome-trace JSON (up to {MAX_TRACE_BYTES // 2**20} MB and {MAX_EVENTS:,} events each, {MAX_RANKS} ranks)",
        type=["json", "gz"],
        accept_multiple_files=True,
        max_upload_size=MAX_TRACE_BYTES // 2**20,
        key="profile_upload",
        help="prof.export_chrome_trace('rank0.json') under torch.profiler.profile(record_shapes=True).",
    )
    ids = tuple(f.file_id for f in files or ())
    if ids and st.session_state.get(UPLOAD_IDS) != ids:
        st.session_state[UPLOAD_IDS] = ids
        try:
            texts = [(f.getvalue(), f.name) for f in files]
            st.session_state[PROFILE_KEY] = import_traces(texts, label=", ".join(f.name for f in files)[:200])
            st.session_state.pop(ERROR_KEY, None)
        except TraceError as exc:
            st.session_state.pop(PROFILE_KEY, None)
            st.session_state[ERROR_KEY] = str(exc)
    if st.session_state.get(ERROR_KEY):
        st.error(f"Not imported: {st.session_state[ERROR_KEY]}")
with run_col:
    st.subheader("Profile a small model here")
    c1, c2, c3 = st.columns(3)
    layers = c1.number_input("Layers", 1, 4, 1, key="players", bind="query-params")
    seq = c2.number_input("Tokens", 8, 256, 32, key="pseq", bind="query-params")
    train = c3.toggle("Training step", False, key="ptrain", bind="query-params")
    st.caption("SmolLM2-135M's shapes, random weights, fp32, batch 1, on this machine's CPU.")
    if not has_torch:
        st.info("PyTorch is not installed here: upload a trace instead (`pip install 'roofline[measure]'`).")
    elif st.button("Profile", key="profile_run"):
        started = time.perf_counter()
        with st.spinner("Profiling…"):
            from roofline.models import get_model
            from roofline.profile import profile
            from roofline.profile.models import project_step

            step = project_step(get_model("smollm2-135m"), 1, int(seq), bool(train), int(layers))
            st.session_state[PROFILE_KEY] = profile(step.run, module=step.module, steps=2, label=step.label)
            st.session_state.pop(ERROR_KEY, None)
        st.caption(f"Profiled in {time.perf_counter() - started:,.1f} s.")

prof: Profile | None = st.session_state.get(PROFILE_KEY)
if prof is None:
    st.info("Upload a trace or profile a model to see its ops on the roofline.")
    st.stop()

options = [THIS_CPU, *device_ids] if prof.activity == "cpu" and has_torch else device_ids
matched = (
    match_hardware(prof.device.name, {d: devices[d].name for d in device_ids}) if prof.activity == "cuda" else None
)
default = options.index(matched) if matched in options else 0
roofs_id = st.selectbox("Roofs", options, index=default, key="proofs", bind="query-params")
level = st.segmented_control("Ops", LEVELS, default="aten", key="plevel", bind="query-params") or "aten"


@st.cache_data(show_spinner=False)
def _cpu_roofs() -> Ceilings:
    from roofline.profile.capture import measure_cpu_roofs

    return measure_cpu_roofs()


roofs = _cpu_roofs() if roofs_id == THIS_CPU else Ceilings.from_hardware(devices[roofs_id])
data = summarize(prof, roofs, level=level, top=15)

report.subheader(prof.label or "Profile")
report.caption(
    f"{prof.device.name} · {prof.activity} · {prof.source} · {prof.steps} step(s) · roofs: {roofs.name} "
    f"[{roofs.source}]"
)
split = data["regime_split_s"]
report.metrics(
    Metric("Step (wall)", fmt_seconds(data["wall_s"]), help="per profiled step"),
    Metric("Busy", fmt_seconds(data["busy_s"]), help="kernels (GPU) or top-level ops (CPU) running"),
    Metric("Idle (host gaps)", fmt_seconds(data["idle_s"]), help="the device waiting on the host: overhead"),
    # The regime's word alone: "compute-bound" does not fit a fifth of the row at 1440 px.
    Metric("Step bound by", data["step_bound"], help=REGIME_LABELS[data["step_bound"]]),
    Metric("FLOPs", fmt_flops(data["flops"])),
)

bar = go.Figure(
    [
        go.Bar(
            x=[split[r] * 1e3],
            y=["step"],
            orientation="h",
            name=REGIME_LABELS[r],
            marker_color=REGIME_COLORS[r],
            hovertemplate=f"{REGIME_LABELS[r]}: %{{x:.3f}} ms<extra></extra>",
        )
        for r in REGIMES
        if split.get(r)  # a regime with no time in the step: no bar, and no legend entry for one
    ]
)
bar.update_layout(barmode="stack", xaxis_title="ms per step")
style_figure(bar, height=170, revision="profile-split")
report.chart(bar, "Step time by regime", width="stretch", theme=None, key="profile_split")

rows = [r for r in data["ops"] if r["time_s"] > 0 and (r["flops"] > 0 or r["bytes"] > 0)]
if rows:
    hover = [
        point_hover(
            f"{r['name']} {r['shapes'][:60]}",
            r["flops"],
            r["bytes"],
            r["time_s"],
            r["bound"],
            r["roof_tflops"] * 1e12,
            [f"× {r['count']:g} per step", f"share of step: {r['share_of_step']:.1%}"],
        )
        for r in rows
    ]
    share = np.array([r["share_of_step"] for r in rows])
    series = PointSeries(
        f"{level} ops",
        np.array([max(r["flops"], 1.0) / r["bytes"] if r["bytes"] else np.nan for r in rows]),
        np.array([max(r["flops"], 1.0) / r["time_s"] for r in rows]),
        [r["bound"] for r in rows],
        hover,
        sizes=7.0 + 38.0 * np.sqrt(np.clip(share, 0, 1)),
        outline_color="#333333",
    )
    dtype = rows[0]["dtype"] if roofs.has_peak(rows[0]["dtype"]) else next(iter(roofs.peak_flops_per_s))
    fig = roofline_figure([(roofs, dtype)], [series], title=f"Profiled {level} ops on {roofs.name}'s roofs")
    report.chart(fig, "Ops on the roofline", width="stretch", theme=None, key="profile_roofline")

report.subheader("What would move it")
for tip in data["what_would_move_it"]:
    report.markdown(f"- {tip}")

top = pd.DataFrame(
    [
        {
            "op": r["name"],
            "shapes": r["shapes"],
            "count": r["count"],
            "time": fmt_seconds(r["time_s"]),
            "share": f"{r['share_of_step']:.1%}",
            "FLOPs": fmt_flops(r["flops"]),
            "bytes": fmt_bytes(r["bytes"]),
            "FLOP/B": r["intensity"],
            "of roof": f"{r['fraction_of_roof']:.0%}" if r["fraction_of_roof"] is not None else None,
            "bound": r["bound"],
        }
        for r in data["top_ops"]
    ]
)
report.table(
    top,
    "Top ops by time",
    hide_index=True,
    width="stretch",
    placeholder="—",
    column_config={"FLOP/B": st.column_config.NumberColumn(format="%,.2f")},  # one precision down the column
)
if len(prof.ranks) > 1:
    ranks = pd.DataFrame(
        [
            {
                "rank": r.rank,
                "wall": fmt_seconds(r.wall_s),
                "busy": fmt_seconds(r.busy_s),
                "communication": fmt_seconds(r.communication_s),
                "messages": fmt_bytes(r.communication_bytes),
                "collectives": r.collectives,
            }
            for r in prof.ranks
        ]
    )
    report.table(ranks, "Ranks", hide_index=True, width="stretch")
    if prof.skew_s is not None:
        report.caption(f"Skew between ranks: {fmt_seconds(prof.skew_s)} (the largest spread of a collective's start).")
for note in prof.notes:
    report.caption(note)
st.download_button("Profile (JSON)", data=prof.to_json, file_name="profile.json", on_click="ignore")
st.download_button(
    "As a measurement results file (for the Measure page)",
    data=lambda: prof.to_results(roofs).to_json(),
    file_name="profile_results.json",
    on_click="ignore",
)
share_panel(
    "Profile",
    report.sections,
    note="The link restores this page's settings, not the profile (a trace or a run lives in this session): "
    "download the profile above, or the offline report below, to keep it.",
)
