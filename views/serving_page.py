"""Serving page: latency against throughput per device, the cheapest setup that meets TTFT and
TPOT targets, and the serving techniques that move it, each open as a step on the roofline."""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import streamlit as st

from dashboard import custom
from dashboard.basis import basis_label, basis_short
from dashboard.cache import cached
from dashboard.measured import measured_panel, roofs_caption
from dashboard.precision_pickers import moot_precision_note, precision_params, precision_pickers, setup_params
from dashboard.serving_arrivals import TRACE_NOTE
from dashboard.serving_load import render_load_section
from dashboard.serving_prices import PRICE_PARAM, price_inputs
from dashboard.serving_view import (
    CHUNKED_BEFORE,
    CHUNKED_CHOICES,
    chunked_picker,
    disaggregation_frame,
    frontier_notes,
    point_picker,
    point_step,
    serving_downloads,
    targets_columns,
    targets_frame,
    unfit_warning,
)
from dashboard.share import Report, md_escape, share_panel
from dashboard.state import (
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
    translate_param,
    warn_bad_params,
)
from dashboard.tabs import VIEW_PARAM, is_open, view_param, view_tabs
from roofline.defaults import TP_CHOICES
from roofline.engines import prompt_modes
from roofline.format import fmt_seconds
from roofline.plots import op_table_series, roofline_figure
from roofline.plots.serving import frontier_figure, speculative_figure
from roofline.precision import auto_math_summary
from roofline.report import Metric
from roofline.serving import (
    Traffic,
    best_under_targets,
    disaggregation,
    extra_precision,
    load_prices,
    searched_sentence,
    serving_sweep,
    speculative,
    splittable_tps,
)
from roofline.serving.basis import MIXED_BASIS_WORDS
from roofline.serving.plan import plan_basis_mixed
from roofline.settings import Settings
from roofline.workload import Workload

VIEWS = ("Frontier", "One point", "Cheapest setup", "Techniques", "Under load")
devices = custom.devices()
models = custom.models()
device_ids, model_ids = list(devices), list(models)
shipped_prices = load_prices()

report = Report()
st.title("Serving")
st.caption(
    "Latency against throughput for each device: continuous batching swept over the decode batch (its prompts run "
    "as the sidebar's Chunked prefill says), every point with its TTFT, TPOT, memory, regime and cost. Then the "
    "cheapest setup per device that meets "
    "your TTFT and TPOT targets, and the serving techniques (chunked prefill, speculative decoding, prefill/decode "
    "disaggregation) modelled as steps on the roofline. These four tabs give a loaded server's steady state, without "
    "a queue; *Under load* simulates requests arriving at a rate or from clients, queueing included."
)

translate_param("chunked", CHUNKED_BEFORE)  # a link of the checkbox's days: true / false, any case
warn_bad_params(
    {
        "model": one_of(model_ids),
        "hw": devices_param(device_ids),
        "prompt": int_in(1, 1 << 20),
        "output": int_in(1, 1 << 20),
        "tp": one_of([str(t) for t in TP_CHOICES]),
        **precision_params(),
        "chunked": one_of(list(CHUNKED_CHOICES)),
        "ttft_ms": float_in(1, 1e6),
        "tpot_ms": float_in(0.1, 1e5),
        "xaxis": one_of(["tokens/s per device", "tokens per dollar"]),
        "spec_k": int_in(1, 16),
        "spec_alpha": float_in(0.0, 1.0),
        "engine": engine_param(),
        **moe_params(),
        VIEW_PARAM: view_param(VIEWS),
        **{f"{PRICE_PARAM}{hid}": float_in(0.0, 1e6) for hid in device_ids},
    }
)

