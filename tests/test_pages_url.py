"""Every page's state comes from its URL: a non-default state per page, rebuilt from the URL alone."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.page_helpers import page

NON_DEFAULT = {
    "views/roofline_page.py": {
        "hw": ["mi300x"],
        "dtypes": ["fp8"],
        "gemm_dtype": "fp16",
        "m": "64",
        "n": "512",
        "k": "2048",
        "launch_us": "1.5",
        "llm": "mixtral-8x7b",
        "llm_phase": "decode",
        "llm_batch": "8",
        "llm_seq": "300",
        "wdtype": "fp8",
        "ewdtype": "bf16",
        "adtype": "fp8",
        "kvdtype": "fp8",
        "tp": "2",
        "adp": "2",
        "engine": "ideal",
        "moekernel": "triton",
        "moerouting": "balanced",
    },
    "views/llm_page.py": {
        "model": "qwen2.5-7b",
        "hw": ["h200-sxm"],
        "batch": "4",
        "prompt": "300",
        "output": "50",
        "wdtype": "int4",
        "kvdtype": "fp8",
        "tp": "2",
        "adp": "2",
        "attn": "naive",
        "launch_us": "2.5",
        "engine": "sglang",
        "moekernel": "trtllm-gen",
        "moerouting": "balanced",
    },
    "views/kv_page.py": {
        "model": "mistral-7b-v0.1",
        "hw": ["mi300x"],
        "kvdtype": "fp8",
        "wdtype": "fp8",
        "ewdtype": "bf16",
        "tp": "2",
        "adp": "2",
        "block": "32",
        "batch": "3",
        "context": "5000",
        "mbt": "4096",
    },
    "views/advisor_page.py": {
        "model": "gemma-2-9b",
        "phase": "prefill",
        "wdtype": "fp8",
        "adtype": "fp8",
        "kvdtype": "fp8",
        "batch": "2",
        "seq": "512",
        "tp": "2",
        "objective": "throughput",
        "device": "mi300x",
        "x_compute": "2.0",
        "engine": "trtllm",
        "moekernel": "deepgemm",
        "moerouting": "power-law-1.2",
    },
    "views/hardware_page.py": {"vendor": ["AMD"], "compare": ["mi300x", "mi325x"]},
    "views/measure_page.py": {"mode": "full", "mdevice": "cpu", "mmodel": "llama-2-7b"},
    "views/serving_page.py": {
        "model": "qwen3-8b",
        "hw": ["mi300x", "h200-sxm"],
        "prompt": "2000",
        "output": "300",
        "ttft_ms": "500.0",
        "tpot_ms": "30.0",
        "tp": "2",
        "wdtype": "fp8",
        "ewdtype": "mxfp4",
        "adtype": "fp8",
        "kvdtype": "fp8",
        "chunked": "off",
        "xaxis": "tokens per dollar",
        "engine": "sglang",
        "moekernel": "cutlass",
        "moerouting": "power-law-1.01",
        "price_mi300x": "3.25",
    },
    # A page with several views opens the one its URL names (after the "#" here), with that view's widgets.
    "views/serving_page.py#Techniques": {"model": "qwen3-8b", "spec_k": "3", "spec_alpha": "0.5"},
    "views/llm_page.py#Batch and context": {"model": "qwen2.5-7b", "batch": "4"},
    "views/kv_page.py#KV-bound decode": {"model": "mistral-7b-v0.1", "batch": "3"},
    "views/advisor_page.py#What-if": {"device": "mi300x", "x_memory": "2.0"},
    "views/accuracy_page.py": {"metric": "TTFT, simulated under load", "runs": "all", "engines": ["vllm", "sglang"]},
    "views/training_page.py#Loading the checkpoint": {
        "model": "qwen3-8b",
        "hw": ["mi300x"],
        "seq": "1024",
        "mb": "2",
        "gb": "32",
        "prec": "amp",
        "opt": "adamw-8bit",
        "recompute": "selective",
        "method": "lora",
        "rank": "8",
        "targets": ["q", "k", "v"],
        "dp": "8",
        "zero": "2",
        "ckdtype": "fp32",
        "ltp": "2",
        "hostram": "512",
    },
}


def _widget_value(at: AppTest, key: str):
    for kind in ("number_input", "selectbox", "multiselect", "radio", "select_slider", "slider", "checkbox"):
        try:
            return getattr(at, kind)(key=key).value
        except KeyError:
            continue
    raise KeyError(key)


@pytest.mark.parametrize("case", list(NON_DEFAULT))
def test_every_page_state_comes_from_its_url(case):
    path, _, tab = case.partition("#")
    params = NON_DEFAULT[case]
    at = page(path, **params, **({"view": tab} if tab else {}))
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    if tab:
        assert at.session_state["view"] == tab
    for key, raw in params.items():
        value = _widget_value(at, key)
        expected = raw if isinstance(raw, list) else raw
        if isinstance(value, list):
            assert value == expected, key
        elif isinstance(value, bool):
            assert str(value).lower() == str(expected).lower(), key
        else:
            assert str(value) == str(expected) or float(value) == pytest.approx(float(expected)), key
