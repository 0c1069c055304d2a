"""FP8 weights' scaling (Precision.fp8_scaling): one scale per tensor or one per 128 x 128 block
picks the engine kernels a step is read at; "auto" is the model's own published FP8 checkpoint's
(model_db's fp8_checkpoint, each with its source)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from roofline.engine import evaluate
from roofline.format import fmt_seconds
from roofline.hardware import get_hardware
from roofline.models import get_model, load_models
from roofline.ops import step_ops
from roofline.roofs import kernel_tables
from roofline.serving import Traffic, best_under_targets
from roofline.settings import Settings
from roofline.silicon_sample import block_fp8_checkpoints
from roofline.tables.source import KernelTables
from roofline.workload import Precision, Workload
from tests.page_helpers import ROOT, page

H100 = get_hardware("h100-sxm")
QWEN_MOE = get_model("qwen3-30b-a3b")
FP8 = ("fp8", "fp8", "fp8")


def _decode(model, scaling: str, batch: int = 64, tp: int = 1) -> Workload:
    return Workload(model, "decode", batch, 2000, precision=Precision(*FP8, fp8_scaling=scaling), tp=tp)


def _op(w: Workload, name: str):
    return next(op for op in step_ops(w) if op.name == name)


def test_auto_is_the_models_own_checkpoint_and_bad_values_are_named():
    assert Precision(*FP8).resolved(QWEN_MOE).fp8_scaling == "block"  # Qwen/Qwen3-30B-A3B-FP8
    assert Precision(*FP8).resolved(get_model("deepseek-v3")).fp8_scaling == "block"
    assert Precision(*FP8).resolved(get_model("llama-3.1-70b")).fp8_scaling == "per-tensor"  # NVIDIA's ModelOpt
    assert Precision(*FP8).resolved(get_model("llama-3.1-8b")).fp8_scaling == "per-tensor"  # none recorded
    assert Precision(*FP8, fp8_scaling="per-tensor").resolved(QWEN_MOE).fp8_scaling == "per-tensor"  # a choice stays
    assert _decode(QWEN_MOE, "auto").kernel_precision.fp8_scaling == "block"
    with pytest.raises(ValueError, match="fp8 scaling: 'channel' is not allowed; allowed: auto, per-tensor, block"):
        Precision(*FP8, fp8_scaling="channel")
    # The label names the scaling where there are fp8 weights to scale.
    assert Precision(*FP8, fp8_scaling="block").label == "weights fp8 (block scaling), math fp8, KV fp8"
    assert Precision("bf16", "bf16", "fp8", fp8_scaling="block").label == "weights bf16, math bf16, KV fp8"


def test_every_recorded_checkpoint_has_its_source_and_the_sample_reads_them():
    recorded = {m.id: m.fp8_checkpoint for m in load_models().values() if m.fp8_checkpoint}
    assert {"qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-r1", "deepseek-v3", "kimi-k2"} <= set(recorded)
    for checkpoint in recorded.values():
        words = {"block": "block", "per-tensor": "per tensor"}[checkpoint.scaling]  # the source says which
        assert checkpoint.source.url.startswith("https://") and words in checkpoint.source.name.lower()
    # The silicon sample's block checkpoints are the ones model_db records (one list, not two).
    assert {"Qwen/Qwen3-235B-A22B-FP8", "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"} <= block_fp8_checkpoints()
    assert "Qwen/Qwen3-32B" not in block_fp8_checkpoints()  # the bf16 repository, quantized at load


def test_block_scaling_reads_the_block_tables_and_the_datasheet_does_not_see_it():
    tables = kernel_tables("vllm", "h100-sxm")
    per_tensor, block = _decode(QWEN_MOE, "per-tensor"), _decode(QWEN_MOE, "block")
    # The experts: the block-scaled op reads what the block table gives the per-tensor op's shape.
    name = "MoE experts gate+up"
    forced = KernelTables(tables.predictor, moe_dtype="fp8_block").op_seconds(_op(per_tensor, name))
    read = tables.op_seconds(_op(block, name))
    np.testing.assert_allclose(read.seconds, forced.seconds)
    assert read.label == forced.label
    plain = tables.op_seconds(_op(per_tensor, name))
    assert not np.allclose(plain.seconds, read.seconds)
    # The dense GEMMs likewise, from the fp8_block GEMM table.
    dense = get_model("qwen3-32b")
    qkv_block = _op(_decode(dense, "block", 16), "QKV projection")
    qkv_tensor = _op(_decode(dense, "per-tensor", 16), "QKV projection")
    sglang = kernel_tables("sglang", "h100-sxm")
    np.testing.assert_allclose(
        sglang.op_seconds(qkv_block).seconds,
        KernelTables(sglang.predictor, gemm_dtype="fp8_block").op_seconds(qkv_tensor).seconds,
    )
    # On the datasheet a 128 x 128 block's one scale is not counted: the same step either way.
    ideal = Settings().ceilings(H100, serving=False)
    assert evaluate(step_ops(per_tensor), ideal).total_time_s == evaluate(step_ops(block), ideal).total_time_s


def test_the_moe_step_under_vllm_on_an_h100():
    """vLLM's H100 tables time a per-tensor fp8 MoE layer (CUTLASS) far slower than a block-scaled one
    (Triton) at 64 tokens: the same fp8 step is then slower than bf16, which the block checkpoint is not."""
    roofs = Settings(engine="vllm").ceilings(H100, serving=False)

    def step_s(precision: Precision) -> float:
        return float(
            evaluate(step_ops(Workload(QWEN_MOE, "decode", 64, 2000, precision=precision)), roofs).total_time_s
        )

    bf16 = step_s(Precision("bf16", "bf16", "fp8"))
    assert step_s(Precision(*FP8, fp8_scaling="block")) < bf16 < step_s(Precision(*FP8, fp8_scaling="per-tensor"))
    assert step_s(Precision(*FP8)) == step_s(Precision(*FP8, fp8_scaling="block"))  # auto: Qwen's checkpoint


def test_the_cheapest_setup_scales_fp8_as_asked():
    plans = {
        s: best_under_targets(
            QWEN_MOE, [H100], Traffic(1024, 256), 2.0, 0.05, Settings(engine="vllm"), tps=(1,), fp8_scaling=s
        )[0]
        for s in ("per-tensor", "block")
    }
    assert plans["per-tensor"].point != plans["block"].point


def test_the_command_line_takes_the_scaling_and_refuses_another():
    base = [sys.executable, "-m", "roofline", "analyze", "--phase", "decode", "--batch", "64", "--seq-len", "2000"]
    base += ["--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--weight-dtype", "fp8", "--act-dtype", "fp8"]
    base += ["--engine", "vllm"]
    out = subprocess.run([*base, "--fp8-scaling", "per-tensor"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "weights fp8 (per-tensor scaling), math fp8" in out.stdout
    auto = subprocess.run(base, capture_output=True, text=True, cwd=ROOT)
    assert "weights fp8 (block scaling)" in auto.stdout  # Qwen's own FP8 checkpoint
    bad = subprocess.run([*base, "--fp8-scaling", "channel"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--fp8-scaling: invalid choice: 'channel'" in bad.stderr
    assert "Traceback" not in bad.stderr


STEP = {
    "hw": ["h100-sxm"],
    "engine": "vllm",
    "llm": "qwen3-30b-a3b",
    "llm_phase": "decode",
    "llm_batch": "64",
    "llm_seq": "2000",
    "wdtype": "fp8",
    "adtype": "fp8",
    "kvdtype": "fp8",
}


@pytest.mark.parametrize("scaling", ["per-tensor", "block"])
def test_the_roofline_page_times_the_step_at_the_scaling_in_its_url(scaling):
    at = page("views/roofline_page.py", **STEP, fp8scale=scaling)
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    roofs = Settings(launch_overhead_s=0.0, engine="vllm").ceilings(H100, serving=False)
    time_s = evaluate(step_ops(_decode(QWEN_MOE, scaling)), roofs).total_time_s
    caption = next(c.value for c in at.caption if "of device time per step" in c.value)
    assert f"weights fp8 ({scaling} scaling), math fp8, KV fp8" in caption
    assert f": {fmt_seconds(time_s)} of device time per step" in caption


def test_a_bad_scaling_in_the_url_is_named_and_dropped():
    at = page("views/roofline_page.py", **STEP, fp8scale="channel")
    assert not at.exception
    said = " ".join(w.value for w in at.warning)
    assert "fp8scale" in said and "per-tensor" in said
    caption = next(c.value for c in at.caption if "of device time per step" in c.value)
    assert "weights fp8 (block scaling)" in caption  # the default, auto: Qwen's own checkpoint


def test_a_config_json_says_its_own_scaling():
    """A user's FP8 checkpoint brings its scaling: quantization_config's weight_block_size, as vLLM reads it."""
    from roofline.datafiles import DataError
    from roofline.hf_config import model_from_hf_config

    config = json.loads((ROOT / "tests/data/hf_configs/deepseek-v3.json").read_text())
    assert model_from_hf_config(config).fp8_checkpoint.scaling == "block"
    assert Precision(*FP8).resolved(model_from_hf_config(config)).fp8_scaling == "block"
    tensor = {**config, "quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}}
    assert model_from_hf_config(tensor).fp8_checkpoint.scaling == "per-tensor"
    assert model_from_hf_config({**config, "quantization_config": {"quant_method": "mxfp4"}}).fp8_checkpoint is None
    assert model_from_hf_config({k: v for k, v in config.items() if k != "quantization_config"}).fp8_checkpoint is None
    for bad in ([128], [0, 128], "128x128", [True, 1]):
        broken = {**config, "quantization_config": {"quant_method": "fp8", "weight_block_size": bad}}
        with pytest.raises(DataError, match="field 'quantization_config.weight_block_size' must be two positive"):
            model_from_hf_config(broken)
    with pytest.raises(DataError, match="field 'quantization_config' must be an object"):
        model_from_hf_config({**config, "quantization_config": [1]})


def test_the_plan_names_the_scaling_it_searched():
    best = best_under_targets(QWEN_MOE, [H100], Traffic(1024, 256), 2.0, 0.05, tps=(1,), fp8_scaling="per-tensor")[0]
    assert best.weight_dtype == "fp8" and best.weights == "fp8 (per-tensor)"  # fp8 is the cheapest here
    # Llama 3.2 1B records no FP8 checkpoint: auto is per-tensor; without fp8 weights no scaling is named.
    plain = best_under_targets(get_model("llama-3.2-1b"), [H100], Traffic(1024, 256), 2.0, 0.05, tps=(1,))[0]
    assert plain.weight_dtype == "fp8" and plain.to_json()["fp8_scaling"] == "per-tensor"
    bf16 = best_under_targets(
        get_model("llama-3.2-1b"), [H100], Traffic(1024, 256), 2.0, 0.05, tps=(1,), precisions=(("bf16", "bf16"),)
    )[0]
    assert bf16.fp8_scaling is None and bf16.weights == "bf16"


def test_the_serving_pages_cheapest_setup_follows_the_pages_scaling():
    """vLLM's per-tensor fp8 MoE kernel on an H100 is slower than bf16, so the cheapest Qwen3 30B-A3B
    setup there is bf16 unless the fp8 weights are block-scaled (Qwen's own FP8 checkpoint)."""
    params = {"model": "qwen3-30b-a3b", "hw": ["h100-sxm"], "engine": "vllm", "view": "Cheapest setup"}
    params |= {"ttft_ms": "500", "tpot_ms": "30"}
    for scaling, weights in (("per-tensor", "bf16 / bf16 / fp8"), ("block", "fp8 (block) / fp8 / fp8")):
        at = page("views/serving_page.py", **params, fp8scale=scaling)
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert any(f"{scaling}-scaled (FP8 weight scaling)" in c.value for c in at.caption)
        assert list(at.dataframe[0].value["weights / math / KV"]) == [weights]


def test_math_narrower_than_its_weights_is_named():
    """fp8 math on bf16 weights is no engine's setup: the note says so and what to set instead."""
    w = Workload(get_model("llama-3.1-8b"), "decode", 8, 1000, precision=Precision("bf16", "fp8", "bf16"))
    _, notes = w.on(H100)
    assert any(n.startswith("fp8 math with bf16 weights") and "set the weight dtype to fp8 for" in n for n in notes)
    # A MoE model's 16-bit experts beside fp8 weights: the experts' field is the one named.
    moe = Workload(QWEN_MOE, "decode", 8, 1000, precision=Precision("fp8", "fp8", "bf16", expert_weight_dtype="bf16"))
    assert any("set the expert weight dtype to fp8" in n for n in moe.on(H100)[1])
    _, fp4 = Workload(w.model, "decode", 8, 1000, precision=Precision("bf16", "fp4", "bf16")).on(get_hardware("b200"))
    assert any("set the weight dtype to nvfp4 or mxfp4" in n for n in fp4)
    for fine in (Precision(*FP8), Precision("int4", "fp8", "bf16"), Precision("bf16", "bf16", "fp8")):
        _, quiet = Workload(w.model, "decode", 8, 1000, precision=fine).on(H100)
        assert not any("math with" in n for n in quiet), fine
    out = subprocess.run(
        [sys.executable, "-m", "roofline", "analyze", "--phase", "decode", "--model", "llama-3.1-8b"]
        + ["--hardware", "h100-sxm", "--act-dtype", "fp8", "--seq-len", "1000"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert "note: fp8 math with bf16 weights" in out.stdout


def test_the_scaling_is_named_beside_the_fp8_part_and_only_there():
    assert Precision("fp8", "fp8", "bf16", expert_weight_dtype="bf16", fp8_scaling="block").label == (
        "weights fp8 (block scaling; experts bf16), math fp8, KV bf16"
    )
    assert Precision("bf16", "bf16", "bf16", expert_weight_dtype="fp8", fp8_scaling="per-tensor").label == (
        "weights bf16 (experts fp8, per-tensor scaling), math bf16, KV bf16"
    )
    bf16 = Workload(QWEN_MOE, "decode", 8, 100, precision=Precision("bf16", "bf16", "bf16")).describe()
    assert bf16["precision"]["fp8_scaling"] is None  # auto resolves to block, but there are no fp8 weights
    assert _decode(QWEN_MOE, "auto").describe()["precision"]["fp8_scaling"] == "block"


def test_a_table_without_the_asked_scaling_says_which_it_read():
    """SGLang's tables time fp8 MoE layers block-scaled only: a per-tensor one is read there, and says so."""
    sglang = kernel_tables("sglang", "h100-sxm")
    read = sglang.op_seconds(_op(_decode(QWEN_MOE, "per-tensor"), "MoE experts gate+up"))
    assert read.label.endswith("no per-tensor fp8 MoE answer in this file: read at its block-scaled fp8 one")
    block = sglang.op_seconds(_op(_decode(QWEN_MOE, "block"), "MoE experts gate+up"))
    assert "answer in this file" not in block.label


def test_a_config_json_in_any_case_or_nested_in_text_config_says_its_scaling():
    from roofline.hf_config import model_from_hf_config

    scout = json.loads((ROOT / "tests/data/hf_configs/llama-4-scout.json").read_text())
    quant = {"quant_method": "FP8", "weight_block_size": [64, 64]}
    nested = {**scout, "text_config": {**scout["text_config"], "quantization_config": quant}}
    checkpoint = model_from_hf_config(nested).fp8_checkpoint
    assert checkpoint.scaling == "block" and "text_config.quantization_config" in checkpoint.source.name
    assert "the kernel tables time 128 x 128 blocks" in checkpoint.source.name  # 64 x 64 is read at those


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "roofline", *args], capture_output=True, text=True, cwd=ROOT)


def test_the_commands_say_the_scaling_and_kv_does_not_take_it():
    qwen = ["--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--weight-dtype", "fp8"]
    kv = _cli("kv", *qwen, "--fp8-scaling", "block")
    assert kv.returncode == 2 and "unrecognized arguments: --fp8-scaling" in kv.stderr  # memory has no kernels
    advise = _cli("advise", "--phase", "decode", "--seq-len", "2000", "--batch", "16", *qwen, "--act-dtype", "fp8")
    assert "TP=1, weights fp8 (block scaling), math fp8, KV bf16; ranked by latency" in advise.stdout
    serve = _cli("serve", *qwen, "--act-dtype", "fp8", "--fp8-scaling", "per-tensor", "--tp", "1", "--json")
    assert json.loads(serve.stdout)["precision"]["fp8_scaling"] == "per-tensor"


def test_the_llm_page_says_where_auto_took_the_scaling_from():
    at = page("views/llm_page.py", model="qwen3-30b-a3b", hw=["h100-sxm"], wdtype="fp8", adtype="fp8", engine="vllm")
    assert not at.exception
    said = " ".join(c.value for c in at.caption)
    assert "FP8 weights read at block-scaled kernels (FP8 weight scaling auto: Qwen/Qwen3-30B-A3B-FP8 is" in said
    for quiet in (
        {"model": "qwen3-30b-a3b"},  # bf16 weights
        {"model": "qwen3-30b-a3b", "wdtype": "fp8", "adtype": "fp8", "engine": "ideal"},  # no kernels read
        {"model": "llama-3.1-8b", "ewdtype": "fp8", "engine": "vllm"},  # a dense model has no experts
    ):
        said = page("views/llm_page.py", hw=["h100-sxm"], **quiet).caption
        assert not any("FP8 weights read at" in c.value for c in said), quiet
