"""The math the linear layers compute in by default ("auto"): what vLLM, SGLang and TensorRT-LLM run
the weights in on each device, resolved once the device is known."""

from __future__ import annotations

import pytest

from roofline.hardware import get_hardware
from roofline.inference import analyze_step
from roofline.models import get_model
from roofline.precision import auto_math_groups, auto_math_summary
from roofline.serving import Traffic, best_under_targets, extra_precision
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
    assert "A100 SXM4 80GB has no fp8 math, so the fp8 weights are timed weight-only" in Precision("fp8").on(A100)[1][0]
    assert Precision(weight_dtype="fp8").on(H100, need_peak=False)[1] == []
    assert Precision(weight_dtype="int4").on(H100)[1] == []
    assert Precision(weight_dtype="fp8").label == "weights fp8, math as the engines run it, KV bf16"


def test_ops_of_an_unresolved_fp8_precision_wait_for_a_device():
    assert Precision(weight_dtype="int4").math_dtype == "bf16"  # bf16 on every device
    assert Precision("fp8", expert_weight_dtype="bf16").math_dtype == "bf16"  # mixed: bf16 on every device
    with pytest.raises(ValueError, match="depends on the device"):
        _ = Precision(weight_dtype="fp8").math_dtype


def test_the_cheapest_setup_search_reads_auto_per_device_and_sweeps_each_setup_once(monkeypatch):
    import roofline.serving.plan as plan

    swept = []
    real = plan.serving_sweep

    def recording(model, devices, traffic, precision, *args, **kwargs):
        swept.extend((hw.id, precision) for hw in devices)
        return real(model, devices, traffic, precision, *args, **kwargs)

    monkeypatch.setattr(plan, "serving_sweep", recording)
    plans = best_under_targets(
        LLAMA,
        [H100, A100],
        Traffic(1024, 256),
        2.0,
        0.05,
        tps=(1,),
        precisions=(("fp8", "bf16"),),
        also=Precision("fp8"),
    )
    best = {b.hardware: b for b in plans}
    assert best["h100-sxm"].act_dtype == "fp8" and best["a100-sxm-80gb"].act_dtype == "bf16"
    # The user's fp8 weights with auto math are, per device, the setup the default search holds:
    # each device swept once, at the math the engines run there, never at an unresolved "auto".
    assert sorted((hw, p.act_dtype) for hw, p in swept) == [("a100-sxm-80gb", "bf16"), ("h100-sxm", "fp8")]
    # bf16 math asked outright with bf16 weights is the default search's own: not an extra precision.
    assert extra_precision(Precision(act_dtype="bf16")) is None and extra_precision(Precision()) is None
    assert extra_precision(Precision("fp8", act_dtype="bf16")) is not None


def test_mixed_weight_formats_compute_in_bf16_and_say_why():
    assert Precision("fp8", expert_weight_dtype="mxfp4").on(H100)[0].act_dtype == "bf16"
    assert Precision("fp8", expert_weight_dtype="fp8").on(H100)[0].act_dtype == "fp8"  # one narrow math
    mixed = Precision("bf16", expert_weight_dtype="fp8")
    run, notes = mixed.on(H100)
    assert run.act_dtype == "bf16" and mixed.math_dtype == "bf16"
    assert notes == [
        "math bf16 (auto): the linear layers mix bf16 and fp8 weights and compute in one dtype, so the fp8 "
        "weights are timed weight-only (dequantized as they are read)"
    ]
    # A device with fp8 math but no published fp8 peak, where bf16 has one: timed weight-only, and said so.
    gaudi2 = get_hardware("gaudi2")
    run, notes = Precision("fp8").on(gaudi2)
    assert run.act_dtype == "bf16" and "publishes no fp8 peak to time W8A8 GEMMs at" in notes[0]
    # One with no peak for either: the engines' math, its time a lower bound either way.
    assert Precision("fp8").on(get_hardware("l20"))[0].act_dtype == "fp8"
    # A part without bf16: the note names the math it runs, fp16.
    run, notes = Precision("fp8").on(get_hardware("a6000"))
    assert run.act_dtype == "fp16" and notes[1].startswith("math fp16 (auto): NVIDIA RTX A6000 has no fp8 math")