with st.sidebar:
    st.header("Model and devices")
    model_id = st.selectbox("Model", model_ids, index=model_ids.index("llama-3.1-8b"), key="model", bind="query-params")
    selected = device_picker(device_ids, ["h100-sxm", "h200-sxm", "b200", "mi300x", "l40s"])
    engine = engine_picker()
    moe = moe_pickers()
    st.header("Traffic")
    prompt = st.number_input("Prompt tokens (mean)", 1, 1 << 20, 1024, key="prompt", bind="query-params")
    output = st.number_input("Output tokens (mean)", 1, 1 << 20, 256, key="output", bind="query-params")
    st.header("Targets (p50)")
    ttft_ms = st.number_input("TTFT (ms)", 1.0, 1e6, 2000.0, 50.0, key="ttft_ms", bind="query-params")
    tpot_ms = st.number_input("TPOT (ms)", 0.1, 1e5, 50.0, 1.0, key="tpot_ms", bind="query-params")
    st.header("The frontier's setup")
    tp = st.selectbox("Tensor parallel degree", TP_CHOICES, key="tp", bind="query-params")
    precision = precision_pickers()
    chunked = chunked_picker(engine)  # None: as the engine runs prompts by default

prices = price_inputs(selected, devices, shipped_prices)

custom.model_upload()
measured = measured_panel()
if not selected:
    st.info("Pick at least one device in the sidebar.")
    st.stop()

model = models[model_id]
hws = [devices[h] for h in selected]
settings = Settings(calibration=measured.calibration, engine=engine, **moe)
note = roofs_caption(measured, list(selected), int(tp))
if note:
    st.caption(note)
if moot := moot_precision_note(precision, model):  # picks this model does not use
    st.caption(moot)
st.caption(engine_notes(engine, devices, selected, **moe, calibration=measured.calibration))
if math_note := auto_math_summary(precision, hws, moe=model.moe is not None):
    st.caption(math_note)
if prompt + output - 1 > model.max_context:
    asked = (
        f"Prompt {prompt:,} + output {output:,} exceed {md_escape(model.name)}'s maximum context of "
        f"{model.max_context:,}; "
    )
    prompt = min(prompt, model.max_context - 1)
    output = max(1, model.max_context - prompt + 1)
    st.warning(asked + f"using a prompt of {prompt:,} and an output of {output:,}.")
traffic = Traffic(int(prompt), int(output))
try:
    points = cached(serving_sweep, model, hws, traffic, precision, int(tp), settings, prices, chunked=chunked)
except ValueError as exc:
    st.error(f"Cannot plan serving for this setup: {exc}")
    st.stop()
for hid, why in points.why_not.items():
    st.warning(f"{md_escape(devices[hid].name)}: {why}")

roofs = {hid: settings.ceilings(devices[hid], int(tp), True).source for hid in points.devices}
frontier_tab, point_tab, targets_tab, techniques_tab, load_tab = view_tabs(VIEWS)


def pick_point() -> tuple[str, int, list[int]] | None:
    return point_picker(points, devices, model.name, int(tp))


if is_open(frontier_tab):
    with frontier_tab:
        report.subheader("Latency against throughput")
        xaxis = st.radio(
            "x axis",
            ["tokens/s per device", "tokens per dollar"],
            horizontal=True,
            key="xaxis",
            bind="query-params",
            help="tokens per dollar needs a price for the device",
        )
        if unfit := unfit_warning(points, devices, model.name, int(tp)):
            st.warning(unfit)
        fig = frontier_figure(
            points,
            {hid: devices[hid].name for hid in points.devices},
            roofs,
            ttft_ms / 1e3,
            tpot_ms / 1e3,
            xaxis == "tokens per dollar",
            f"{model.name}: every decode batch, TP={tp}, {precision.resolved(model).label}",
        )
        if points.runs.any():  # else an empty chart: the warning above says why
            report.chart(fig, width="stretch", theme=None, key="frontier_chart")
        for paragraph in frontier_notes(roofs, settings, [devices[h] for h in points.devices]):
            report.caption(paragraph)

