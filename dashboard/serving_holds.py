"""The Serving page's engine settings that hold new requests back in the simulation: SGLang's
intake interval, TensorRT-LLM's batch waiting (``roofline.serving.simulation.scheduler``)."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from dashboard.state import float_in, int_in, warn_bad_params
from roofline.settings import Settings


def held_back(settings: Settings) -> Settings:
    """SGLang's intake interval or TensorRT-LLM's batch waiting, for the page's engine (off by default)."""
    warn_bad_params({"load_recv": int_in(1, 1000), "load_wait": int_in(0, 1000), "load_wait_ratio": float_in(0, 1)})
    if settings.engine not in ("sglang", "trtllm"):
        return settings
    c1, c2, _, _ = st.columns(4)
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
    return replace(settings, batch_wait_iters=int(n), batch_wait_ratio=float(r))