def test_a_dense_models_experts_format_does_not_enter_auto_math():
    # The pages keep the experts' picker for every model: on a dense one it is moot, W8A8 stands.
    asked = Precision("fp8", expert_weight_dtype="bf16")
    assert asked.resolved(LLAMA).expert_weight_dtype is None
    plans = best_under_targets(LLAMA, [H100], Traffic(1024, 256), 2.0, 0.05, tps=(1,), precisions=(), also=asked)
    assert plans[0].act_dtype == "fp8"
    step = analyze_step(Workload(LLAMA, "decode", 1, 100, precision=asked), H100, IDEAL)
    assert step.workload.precision.act_dtype == "fp8"


def test_a_summary_says_what_each_device_runs_in():
    devices = [H100, A100, B200]
    assert auto_math_summary(Precision("fp8"), devices) == (
        "Math (auto, as the serving engines run these weights): fp8, W8A8, on NVIDIA H100 SXM5 80GB, NVIDIA B200 "
        "(HGX, 1000 W); bf16, weight-only, on NVIDIA A100 SXM4 80GB."
    )
    assert auto_math_summary(Precision("int4"), devices) == ""
    assert auto_math_summary(Precision("fp8", act_dtype="fp8"), devices) == ""  # asked outright
    assert auto_math_summary(Precision("bf16", expert_weight_dtype="fp8"), devices, moe=False) == ""
    many = [get_hardware(h) for h in ("h100-sxm", "h200-sxm", "b200", "a100-sxm-80gb", "l4", "a10", "mi300x")]
    assert "fp8, W8A8, on 5 devices; bf16, weight-only, on 2 devices" in auto_math_summary(Precision("fp8"), many)
    # An MoE's fp8 weights beside mxfp4 experts mix formats: bf16 everywhere.
    assert "bf16, weight-only, on NVIDIA H100" in auto_math_summary(
        Precision("fp8", expert_weight_dtype="mxfp4"), [H100]
    )
    # A device that cannot take the weights is left out; one without bf16 is named with fp16, its math.
    t4, a6000 = get_hardware("t4"), get_hardware("a6000")
    assert auto_math_summary(Precision("fp8"), [H100, t4, a6000]) == (
        "Math (auto, as the serving engines run these weights): fp8, W8A8, on NVIDIA H100 SXM5 80GB; fp16, "
        "weight-only, on NVIDIA RTX A6000."
    )
    assert auto_math_groups(Precision("nvfp4"), [H100, B200]) == {"fp4": [B200.name]}


def test_advise_gives_each_device_its_math(capsys):
    import json

    from roofline.cli import main

    argv = ["advise", "--model", "llama-3.1-8b", "--phase", "prefill", "--batch", "1", "--seq-len", "2048"]
    assert main([*argv, "--weight-dtype", "fp8", "--json"]) == 0
    math = {r["hardware"]: r["math"] for r in json.loads(capsys.readouterr().out)["ranking"]}
    assert math["h100-sxm"] == "fp8" and math["a100-sxm-80gb"] == "bf16"
    assert main([*argv, "--weight-dtype", "fp8"]) == 0
    assert "  math  " in capsys.readouterr().out  # the text ranking's column, where devices differ
    assert main(argv) == 0
    assert "  math  " not in capsys.readouterr().out
    # serve: the summary in its JSON and its text, the cheapest-setup search and a simulated run alike.
    serve = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--hardware", "a100-sxm-80gb"]
    assert main([*serve, "--weight-dtype", "fp8", "--json"]) == 0
    note = json.loads(capsys.readouterr().out)["precision"]["math_note"]
    assert "fp8, W8A8, on NVIDIA H100 SXM5 80GB; bf16, weight-only, on NVIDIA A100 SXM4 80GB" in note
    assert main([*serve, "--weight-dtype", "fp8"]) == 0
    assert note in capsys.readouterr().out
    run = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--weight-dtype", "fp8", "--rate", "2"]
    assert main([*run, "--requests", "20"]) == 0
    assert "Math (auto, as the serving engines run these weights): fp8, W8A8" in capsys.readouterr().out
    # A dense model has no experts' format: refused by name, not searched as an extra precision.
    assert main([*serve, "--expert-weight-dtype", "fp8", "--json"]) == 2
    assert "--expert-weight-dtype: Llama 3.1 8B has no routed experts" in capsys.readouterr().err


