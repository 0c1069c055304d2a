"""A step a page links to opens on the Roofline page as the same step: the setup (precision, TP,
attention data parallel ranks, engine, MoE kernels) travels in the link, and the Roofline page
draws the step the linking page ran."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from roofline.engine import evaluate
from roofline.format import fmt_seconds
from roofline.hardware import load_hardware
from roofline.models import load_models
from roofline.ops import step_ops
from roofline.settings import Settings
from roofline.workload import Precision, Workload
from tests.page_helpers import page


def _run_step(**params) -> tuple[str, dict[str, list[str]]]:
    """The Serving page's run at a closed loop of ``params`` (its Under load view): the words under
    the series and the parameters of the step link in them."""
    load = {"view": "Under load", "load_kind": "concurrency", "load_n": "40", "load_at": "40"}
    at = page("views/serving_page.py", **(load | params))
    assert not at.exception and not at.error, [e.value for e in at.error]
    said = next(m.value for m in at.markdown if "Open this step on the roofline" in m.value)
    return said, _link(said, "Open this step on the roofline")


def _opened(params: dict[str, list[str]]):
    """The Roofline page a step link opens."""
    return page("views/roofline_page.py", **{k: v[0] if k not in ("hw", "dtypes") else v for k, v in params.items()})


def _link(markdown: str, text: str) -> dict[str, list[str]]:
    target = markdown.split(f"[{text}](", 1)[1].split(")", 1)[0]
    return parse_qs(urlsplit(target).query)


def test_the_serving_runs_step_opens_on_the_roofline_at_the_runs_setup():
    said, params = _run_step(
        model="qwen3-30b-a3b",
        hw=["h200-sxm"],
        prompt="512",
        output="64",
        tp="2",
        wdtype="fp8",
        adtype="fp8",
        kvdtype="fp8",
        engine="sglang",
        moekernel="triton",
        load_conc="16",
        load_adp="2",
    )
    # Qwen3's own FP8 checkpoint is block-scaled (model_db's fp8_checkpoint): "auto" scaling reads so.
    setup = "weights fp8 (block scaling), math fp8, KV fp8"
    assert f"on the run's setup ({setup}; TP 2, 2 attention ranks of 1 device) and roofs" in said
    expected = {
        "hw": "h200-sxm",
        "llm": "qwen3-30b-a3b",
        "llm_phase": "decode",
        "wdtype": "fp8",
        "ewdtype": "same as the weights",
        "adtype": "fp8",
        "fp8scale": "block",
        "kvdtype": "fp8",
        "tp": "2",
        "adp": "2",
        "engine": "sglang",
        "moekernel": "triton",
        "moerouting": "auto",
    }
    assert {k: params[k][0] for k in expected} == expected
    assert params["dtypes"] == ["bf16", "fp8"]  # the roofs of its math and of its attention

    # Followed, the link draws that step, timed as the engine's tables time it.
    roof = _opened(params)
    assert not roof.exception and not roof.warning, [w.value for w in roof.warning]
    batch, context = int(params["llm_batch"][0]), int(params["llm_seq"][0])
    hw = load_hardware()["h200-sxm"]
    w = Workload(
        load_models()["qwen3-30b-a3b"],
        "decode",
        batch,
        context,
        precision=Precision("fp8", "fp8", "fp8"),
        tp=2,
        attention_dp=2,
    )
    settings = Settings(launch_overhead_s=0.0, engine="sglang", moe_kernel="triton")
    time_s = evaluate(step_ops(w), settings.ceilings(hw, 2, serving=False)).total_time_s
    caption = next(c.value for c in roof.caption if "of device time per step" in c.value)
    assert f"decode (batch {batch:,} a rank, {context:,} tokens; {setup}; TP 2, 2 attention" in caption
    assert f": {fmt_seconds(time_s)} of device time per step" in caption
    assert not any("add it to Roof dtypes" in c.value for c in roof.caption)
    assert "and a qwen3-30b-a3b decode step on the roofs of" in " ".join(m.value for m in roof.markdown)
    # Opened with the bf16 roofs alone, the page says where the fp8 math's roof is.
    bf16_only = page("views/roofline_page.py", **{k: v[0] if k != "hw" else v for k, v in params.items()})
    assert any("compute in fp8: add it to Roof dtypes" in c.value for c in bf16_only.caption)
    # Without the setup (bf16 at TP 1, the datasheet) the same batch and context is another step.
    bare = evaluate(
        step_ops(Workload(load_models()["qwen3-30b-a3b"], "decode", batch, context)), Settings().ceilings(hw, 1)
    )
    assert fmt_seconds(bare.total_time_s) != fmt_seconds(time_s)


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"tp": "2", "adp": "3"}, "LLM step not drawn: attention data parallel ranks (attention_dp=3) must divide"),
        ({"tp": "1", "wdtype": "bf16"}, "does not fit on 1 × NVIDIA H100 SXM5 80GB"),
    ],
)
def test_a_roofline_step_that_cannot_run_says_why(params, said):
    at = page("views/roofline_page.py", hw=["h100-sxm"], llm="qwen3-235b-a22b", llm_phase="decode", **params)
    assert not at.exception
    assert any(said in w.value.replace("\\", "") for w in at.warning), [w.value for w in at.warning]


def test_the_one_point_link_carries_the_frontiers_setup():
    at = page(
        "views/serving_page.py",
        view="One point",
        model="qwen3-8b",
        hw=["h100-sxm"],
        wdtype="fp8",
        adtype="fp8",
        kvdtype="fp8",
        engine="vllm",
    )
    assert not at.exception and not at.error, [e.value for e in at.error]
    said = next(m.value for m in at.markdown if "Open this batch on the LLM inference page" in m.value)
    params = _link(said, "Open this batch on the LLM inference page")
    assert {k: params[k][0] for k in ("wdtype", "adtype", "kvdtype", "engine", "tp")} == {
        "wdtype": "fp8",
        "adtype": "fp8",
        "kvdtype": "fp8",
        "engine": "vllm",
        "tp": "1",
    }
    llm = page("views/llm_page.py", **{k: v[0] if k != "hw" else v for k, v in params.items()})
    assert not llm.exception and not llm.warning, [w.value for w in llm.warning]
    assert llm.selectbox(key="adtype").value == "fp8"


def test_a_device_without_bf16_links_its_step_as_it_runs_it():
    # A V100 has no bf16 math: its run is fp16, and so is the step its link opens (with the fp16 roof).
    _, params = _run_step(model="llama-3.2-1b", hw=["v100-sxm2-32gb"], load_conc="8", load_at="10")
    assert [params[k] for k in ("wdtype", "adtype", "kvdtype", "dtypes", "gemm_dtype")] == [["fp16"]] * 5
    roof = _opened(params)
    assert not roof.exception and not roof.warning and not roof.info, [w.value for w in roof.warning]


def test_attention_ranks_reach_the_run_whatever_the_engine():
    # engine auto (vLLM's on the H100): the ranks still split the run, and its link carries them.
    said, params = _run_step(model="qwen3-30b-a3b", hw=["h100-sxm"], tp="2", load_adp="2", load_conc="16")
    assert params["adp"] == ["2"] and "on the busiest of 2 attention ranks" in said


def test_a_fit_past_the_devices_links_says_so():
    at = page("views/roofline_page.py", hw=["h200-sxm"], llm="deepseek-r1", llm_phase="decode", tp="8")
    said = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert "It fits at TP=16 (16 devices exceed the NVLink 4 domain of 8 and no host link is recorded: a group" in said
