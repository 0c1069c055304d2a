"""Training page: memory by term, what fits, the levers that make it fit, the step on the
roofline, and the peak of each way to load the checkpoint."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import streamlit as st

from dashboard import custom
from dashboard.basis import basis_label, basis_short, is_ideal, rests_on_sentence
from dashboard.cache import per_device
from dashboard.measured import measured_panel, roofs_caption
from dashboard.share import Report, md_escape, share_panel
from dashboard.state import boolean, device_picker, devices_param, float_in, int_in, one_of, some_of, warn_bad_params
from dashboard.tabs import VIEW_PARAM, is_open, view_param, view_tabs
from dashboard.training_view import (
    fit_metrics,
    fit_plan,
    fmt_params,
    headline_device,
    lever_device,
    levers_frame,
    loading_frame,
    page_setup,
    sequence_lengths,
    step_series,
    token_label,
)
from roofline.engine import REGIME_LABELS
from roofline.format import dumps_strict, fmt_bytes, fmt_seconds
from roofline.loading import CHECKPOINT_DTYPES, load_peaks
from roofline.plots import loading_figure, roofline_figure, training_memory_figure
from roofline.report import Metric
from roofline.settings import Settings
from roofline.training import (
    LORA_TARGETS,
    METHODS,
    OPTIMIZERS,
    RECOMPUTE,
    TRAIN_PRECISIONS,
    analyze_training,
    levers,
    plan_to_fit,
    training_memory,
)

DP_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
VIEWS = ("Memory", "Levers", "Step on the roofline", "Loading the checkpoint")
MICRO_BATCHES = np.array([1, 2, 4, 8, 16, 32, 64])
devices = custom.devices()
models = custom.models()
device_ids, model_ids = list(devices), list(models)

report = Report()
st.title("Training")
st.caption(
    "What a training step holds per device, term by term (weights, master copy, optimizer state, gradients, "
    "activations, logits), at its peak; whether it fits; the levers that make it fit, each evaluated; the step "
    "on the roofline; and the peak host RAM and device memory of each way to load the checkpoint."
)

warn_bad_params(
    {
        "model": one_of(model_ids),
        "hw": devices_param(device_ids),
        "seq": int_in(1, 1 << 20),
        "mb": int_in(1, 1 << 12),
        "gb": int_in(0, 1 << 20),
        "prec": one_of(TRAIN_PRECISIONS),
        "opt": one_of(OPTIMIZERS),
        "fused": boolean,
        "fp32g": boolean,
        "recompute": one_of(RECOMPUTE),
        "flash": boolean,
        "method": one_of(METHODS),
        "rank": int_in(1, 4096),
        "targets": some_of(LORA_TARGETS),
        "dp": one_of([str(d) for d in DP_CHOICES]),
        "zero": one_of(["0", "1", "2", "3"]),
        "offload": boolean,
        "mem_util": float_in(0.05, 1.0),
        "ckdtype": one_of(CHECKPOINT_DTYPES),
        "ltp": one_of([str(d) for d in DP_CHOICES]),
        "hostram": int_in(0, 1 << 20),
        VIEW_PARAM: view_param(VIEWS),
    }
)

with st.sidebar:
    st.header("Model and devices")
    model_id = st.selectbox("Model", model_ids, index=model_ids.index("llama-3.1-8b"), key="model", bind="query-params")
    selected = device_picker(
        device_ids,
        ["h100-sxm", "h200-sxm", "b200"],
        "Each one's usable memory is a line on the charts; the first is analysed in detail.",
    )
    st.header("Batch")
    model = models[model_id]
    seq = st.number_input("Sequence length", 1, 1 << 20, min(2048, model.max_context), key="seq", bind="query-params")
    micro = st.number_input("Micro-batch (sequences per device)", 1, 1 << 12, 1, key="mb", bind="query-params")
    global_batch = st.number_input(
        "Global batch (sequences per optimizer step, 0 = one micro-batch per device)",
        0,
        1 << 20,
        0,
        key="gb",
        bind="query-params",
    )
    st.header("Precision and optimizer")
    precision = st.selectbox(
        "Precision",
        TRAIN_PRECISIONS,
        key="prec",
        bind="query-params",
        help="mixed: 16-bit weights and gradients with an fp32 master copy (Megatron, DeepSpeed); amp: PyTorch "
        "autocast over fp32 weights (16-bit copies saved for backward); fp32.",
    )
    fp32_grads = st.checkbox(
        "fp32 gradients",
        False,
        key="fp32g",
        bind="query-params",
        disabled=precision != "mixed",
        help="Mixed precision: accumulate gradients in fp32 (Megatron's bf16 default, DeepSpeed's fp32 partitions).",
    )
    optimizer = st.selectbox("Optimizer", OPTIMIZERS, key="opt", bind="query-params")
    fused = st.checkbox("Fused optimizer kernel", True, key="fused", bind="query-params")
    st.header("Memory levers")
    recompute = st.radio("Activation recomputation", RECOMPUTE, horizontal=True, key="recompute", bind="query-params")
    flash = st.checkbox("FlashAttention (no s x s scores kept)", True, key="flash", bind="query-params")
    method = st.radio(
        "What is trained",
        METHODS,
        horizontal=True,
        key="method",
        bind="query-params",
        help="LoRA and QLoRA freeze the base (QLoRA stores it in NF4) and train rank-r adapters.",
    )
    rank = st.number_input("LoRA rank", 1, 4096, 16, key="rank", bind="query-params", disabled=method == "full")
    targets = st.multiselect(
        "LoRA targets", LORA_TARGETS, default=["q", "v"], key="targets", bind="query-params", disabled=method == "full"
    )
    st.header("Data parallelism")
    dp = st.selectbox("Devices (data parallel)", DP_CHOICES, key="dp", bind="query-params")
    zero = st.selectbox("ZeRO stage", [0, 1, 2, 3], key="zero", bind="query-params", help="3 = FSDP full shard")
    offload = st.checkbox("Offload the optimizer state to the host", False, key="offload", bind="query-params")
    mem_util = st.slider(
        "Usable memory fraction",
        0.05,
        1.0,
        0.9,
        0.01,
        key="mem_util",
        bind="query-params",
        help="Of what the runtime exposes: the rest is the CUDA context, library workspaces and fragmentation.",
    )

custom.model_upload()
measured = measured_panel()

if not selected:
    st.info("Pick at least one device in the sidebar.")
    st.stop()
hws = [devices[h] for h in selected]
settings = Settings(memory_utilization=mem_util, calibration=measured.calibration)
roofs_note = roofs_caption(measured, list(selected))
if roofs_note:
    st.caption(roofs_note)
if seq > model.max_context:
    st.warning(
        f"Sequence length {seq:,} exceeds {md_escape(model.name)}'s maximum context of {model.max_context:,}; "
        f"showing {model.max_context:,}."
    )
    seq = model.max_context
try:
    setup = page_setup(
        model,
        seq_len=int(seq),
        micro_batch=int(micro),
        global_batch=int(global_batch) or None,
        precision=precision,
        fp32_grads=fp32_grads and precision == "mixed",
        optimizer=optimizer,
        fused_optimizer=fused,
        recompute=recompute,
        flash_attention=flash,
        method=method,
        lora_rank=int(rank),
        lora_targets=tuple(targets) or ("q", "v"),
        dp=int(dp),
        zero=int(zero),
        offload_optimizer=offload,
    )
except ValueError as exc:
    st.error(f"Cannot analyse this training setup: {exc}")
    share_panel("Training", report.sections)
    st.stop()
# Each device on its own: one that cannot run this setup is named with the reason, the rest shown.
results, why_not = per_device(analyze_training, setup, hws, settings)
for hid, why in why_not.items():
    st.warning(f"{md_escape(devices[hid].name)} cannot run this training setup: {why}")
if not results:
    st.error("None of the chosen devices can run this training setup; the warnings above say why.")
    share_panel("Training", report.sections)
    st.stop()
# The headline is one device's: the first picked that the setup fits, else the first picked.
primary = devices[next((h for h, r in results.items() if r.fits), next(iter(results)))]
result = results[primary.id]
mem = result.memory
peak = float(mem.peak_bytes)
source = result.table.ceilings.source
basis = basis_short(source)
on = f"on {basis_label(source)} of {primary.name}"
headline_note = headline_device(md_escape(primary.name), result.fits, len(results))
if headline_note:
    report.caption(headline_note)
report.metrics(
    *fit_metrics(result, peak, mem.peak_at, md_escape(primary.name), seq),
    Metric(
        "Step",
        fmt_seconds(result.step_time_s),
        basis,
        help=f"{setup.accumulation_steps} micro-batch(es) per step, {on}",
        delta_color="off",
    ),
    Metric("Tokens/s", f"{result.tokens_per_s:,.0f}", basis, help=f"over {dp} device(s), {on}", delta_color="off"),
    Metric(
        "Ideal MFU" if is_ideal(source) else f"{basis.capitalize()} MFU",
        f"{result.mfu * 100:.1f}%",
        help=f"MFU at the {basis}: model FLOPs over the step's time {on}"
        + ("; real kernels reach less, so a real run's MFU is lower" if is_ideal(source) else ""),
    ),
    Metric("Bound", result.bound, help=REGIME_LABELS.get(result.bound, result.bound)),
)
report.caption(rests_on_sentence([source]))
for note in result.notes:
    report.caption(note)
p = mem.params
report.markdown(
    f"**{md_escape(model.name)}**: {fmt_params(p.total)} parameters, {fmt_params(p.trainable)} trained. At the peak "
    f"({mem.peak_at}): "
    + ", ".join(f"{k} **{fmt_bytes(float(v))}**" for k, v in mem.at_peak.items() if float(v) > 0)
    + (f"; on the host (offloaded): {fmt_bytes(mem.host_bytes)}" if mem.host_bytes else "")
    + "."
)

capacities = {devices[hid].name: r.capacity_bytes for hid, r in results.items()}
lever_hw = devices[lever_device(results, primary.id)]
lever_result = results[lever_hw.id]
lever_peak = float(lever_result.memory.peak_bytes)

memory_tab, levers_tab, step_tab, loading_tab = view_tabs(VIEWS)

if is_open(memory_tab):
    with memory_tab:
        report.subheader("Memory against micro-batch and sequence length")
        sweep_mb = training_memory(replace(setup, micro_batch=MICRO_BATCHES))
        report.chart(
            training_memory_figure(
                MICRO_BATCHES,
                sweep_mb.at_peak,
                capacities,
                "micro-batch (sequences per device)",
                f"{model.name}: peak per device by term, at {seq:,} tokens",
            ),
            width="stretch",
            theme=None,
            key="memory_by_batch",
        )
        lengths = sequence_lengths(model.max_context)
        sweep_len = training_memory(replace(setup, seq_len=lengths))
        report.chart(
            training_memory_figure(
                lengths,
                sweep_len.at_peak,
                capacities,
                "sequence length (tokens, k = 1,024)",
                f"{model.name}: peak per device by term, micro-batch {micro}",
                labels=[token_label(int(n)) for n in lengths],
            ),
            width="stretch",
            theme=None,
            key="memory_by_length",
        )
        report.caption(
            "Each bar is the step's peak: at the end of forward (every activation and the loss), the start of backward "
            "(the loss's gradients), the end of backward (every gradient) or the optimizer step, whichever is largest. "
            "Dashed lines are each device's usable memory: a bar above a line does not fit that device."
        )

if is_open(levers_tab):
    with levers_tab:
        report.subheader(f"Levers on {md_escape(lever_hw.name)}")
        if lever_hw.id != primary.id:
            report.caption(
                f"The first device picked that this setup does not fit ({fmt_bytes(lever_peak)} against "
                f"{fmt_bytes(lever_result.capacity_bytes)} usable); the headline is for {md_escape(primary.name)}."
            )
        lever_basis = basis_short(lever_result.table.ceilings.source)
        frame = levers_frame(levers(setup, lever_hw, settings), lever_peak)
        report.table(frame, "Levers", hide_index=True, width="stretch")
        if verdict := fit_plan(md_escape(lever_hw.name), *plan_to_fit(setup, lever_hw, settings), lever_result):
            report.markdown(verdict)
        report.caption(
            f"Each lever alone against this setup; time per token is per device, the ratio of two step times "
            f"({lever_basis}; below 1× is faster). Levers that train "
            "the same model are tried first; LoRA and QLoRA train adapters instead."
        )

if is_open(step_tab):
    with step_tab:
        report.subheader("The step on the roofline")
        table = result.table
        series = step_series(table, result.step_time_s)
        dtype = "fp32" if precision == "fp32" else setup.compute_dtype
        report.chart(
            roofline_figure([(table.ceilings, dtype)], series, title=f"{model.name} training step on {primary.name}"),
            width="stretch",
            theme=None,
            key="train_roofline",
        )
        by_phase = result.to_json()["time_by_phase_s"]
        report.markdown(
            f"Time by phase ({basis}): "
            + ", ".join(f"{k} {fmt_seconds(v)}" for k, v in by_phase.items())
            + ". Backward does about twice the forward's matmul work (the gradient of the input and of the "
            "weight); recomputation adds a forward."
        )

# The loading view's choices while its tab is closed (the JSON download uses them): the last ones made
# in it this session (its widgets' state outlives the closed tab; the URL parameter does not), else
# the link's, else the defaults (warn_bad_params has dropped any bad one).
ckdtype = st.session_state.get("ckdtype", st.query_params.get("ckdtype", CHECKPOINT_DTYPES[1]))
ltp = int(st.session_state.get("ltp", st.query_params.get("ltp", DP_CHOICES[0])))
if is_open(loading_tab):
    with loading_tab:
        report.subheader("Loading the checkpoint")
        lc1, lc2, lc3 = st.columns(3)
        ckdtype = lc1.selectbox("Checkpoint dtype", CHECKPOINT_DTYPES, index=1, key="ckdtype", bind="query-params")
        ltp = lc2.selectbox("Devices the model is split over", DP_CHOICES, key="ltp", bind="query-params")
        host_ram = lc3.number_input("Host RAM (GB, 0 = not checked)", 0, 1 << 20, 0, key="hostram", bind="query-params")
        peaks = load_peaks(model, ckdtype, "fp32" if precision == "fp32" else setup.compute_dtype, tp=int(ltp))
        report.chart(
            loading_figure(
                [pk.method for pk in peaks],
                [pk.host_bytes for pk in peaks],
                [pk.device_bytes for pk in peaks],
                primary.memory_bytes,
                host_ram * 1e9 or None,
                f"{primary.name}'s memory" + ("" if primary.memory_exposed_bytes else " (nominal)"),
            ),
            width="stretch",
            theme=None,
            key="loading_chart",
        )
        report.table(
            loading_frame(peaks),
            "Loading",
            hide_index=True,
            width="stretch",
        )
        report.caption(
            "A naive load holds the model built in fp32 and the whole checkpoint at once, per process; meta-device "
            "init holds the checkpoint once; memory-mapped files (safetensors, torch.load(mmap=True)) are page cache "
            "that every process on the host shares. torch.load here always means weights_only=True."
        )


def analysis_json() -> str:
    """Built when the download is clicked: the analysis, every lever and the loading methods."""
    peaks = load_peaks(model, ckdtype, "fp32" if precision == "fp32" else setup.compute_dtype, tp=int(ltp))
    return dumps_strict(
        {
            **result.to_json(),
            "levers_on": lever_hw.id,
            "levers": [lv.to_json() for lv in levers(setup, lever_hw, settings)],
            "loading": [pk.to_json() for pk in peaks],
        }
    )


st.download_button(
    "Download the analysis (JSON)",
    data=analysis_json,
    file_name="roofline_training.json",
    mime="application/json",
    on_click="ignore",
)
share_panel("Training", report.sections)