def test_the_advisor_pages_math_column_shows_where_devices_compute_apart():
    from dashboard.advisor_view import ranking_table

    def row(hw, math):
        return {"hardware": hw, "name": hw, "rank": 1, "time_s": 1e-3, "ideal_time_s": 1e-3, "roofs": "datasheet",
                "tokens_per_s": 1.0, "tokens_per_s_per_watt": 1.0, "bound": "memory", "fits": True,
                "why_not": None, "smallest_tp": None, "math": math}  # fmt: skip

    apart, _ = ranking_table([row("h100-sxm", "fp8"), row("a100-sxm-80gb", "bf16")], "latency")
    assert list(apart["math"]) == ["fp8", "bf16"]
    same, _ = ranking_table([row("a100-sxm-80gb", "bf16"), row("t4", "fp16")], "latency")  # fp16: bf16's math
    assert "math" not in same.columns


def test_the_pages_default_math_is_auto_and_says_what_it_chose():
    at = page("views/llm_page.py", model="llama-3.1-8b", hw=["h100-sxm"], wdtype="fp8")
    assert not at.exception
    assert at.selectbox(key="adtype").value == "auto"
    assert any("math fp8 (auto): fp8 weights run W8A8" in str(e.value) for e in at.info)
    serving = page("views/serving_page.py", model="llama-3.1-8b", hw=["h100-sxm", "a100-sxm-80gb"], wdtype="fp8")
    assert not serving.exception
    assert any("fp8, W8A8, on NVIDIA H100 SXM5 80GB; bf16, weight-only" in str(c.value) for c in serving.caption)


def test_an_engines_host_work_on_datasheet_roofs_is_not_called_the_ideal_bound():
    """vLLM's host work on an MI300X (no kernel tables): a 4.33 ms step read "(ideal bound,
    datasheet roofs)" beside a 1.01 ms device time, and the page hid the ideal bound."""
    import subprocess
    import sys

    argv = ["analyze", "--model", "llama-3.2-1b", "--hardware", "mi300x", "--phase", "decode", "--batch", "64"]
    argv += ["--seq-len", "1024", "--engine", "vllm"]
    out = subprocess.run([sys.executable, "-m", "roofline", *argv], capture_output=True, text=True, check=True).stdout
    step = next(line for line in out.splitlines() if line.startswith("step:"))
    assert "expected (datasheet roofs and the engine's host work); ideal bound 1.01 ms" in step
    assert "note: AMD Instinct MI300X: datasheet roofs, no vLLM kernel tables for it" in out
    assert "vLLM's host work per step applies, so the times are not the ideal bound" in out
    at = page("views/llm_page.py", model="llama-3.2-1b", hw=["mi300x"], engine="vllm", batch="64")
    assert not at.exception
    tpot = next(m for m in at.metric if m.label == "TPOT")
    assert tpot.delta.startswith("ideal bound")
    plain = page("views/llm_page.py", model="llama-3.2-1b", hw=["mi300x"], batch="64")
    assert not next(m for m in plain.metric if m.label == "TPOT").delta


def test_a_ranking_on_ideal_bounds_leads_with_the_figure_it_is_ranked_on():
    from dashboard.advisor_view import ranking_table

    common = dict(ranked_on="ideal bound", bound="memory", fits=True, smallest_tp=None, why_not=None)
    ranking = [  # A is on the datasheet, B on measured kernels: ranked on the ideal bound, A first
        dict(name="A", rank=1, time_s=3e-3, ideal_time_s=1e-3, roofs="datasheet", tokens_per_s=300.0,
             tokens_per_s_per_watt=0.3, **common),
        dict(name="B", rank=2, time_s=2e-3, ideal_time_s=1.5e-3, roofs="engine-measured", tokens_per_s=500.0,
             tokens_per_s_per_watt=0.5, **common),
    ]  # fmt: skip
    frame, _ = ranking_table(ranking, "latency")
    assert list(frame.columns[:3]) == ["device", "ideal bound", "#"]
    # A, on the datasheet alone beside measured kernels, has no expected figure: n/a, not a faster-looking one.
    assert list(frame["ideal bound"]) == ["1 ms", "1.5 ms"] and list(frame["expected time"]) == ["n/a", "2 ms"]
    frame, _ = ranking_table(ranking, "throughput")
    # The ideal rate: 300 tokens/s at 3 ms is 900 at its 1 ms bound; 500 at 2 ms is 666.7 at 1.5 ms.
    assert list(frame.columns[:3]) == ["device", "ideal tokens/s", "#"]
    assert list(frame["ideal tokens/s"]) == pytest.approx([900.0, 500 * 2 / 1.5])
    assert frame["expected tokens/s"].isna().tolist() == [True, False] and frame["expected tokens/s"][1] == 500.0