if is_open(point_tab):
    with point_tab:
        report.subheader("One point as a step on the roofline")
        if picked := pick_point():
            pick_device, pick_batch, fitting = picked
            d = points.devices.index(pick_device)
            j = int(np.flatnonzero(points.batch == pick_batch)[0])
            row = points.row(d, j)
            usd = row["usd_per_million_output_all_in"]
            basis = basis_label(roofs[pick_device])
            on = f"{md_escape(devices[pick_device].name)}, decode batch {pick_batch}, on {basis}"
            report.metrics(
                Metric("TTFT", fmt_seconds(row["ttft_s"]), basis_short(roofs[pick_device]), help=on, delta_color="off"),
                Metric("TPOT", fmt_seconds(row["tpot_s"]), basis_short(roofs[pick_device]), help=on, delta_color="off"),
                Metric("Tokens/s per device", f"{row['tokens_per_s_per_device']:,.0f}", help=on),
                Metric("MBU · MFU", f"{row['mbu']:.0%} · {row['mfu']:.0%}", help=f"decode is judged by MBU; {on}"),
                Metric("$ per M output (all-in)", f"${usd:,.3f}" if usd is not None else "no price", help=on),
            )
            hw = devices[pick_device]
            run, _ = Workload(
                model,
                "decode",
                pick_batch,
                int(round(traffic.mean_context)),
                precision=precision,
                tp=int(tp),
                cuda_graphs=True,
            ).on(hw)
            table, title = point_step(run, pick_batch, traffic, chunked, settings, hw, int(tp))
            report.chart(
                roofline_figure(
                    [(table.ceilings, run.precision.act_dtype)],
                    [op_table_series(table, "mixed step", "circle", table.total_time_s)],
                    title=title,
                    height=460,
                ),
                width="stretch",
                theme=None,
                key="point_roofline",
            )
            link = "/llm?" + urlencode(
                {
                    "model": model_id,
                    "hw": pick_device,
                    "batch": pick_batch,
                    "prompt": traffic.prompt_len,
                    "output": traffic.output_len,
                    **setup_params(precision, int(tp), engine, moe),
                }
            )
            report.markdown(
                f"[Open this batch on the LLM inference page]({link}): every op of its prefill and decode steps."
            )


def plan(errors: bool = True) -> list:
    """The cheapest setup per device (cached), its fp8 weights scaled and its prompts run (chunked
    or not) as the page's; without ``errors`` (the JSON download, built when clicked) none where
    the search refuses."""
    args = (model, hws, traffic, ttft_ms / 1e3, tpot_ms / 1e3, settings, prices)
    try:
        return cached(
            best_under_targets,
            *args,
            fp8_scaling=precision.fp8_scaling,
            chunked=chunked,
            also=extra_precision(precision.resolved(model)),
        )
    except ValueError:
        if errors:
            raise
        return []


if is_open(targets_tab):
    with targets_tab:
        report.subheader(f"Cheapest setup per device that meets TTFT ≤ {ttft_ms:g} ms and TPOT ≤ {tpot_ms:g} ms")
        try:
            best = plan()
        except ValueError as exc:
            st.error(str(exc))
            best = []
        ranking = targets_frame(best, roofs)
        if best and not any(b.meets for b in best):
            st.warning(
                f"No device meets TTFT ≤ {ttft_ms:g} ms and TPOT ≤ {tpot_ms:g} ms with any setup searched; "
                "'what binds' says how close each came and what stops it."
            )
        report.table(
            ranking,
            "Targets",
            hide_index=True,
            width="stretch",
            column_config=targets_columns(),
            placeholder="—",
        )
        report.caption(
            searched_sentence(
                model,
                splittable_tps(model, (1, 2, 4, 8))[0],
                precision.fp8_scaling,
                prompt_modes(chunked, engine)[0],
                extra_precision(precision.resolved(model)),
                prompt_modes(chunked, engine)[1],
            )
        )
        report.caption(  # a paragraph of its own: what the ranking rests on
            "Ranked by cost per million output tokens all-in (every device-hour over the output tokens: what a "
            "request costs) where priced, then by throughput per device. Each row's times rest on its "
            "device's roofs (the 'rests on' column): engine-measured kernels are slower than the ideal bound, so a "
            "device on the datasheet alone looks better than it will run"
            + (f"; here {MIXED_BASIS_WORDS}." if plan_basis_mixed(best) else ".")
            + (
                " Where the TTFT equals the TPOT, every step carries a new prompt beside the decodes and each prompt "
                "fits one step: its first token comes one step later, the step every decode waits for too."
                if prompt_modes(chunked, engine)[0]
                else ""
            )
        )

