"""KV cache page: how many sequences fit against context length, and what the cache does to decode."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import streamlit as st

from dashboard import custom
from dashboard.cache import per_device
from dashboard.kv_view import (
    any_over_capacity,
    crossover_metric,
    engine_caps,
    headline_result,
    holds_past_cap,
    memory_rows,
    no_fit_from,
    one_fits_up_to,
    reserved_words,
)
from dashboard.measured import measured_panel, roofs_caption
from dashboard.precision_pickers import moot_precision_note, precision_params, precision_pickers
from dashboard.share import Report, md_escape, share_panel
from dashboard.state import (
    ATTENTION_DP_HELP,
    attention_dp_param,
    attention_dp_picker,
    device_picker,
    devices_param,
    float_in,
    int_in,
    one_of,
    warn_bad_params,
)
from dashboard.tabs import VIEW_PARAM, is_open, view_param, view_tabs
from roofline.defaults import TP_CHOICES
from roofline.engines import vllm_default_words
from roofline.format import count_of, fmt_bytes, ranks_of
from roofline.kvcache import analyze_kv, capacity_curves, context_grid, decode_read_bytes
from roofline.lazy import pandas as pd
from roofline.plots import capacity_figure, crossover_figure, memory_bar_figure
from roofline.report import Metric
from roofline.settings import Settings
from roofline.workload import Workload

BLOCK_SIZES = (1, 8, 16, 32, 64, 128)
VIEWS = ("Capacity", "Memory", "KV-bound decode", "KV dtype and GQA")
devices = custom.devices()
models = custom.models()
device_ids, model_ids = list(devices), list(models)

report = Report()
st.title("KV cache")
st.caption(
    "How many sequences fit at a context length, how long a context fits at a batch size, and when decode "
    "starts reading more KV cache than weights. Capacity is what the runtime exposes where it is recorded (an "
    "80 GB H100 SXM exposes 79.18 GiB), else the vendor's GB as 10⁹ B, times the usable fraction; the cache gets "
    "what weights and the activation workspace leave."
)

warn_bad_params(
    {
        "model": one_of(model_ids),
        "hw": devices_param(device_ids),
        **precision_params(math=False),
        "tp": one_of([str(t) for t in TP_CHOICES]),
        "adp": attention_dp_param(),
        "mem_util": float_in(0.05, 1.0),
        "block": one_of([str(b) for b in BLOCK_SIZES]),
        "batch": int_in(1, 1 << 20),
        "context": int_in(1, 1 << 21),
        "mbt": int_in(1, 1 << 20),
        VIEW_PARAM: view_param(VIEWS),
    }
)

with st.sidebar:
    st.header("Model and devices")
    model_id = st.selectbox("Model", model_ids, index=model_ids.index("llama-3.1-8b"), key="model", bind="query-params")
    selected = device_picker(
        device_ids, ["h100-sxm", "h200-sxm", "mi300x"], "One curve per device; the first is analysed in detail."
    )
    precision = precision_pickers(math=False)
    kvdtype = precision.kv_dtype
    tp = st.selectbox("Tensor parallel degree", TP_CHOICES, key="tp", bind="query-params")
    ranks = attention_dp_picker(help=ATTENTION_DP_HELP + " Every figure is then one rank's.")
    st.header("Serving engine")
    mem_util = st.slider("Usable memory fraction", 0.05, 1.0, 0.9, 0.01, key="mem_util", bind="query-params")
    block = st.selectbox(
        "Block size (tokens)",
        BLOCK_SIZES,
        index=BLOCK_SIZES.index(16),
        key="block",
        bind="query-params",
        help="Paged attention allocates whole blocks; a partly filled last block is waste.",
    )
    mbt = st.number_input(
        "Max batched tokens",
        1,
        1 << 20,
        None,
        key="mbt",
        bind="query-params",
        placeholder="the engine's default",
        help="Tokens in one forward pass; sizes the activation workspace. Empty: the engine's default on each "
        f"device (vLLM's: {vllm_default_words('max_batched_tokens')}).",
    )
    st.header("Operating point")
    c1, c2 = st.columns(2)
    batch = c1.number_input("Batch", 1, 1 << 20, 16, key="batch", bind="query-params")
    context = c2.number_input("Context", 1, 1 << 21, 8192, key="context", bind="query-params")

custom.model_upload()

if not selected:
    st.info("Pick at least one device in the sidebar.")
    st.stop()

model = models[model_id]
if context > model.max_context:
    st.warning(
        f"Context {context:,} exceeds {md_escape(model.name)}'s maximum of {model.max_context:,}; "
        f"using {model.max_context:,}."
    )
    context = model.max_context
measured = measured_panel()
settings = Settings(
    memory_utilization=mem_util,
    block_size=int(block),
    max_batched_tokens=None if mbt is None else int(mbt),
    calibration=measured.calibration,
)
roofs_note = roofs_caption(measured, list(selected), int(tp))
if roofs_note:
    st.caption(roofs_note)
if moot := moot_precision_note(precision, model):  # picks this model does not use
    st.caption(moot)
try:
    workload = Workload(model, "decode", precision=precision, tp=int(tp), attention_dp=ranks)
except ValueError as exc:
    st.error(f"Cannot analyse this configuration: {exc}")
    share_panel("KV cache", report.sections)
    st.stop()
# Each device on its own: one that cannot hold this configuration is named with the reason, the rest shown.
results, why_not = per_device(analyze_kv, workload, [devices[h] for h in selected], int(batch), int(context), settings)
for hid, why in why_not.items():
    st.warning(f"{md_escape(devices[hid].name)} cannot be analysed for this configuration: {why}")
if not results:
    st.error("None of the chosen devices can be analysed for this configuration; the warnings above say why.")
    share_panel("KV cache", report.sections)
    st.stop()
result = headline_result(results)
primary = result.hardware
if primary.id != selected[0] and result.weights_fit:
    st.info(f"The numbers below are for {primary.name}, the first chosen device {model.name} fits on.")
for note in result.notes:
    st.info(note)
if ranks > 1:
    st.info(
        f"{ranks_of(int(tp), ranks)}: "
        f"every figure below is one rank's, its batch that rank's sequences; the group holds {ranks} times them "
        f"({result.max_batch * ranks:,} sequences of {context:,} tokens on {md_escape(primary.name)})."
    )
data = result.to_json()
per_seq = result.kv_bytes_per_sequence

metrics = [
    Metric(
        "KV per token",
        fmt_bytes(result.kv_bytes_per_token),
        help=f"{model.attention_kind}, all layers, per device at TP={tp}, before any sliding-window cap",
    ),
    Metric(
        f"KV per sequence at {context:,} tokens",
        fmt_bytes(per_seq),
        help="paged: whole blocks; sliding-window layers hold at most the window",
    ),
    Metric(
        f"KV budget ({primary.id})",
        fmt_bytes(data["kv_budget_bytes"]),
        help=f"{data['kv_budget_tokens']:,} tokens: usable memory - weights - workspace - non-torch memory",
    ),
    Metric(
        f"Max batch at {context:,} tokens", count_of(result.max_batch, "sequence"), help=f"on {md_escape(primary.name)}"
    ),
    Metric(
        f"Max context at batch {batch:,}", count_of(result.max_context, "token"), help=f"on {md_escape(primary.name)}"
    ),
    crossover_metric(result),
]
report.metrics(*metrics[:3])
report.metrics(*metrics[3:])

for r in results.values():
    if r.message:
        st.warning(f"{md_escape(model.name)} does not fit on {md_escape(r.hardware.name)} at TP={tp}: {r.message}.")

contexts = context_grid(model)
curves = {r.hardware.name: r.curve_max_batch for r in results.values()}
capacity_tab, memory_tab, crossover_tab, variants_tab = view_tabs(VIEWS)


def curves_frame():
    """The capacity curves, one column per device: the Capacity view's table and the CSV."""
    return pd.DataFrame(
        {"context": contexts, **{f"max batch · {r.hardware.id}": r.curve_max_batch for r in results.values()}}
    )


