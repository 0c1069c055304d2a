"""The precision pickers every page shares (weights, MoE experts, math, fp8 scaling, KV cache),
bound to the URL, with their checks, their help and the captions that say what they resolved to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import streamlit as st

from dashboard.share import md_escape
from dashboard.state import Validator, one_of

if TYPE_CHECKING:
    from roofline.workload import Precision

SAME_AS_WEIGHTS = "same as the weights"
WEIGHT_DTYPE_HELP = "Storage of the linear weights: int4, int8, fp8 and the fp4 formats shrink the weight bytes."
WEIGHTS_COMPUTE_HELP = (
    " They compute in the math dtype: fp8 weights with fp8 math are W8A8, with bf16 math weight-only."
)
EXPERT_DTYPE_HELP = (
    "The routed MoE experts' weights where they differ from the rest (gpt-oss ships mxfp4 experts beside bf16 "
    "attention). Ignored for dense models."
)
MATH_DTYPE_HELP = (
    "The dtype the linear layers compute in; its peak is used (fp8 = W8A8, fp4 = W4A4). auto: as the serving "
    "engines run the weights on each device: fp8 weights in fp8 (W8A8) and nvfp4 in fp4 (W4A4) where the device has "
    "that math, every other case in bf16 (weight-only: dequantized as they are read)."
)
FP8_SCALING_HELP = (
    "How fp8 weights carry their scales, which sets the kernels an engine runs and its tables are read at: one "
    "scale per tensor (NVIDIA's FP8 checkpoints, vLLM's --quantization fp8) or one per 128 x 128 block "
    "(DeepSeek-V3's format, Qwen3's own FP8 releases), whose kernels differ in speed. auto: the model's own FP8 "
    "checkpoint's, per-tensor where the model records none. The datasheet does not see it (a block's scale is "
    "1/16,384 of its bytes). Ignored without fp8 weights. On the Serving page it also sets the cheapest-setup "
    "search's fp8 weights."
)


def precision_params(math: bool = True) -> dict[str, Validator]:
    """The checks of ``precision_pickers``' URL parameters, for the page's ``warn_bad_params``."""
    from roofline.defaults import FP8_SCALINGS, KV_DTYPES, MATH_CHOICES, WEIGHT_DTYPES

    return {
        "wdtype": one_of(WEIGHT_DTYPES),
        "ewdtype": one_of([SAME_AS_WEIGHTS, *WEIGHT_DTYPES]),
        **({"adtype": one_of(MATH_CHOICES), "fp8scale": one_of(FP8_SCALINGS)} if math else {}),
        "kvdtype": one_of(KV_DTYPES),
    }


def precision_pickers(math: bool = True) -> Precision:
    """The weights, the MoE experts' weights, the math and the fp8 weights' scaling (where the page
    computes times) and the KV cache, bound to the URL as ``wdtype``, ``ewdtype``, ``adtype``,
    ``fp8scale`` and ``kvdtype`` on every page, as a ``roofline.workload.Precision``. Without ``math``
    the math is the engines' ("auto")."""
    from roofline.defaults import FP8_SCALINGS, KV_DTYPES, MATH_AUTO, MATH_CHOICES, WEIGHT_DTYPES
    from roofline.workload import Precision

    weights = st.selectbox(
        "Weight dtype",
        WEIGHT_DTYPES,
        index=WEIGHT_DTYPES.index("bf16"),
        key="wdtype",
        bind="query-params",
        help=WEIGHT_DTYPE_HELP + (WEIGHTS_COMPUTE_HELP if math else ""),
    )
    experts = st.selectbox(
        "MoE expert weight dtype",
        [SAME_AS_WEIGHTS, *WEIGHT_DTYPES],
        key="ewdtype",
        bind="query-params",
        help=EXPERT_DTYPE_HELP,
    )
    act, scaling = MATH_AUTO, "auto"
    if math:
        act = st.selectbox(
            "Compute (math) dtype",
            MATH_CHOICES,
            index=0,
            key="adtype",
            bind="query-params",
            help=MATH_DTYPE_HELP,
        )
        scaling = st.selectbox(
            "FP8 weight scaling", FP8_SCALINGS, key="fp8scale", bind="query-params", help=FP8_SCALING_HELP
        )
    kv = st.selectbox("KV-cache dtype", KV_DTYPES, index=KV_DTYPES.index("bf16"), key="kvdtype", bind="query-params")
    return Precision(
        weight_dtype=weights,
        act_dtype=act,
        kv_dtype=kv,
        expert_weight_dtype=None if experts == SAME_AS_WEIGHTS else experts,
        fp8_scaling=scaling,
    )


def moot_precision_note(precision: Precision, model) -> str:
    """A caption where a precision picker changes nothing for this model (``Precision.unused_fields``),
    as the command line refuses the same flags: an experts' format on a dense model, an FP8 scaling
    without fp8 weights ("" where every pick applies)."""
    unused = precision.unused_fields(model)
    moot = []
    if "expert_weight_dtype" in unused:
        moot.append(f"MoE expert weight dtype ({precision.expert_weight_dtype}): {model.name} has no routed experts")
    if "fp8_scaling" in unused:
        moot.append(f"FP8 weight scaling ({precision.fp8_scaling}): no weights here are fp8")
    return ("Changes nothing here: " + "; ".join(moot) + ".") if moot else ""


def fp8_scaling_note(precision: Precision, model, engine: str) -> str:
    """A caption line, where fp8 weights are read from an engine's kernel tables: the scaling they
    are read at, and where "auto" took it from ("" without fp8 weights, a dense model's expert
    dtype not counting, and on the datasheet, which reads no kernels)."""
    experts = precision.expert_weight_dtype if model.moe else None
    if engine == "ideal" or "fp8" not in (precision.weight_dtype, experts):
        return ""
    resolved = precision.resolved(model).fp8_scaling
    if precision.fp8_scaling != "auto":
        return f"FP8 weights read at {resolved}-scaled kernels (FP8 weight scaling: {resolved})."
    checkpoint = model.fp8_checkpoint
    why = f"{checkpoint.repo} is {resolved}-scaled" if checkpoint else "the model records no FP8 checkpoint"
    return f"FP8 weights read at {resolved}-scaled kernels (FP8 weight scaling auto: {md_escape(why)})."


def setup_params(
    precision: Precision, tp: int, engine: str, moe: Mapping[str, str], attention_dp: int = 1
) -> dict[str, object]:
    """A setup as the URL parameters the LLM inference and Roofline pages read it from
    (``precision_pickers``, the TP degree, ``attention_dp_picker``, ``engine_picker``, ``moe_pickers``),
    so a link opens the same step."""
    return {
        "wdtype": precision.weight_dtype,
        "ewdtype": precision.expert_weight_dtype or SAME_AS_WEIGHTS,
        "adtype": precision.act_dtype,
        "fp8scale": precision.fp8_scaling,
        "kvdtype": precision.kv_dtype,
        "tp": tp,
        "adp": attention_dp,
        "engine": engine,
        "moekernel": moe["moe_kernel"],
        "moerouting": moe["moe_routing"],
    }
