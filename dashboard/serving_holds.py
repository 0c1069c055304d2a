"""The Serving page's engine settings in the simulation: those that hold new requests back (SGLang's
intake interval, TensorRT-LLM's batch waiting: ``roofline.serving.simulation.scheduler``), how
large a step with prompt tokens the engine still replays from a CUDA graph, and SGLang's and
TensorRT-LLM's attention data parallelism."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from dashboard.state import (
    ATTENTION_DP_HELP,
    attention_dp_param,
    attention_dp_picker,
    float_in,
    int_in,
    warn_bad_params,
)
from roofline.engines import engine_profile
from roofline.hardware import Hardware
from roofline.settings import Settings

ENGINES = ("vllm", "sglang", "trtllm")


RANKS_HELP = (
    " Each rank has its own scheduler and cache, and takes the requests in turn. SGLang gives each rank a share of "
    "the token budget and sequence cap; vLLM's and TensorRT-LLM's are each rank's."
)


def held_back(settings: Settings, hw: Hardware) -> Settings:
    """SGLang's intake interval or TensorRT-LLM's batch waiting, for the page's engine (off by default),
    and the engine's CUDA-graph limit for steps with prompt tokens (its default on ``hw``)."""
    warn_bad_params(
        {"load_recv": int_in(1, 1000), "load_wait": int_in(0, 1000), "load_wait_ratio": float_in(0, 1)}
        | {f"load_graph_{e}": int_in(0, 1 << 20) for e in ENGINES}
        | {"load_adp": attention_dp_param()}
    )
    c1, c2, c3, c4 = st.columns(4)
    if settings.engine not in ENGINES:  # auto or ideal: the device's engine, or vLLM's scheduler on the datasheet
        ranks = attention_dp_picker(c1, "load_adp", ATTENTION_DP_HELP + RANKS_HELP)
        return replace(settings, attention_dp=int(ranks))
    graphs = {"vllm": c1, "sglang": c2, "trtllm": c3}[settings.engine]
    default = engine_profile(settings.engine).prompt_graph_limit(settings.for_device(hw).max_num_seqs)
    limit = graphs.number_input(
        "CUDA graphs up to (tokens)",
        0,
        1 << 20,
        default,
        key=f"load_graph_{settings.engine}",
        bind="query-params",
        help="The most new tokens of a step with prompt tokens the engine replays from a CUDA graph; a larger step "
        "has the host dispatch every kernel (0: every such step). Defaults: vLLM 512 (piecewise graphs), SGLang "
        "and TensorRT-LLM 0 (their piecewise graphs are off unless switched on).",
    )
    ranks = attention_dp_picker(
        {"vllm": c2, "sglang": c3, "trtllm": c4}[settings.engine], "load_adp", ATTENTION_DP_HELP + RANKS_HELP
    )
    settings = replace(settings, prompt_graph_tokens=int(limit), attention_dp=int(ranks))
    if settings.engine == "vllm":
        return settings
    if settings.engine == "sglang":
        n = c1.number_input(
            "Intake interval (decode steps)",
            1,
            1000,
            1,
            key="load_recv",
            bind="query-params",
            help="SGLang's --scheduler-recv-interval: arrived requests are taken in every N decode steps.",
        )
        return replace(settings, recv_interval=int(n))
    n = c1.number_input(
        "Batch wait (steps)",
        0,
        1000,
        0,
        key="load_wait",
        bind="query-params",
        help="TensorRT-LLM's batch_wait_timeout_iters: prompts beside decodes wait up to N steps ...",
    )
    r = c2.number_input(
        "Batch wait (share of budget)",
        0.0,
        1.0,
        0.0,
        0.05,
        key="load_wait_ratio",
        bind="query-params",
        help="... until the step's tokens reach this share of the budget.",
    )
    if bool(n) != bool(r):
        st.caption(
            "Batch waiting holds prompts only with both above 0, as in TensorRT-LLM (while fewer steps have waited "
            "and the step's tokens are under that share of the budget); either alone holds nothing."
        )
    return replace(settings, batch_wait_iters=int(n), batch_wait_ratio=float(r))