if is_open(techniques_tab):
    with techniques_tab:
        report.subheader("Serving techniques")
        if picked := pick_point():
            pick_device, pick_batch, fitting = picked
            hw = devices[pick_device]
            report.caption(f"On {md_escape(hw.name)}, TP={tp}, at decode batch {pick_batch}.")
            lc1, lc2 = st.columns(2)
            spec_k = lc1.number_input("Speculative: drafted tokens k", 1, 16, 4, key="spec_k", bind="query-params")
            alpha = lc2.number_input(
                "Speculative: acceptance rate", 0.0, 1.0, 0.7, 0.05, key="spec_alpha", bind="query-params"
            )
            batches = np.unique(np.round(np.geomspace(1, max(fitting), 16)).astype(int))
            spec = speculative(
                model,
                hw,
                traffic,
                batches,
                int(spec_k),
                float(alpha),
                precision=precision,
                tp=int(tp),
                settings=settings,
            )
            tokens = float(spec["tokens_per_verify"][0])
            sfig = speculative_figure(
                spec, f"Speculative decoding, k={spec_k}, acceptance {alpha:g}: {tokens:.2f} tokens per verify"
            )
            report.chart(sfig, width="stretch", theme=None, key="spec_chart")
            report.caption(
                f"Each verify step runs k + 1 = {spec_k + 1} positions per sequence through the target model and "
                f"yields (1 − a^(k+1)) / (1 − a) = {tokens:.2f} tokens. It pays most while the step stays "
                "memory-bound (blue markers): one read of the weights serves k + 1 positions. Once the verify step "
                "is compute-bound (red) its time grows with those k + 1 positions, and the speed-up shrinks as the "
                "batch grows, below 1× where a verify step costs more than the tokens it yields. "
                "Drafting here is n-gram (free); a draft model adds its own k steps (`serve "
                f"--draft-model`). Both TPOTs rest on the {basis_label(roofs[pick_device])}."
            )
            try:
                disagg = disaggregation(model, hw, traffic, pick_batch, precision, int(tp), settings)
                st.markdown(f"**Prefill/decode disaggregation at batch {pick_batch}**")  # the report: the table's
                report.table(
                    disaggregation_frame(disagg),
                    f"Prefill/decode disaggregation at batch {pick_batch}",
                    hide_index=True,
                    width="stretch",
                )
                report.caption(
                    "Separate pools: decode steps carry no prompt chunks (lower TPOT), prompts prefill at full speed "
                    "(lower TTFT), and each prompt's KV cache crosses the device's scale-up link; the prefill pool is "
                    "sized to keep pace with the decode pool, and its devices count in the tokens/s per device. "
                    f"Times rest on the {basis_label(roofs[pick_device])}."
                )
            except ValueError as exc:
                st.info(f"Disaggregation: {exc}")

if is_open(load_tab):
    with load_tab:
        render_load_section(
            model, hws, traffic, precision, int(tp), settings, ttft_ms / 1e3, tpot_ms / 1e3, prices, chunked, report
        )


# Below every tab: the files hold the whole plan, whichever view is open (built when clicked).
serving_downloads(points, lambda: plan(errors=False), prices)
share_panel("Serving", report.sections, note=TRACE_NOTE if st.query_params.get("load_kind") == "trace" else "")
