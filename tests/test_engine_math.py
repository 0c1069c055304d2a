"""The math the linear layers compute in by default ("auto"): what vLLM, SGLang and TensorRT-LLM run
the weights in on each device, resolved once the device is known."""

from __future__ import annotations

import pytest

from roofline.hardware import get_hardware
from roofline.inference import analyze_step
from roofline.models import get_model
from roofline.serving import Traffic, best_under_targets
from roofline.settings import Settings
from roofline.workload import Precision, Workload, engine_math
from tests.page_helpers import page

H100, A100, B200 = get_hardware("h100-sxm"), get_hardware("a100-sxm-80gb"), get_hardware("b200")
LLAMA = get_model("llama-3.1-8b")
IDEAL = Settings(engine="ideal")


def test_each_weight_format_runs_in_the_engines_math_on_each_device():
    # fp8: W8A8 where the device has fp8 math (Hopper, Blackwell), weight-only on Ampere; nvfp4: W4A4
    # on Blackwell only; every other format in bf16.
    table = {
        (w, hw.id): engine_math(w, hw) for w in ("bf16", "fp8", "nvfp4", "int4", "mxfp4") for hw in (H100, A100, B200)
    }
    assert [k for k, v in table.items() if v != "bf16"] == [("fp8", "h100-sxm"), ("fp8", "b200"), ("nvfp4", "b200")]
    assert table["nvfp4", "b200"] == "fp4" and table["fp8", "h100-sxm"] == "fp8"
    assert Precision().act_dtype == "auto" and Precision(weight_dtype="fp8").on(H100)[0].act_dtype == "fp8"
    # A T4 has no bf16: its auto math is fp16, as for bf16 asked.
    assert Precision().on(get_hardware("t4"))[0].act_dtype == "fp16"


def test_auto_is_the_same_step_as_asking_for_the_engines_math():
    for hw, weights, math in ((H100, "fp8", "fp8"), (A100, "fp8", "bf16"), (B200, "nvfp4", "fp4")):
        auto = analyze_step(Workload(LLAMA, "prefill", 1, 2048, precision=Precision(weight_dtype=weights)), hw, IDEAL)
        asked = Precision(weight_dtype=weights, act_dtype=math)
        explicit = analyze_step(Workload(LLAMA, "prefill", 1, 2048, precision=asked), hw, IDEAL)
        assert auto.time_s == explicit.time_s, hw.id
    # And W8A8 is faster than weight-only where prefill is compute-bound: the fp8 peak is twice bf16's.
    w8a16 = Precision(weight_dtype="fp8", act_dtype="bf16")
    weight_only = analyze_step(Workload(LLAMA, "prefill", 1, 2048, precision=w8a16), H100, IDEAL)
    auto = analyze_step(Workload(LLAMA, "prefill", 1, 2048, precision=Precision(weight_dtype="fp8")), H100, IDEAL)
    assert auto.time_s < 0.75 * weight_only.time_s


def test_a_note_says_what_auto_chose_and_memory_questions_stay_quiet():
    _, notes = Precision(weight_dtype="fp8").on(H100)
    assert notes == [
        "math fp8 (auto): fp8 weights run W8A8 on NVIDIA H100 SXM5 80GB, as the serving engines run such "
        "checkpoints; set the compute (math) dtype to bf16 for weight-only"
    ]
    assert (
        "A100 SXM4 80GB has no fp8 math, so fp8 weights run weight-only" in Precision(weight_dtype="fp8").on(A100)[1][0]
    )
    assert Precision(weight_dtype="fp8").on(H100, need_peak=False)[1] == []
    assert Precision(weight_dtype="int4").on(H100)[1] == []
    assert Precision(weight_dtype="fp8").label == "weights fp8, math as the engines run it, KV bf16"


def test_ops_of_an_unresolved_fp8_precision_wait_for_a_device():
    assert Precision(weight_dtype="int4").math_dtype == "bf16"  # bf16 on every device
    with pytest.raises(ValueError, match="depends on the device"):
        _ = Precision(weight_dtype="fp8").math_dtype


def test_the_cheapest_setup_search_reads_auto_per_device():
    plans = best_under_targets(
        LLAMA, [H100, A100], Traffic(1024, 256), 2.0, 0.05, tps=(1,), precisions=(), also=Precision(weight_dtype="fp8")
    )
    best = {b.hardware: b for b in plans}
    assert best["h100-sxm"].act_dtype == "fp8" and best["a100-sxm-80gb"].act_dtype == "bf16"
    # The user's precision with auto math plans as the same precision asked outright.
    searched = best_under_targets(
        LLAMA, [H100], Traffic(1024, 256), 2.0, 0.05, tps=(1,), precisions=(("fp8", "bf16"),), also=Precision("fp8")
    )
    alone = best_under_targets(LLAMA, [H100], Traffic(1024, 256), 2.0, 0.05, tps=(1,), precisions=(("fp8", "bf16"),))
    assert searched[0].to_json() == alone[0].to_json()


def test_the_pages_default_math_is_auto_and_says_what_it_chose():
    at = page("views/llm_page.py", model="llama-3.1-8b", hw=["h100-sxm"], wdtype="fp8")
    assert not at.exception
    assert at.selectbox(key="adtype").value == "auto"
    assert any("math fp8 (auto): fp8 weights run W8A8" in str(e.value) for e in at.info)