if is_open(capacity_tab):
    with capacity_tab:
        report.chart(
            capacity_figure(
                contexts,
                curves,
                model.max_context,
                {r.hardware.name: no_fit_from(r) for r in results.values()},
                title=f"{model.name}: concurrent sequences that fit (KV {kvdtype}, TP={tp}"
                + (f", one of {ranks} attention ranks)" if ranks > 1 else ")"),
                caps=engine_caps(results, settings),
            ),
            width="stretch",
            theme=None,
            key="capacity_chart",
        )
        if holds_past_cap(results, settings):
            report.caption(
                "Memory only: above a dotted line the cache holds more sequences than the engine runs at once "
                f"(vLLM's default max_num_seqs on the device: {vllm_default_words('max_num_seqs')}); the rest wait "
                "their turn."
            )
        report.table(curves_frame(), hide_index=True, width="stretch", height=240)

if is_open(memory_tab):
    with memory_tab:
        report.subheader(f"Memory at batch {batch}, context {context:,}")
        report.chart(memory_bar_figure(memory_rows(results)), width="stretch", theme=None, key="memory_bar")
        report.caption(
            f"Per sequence: {fmt_bytes(per_seq)} of cache, "
            + (
                f"of which {fmt_bytes(result.paging_waste_bytes)} is the partly filled last block ({block}-token "
                "blocks). "
                if result.paging_waste_bytes
                else f"none of it a partly filled last block: the context fills whole {block}-token blocks. "
            )
            + reserved_words(results)
            + (
                " The black mark is each device's usable memory: what stacks past it does not fit."
                if any_over_capacity(results)
                else ""
            )
        )

if is_open(crossover_tab):
    with crossover_tab:
        report.subheader("When decode becomes KV-bound")
        cross_ctx = np.unique(np.round(np.geomspace(1, model.max_context - 1, 96)).astype(int))
        weights_read, kv_read = decode_read_bytes(result.workload, int(batch), cross_ctx)
        report.chart(
            crossover_figure(
                cross_ctx,
                weights_read,
                kv_read,
                result.crossover_context,
                int(batch),
                fits_up_to=result.max_context,
                device=primary.name,
            ),
            width="stretch",
            theme=None,
            key="crossover_chart",
        )
        report.caption(
            "A decode step reads every weight once however large the batch, but each sequence's cache on its "
            "own: past the crossover, more bandwidth or a smaller KV (fp8, fewer KV heads) speeds decode more "
            "than smaller weights."
        )

if is_open(variants_tab):
    with variants_tab:
        report.subheader(f"KV quantization and GQA on {md_escape(primary.name)}")
        variants: dict[str, np.ndarray] = {}
        dashes: dict[str, str] = {}
        ends: dict[str, int | None] = {}  # where each curve ends: the longest context one sequence fits at
        for dtype in dict.fromkeys([kvdtype, "bf16", "fp8", "int4"]):
            variant = replace(workload, precision=replace(workload.precision, kv_dtype=dtype))
            variants[f"KV {dtype}"] = capacity_curves(variant, [primary], contexts, settings)["max_batch"][0]
            ends[f"KV {dtype}"] = one_fits_up_to(variant, primary, settings)
        if model.attention_kind in ("GQA", "MQA"):
            mha = replace(workload, model=model.model_copy(update={"num_kv_heads": model.num_heads}))
            name = f"same model as MHA ({model.num_heads} KV heads, KV {kvdtype})"
            variants[name] = capacity_curves(mha, [primary], contexts, settings)["max_batch"][0]
            ends[name], dashes[name] = one_fits_up_to(mha, primary, settings), "dash"
        report.chart(
            # The engine's sequence cap on the device as on the Capacity view: a smaller KV rises past it.
            capacity_figure(
                contexts,
                variants,
                model.max_context,
                ends,
                dashes=dashes,
                height=440,
                caps={settings.for_device(primary).max_num_seqs: list(variants)},
            ),
            width="stretch",
            theme=None,
            key="variants_chart",
        )
        report.caption(
            f"{md_escape(model.name)} has {model.num_kv_heads} KV heads for {model.num_heads} query heads "
            f"({model.attention_kind})"
            + ("; MLA caches one compressed latent per token instead." if model.mla else ".")
            + (
                " Above the dotted line the cache holds more sequences than the engine runs at once "
                f"(max_num_seqs {settings.for_device(primary).max_num_seqs:,} on the device); the rest wait."
                if max(float(np.nanmax(v, initial=0)) for v in variants.values())
                > settings.for_device(primary).max_num_seqs
                else ""
            )
        )

# Below every view: the file holds the curves whichever view is open (built when clicked).
st.download_button(
    "Download the curves (CSV)",
    data=lambda: curves_frame().to_csv(index=False),
    file_name=f"{model_id}_kv.csv",
    mime="text/csv",
    on_click="ignore",
)
share_panel("KV cache", report.sections)
