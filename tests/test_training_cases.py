"""Training setups that once failed: MLA models with full fine-tuning and LoRA, and ZeRO stages
whose peak must shrink as they shard more."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.training import PHASES, TrainSetup, levers, linear_shapes, lora_params, plan_to_fit, training_memory

ROOT = Path(__file__).resolve().parent.parent
H100 = get_hardware("h100-sxm")
MLA_MODELS = ("deepseek-v3", "deepseek-r1", "kimi-k2")


@pytest.mark.parametrize("name", MLA_MODELS)
def test_full_fine_tuning_of_an_mla_model_checks_no_lora_targets(name):
    s = TrainSetup(get_model(name), method="full")
    names = [lever.name for lever in levers(s, H100)]
    # The LoRA levers adapt matrices an MLA model has: its attention output projection.
    assert "LoRA r=16 on o" in names and "QLoRA (NF4 base) r=16 on o" in names
    steps, _ = plan_to_fit(s, H100)
    assert all("on q, v" not in step for step in steps)


def test_lora_on_mla_defaults_to_the_output_projection():
    m = get_model("deepseek-v3")
    s = TrainSetup(m, method="lora", lora_rank=16)
    assert s.lora_targets == ("o",)
    # o: 128 heads x 128 (v_head_dim) = 16,384 in, 7,168 out, 61 layers: 16 x (16,384 + 7,168) x 61.
    assert lora_params(m, 16, s.lora_targets) == 16 * (16_384 + 7_168) * 61
    assert TrainSetup(get_model("llama-3.1-8b"), method="lora").lora_targets == ("q", "v")


def test_lora_on_mla_names_the_targets_it_allows():
    with pytest.raises(ValueError, match="allowed for DeepSeek-V3: o, gate, up, down"):
        TrainSetup(get_model("deepseek-v3"), method="lora", lora_targets=("q", "v"))


def test_shared_and_routed_experts_of_one_width_are_both_counted():
    # DeepSeek-V3: 58 MoE layers of 256 routed experts and 1 shared expert, all 2,048 wide, and 3
    # dense layers 18,432 wide. LoRA r on down: r x (in + out) per matrix.
    m = get_model("deepseek-v3")
    shapes = linear_shapes(m)
    assert sum(c for k, (_, _, c) in shapes.items() if k.startswith("down")) == 3 + 58 * 256 + 58
    assert lora_params(m, 1, ("down",)) == 3 * (18_432 + 7_168) + (58 * 256 + 58) * (2_048 + 7_168)


@pytest.mark.parametrize("name", MLA_MODELS)
@pytest.mark.parametrize("method", [[], ["--method", "full"], ["--method", "lora"]])
def test_train_cli_on_mla_models(name, method):
    proc = subprocess.run(
        [sys.executable, "-m", "roofline", "train", "--model", name, *method, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["method"] == (method[1] if method else "full")


MODEL_STATES = ("weights", "master weights (fp32)", "optimizer state", "gradients")


def model_states(s: TrainSetup) -> dict[str, float]:
    """Weights, master copy, optimizer state and gradients per device at each moment of the step."""
    by_phase = training_memory(s).by_phase
    return {phase: float(sum(by_phase[phase].get(k, 0.0) for k in MODEL_STATES)) for phase in PHASES}


def test_zero_2_holds_only_its_gradient_partition_by_hand():
    # SmolLM2 135M: P = 28,311,552 (tied embedding) + 30 x 885,888 (attention, norms)
    # + 30 x 2,654,208 (MLP) + 576 (final norm) = 134,515,008. Autocast (amp) keeps fp32 weights
    # and gradients; AdamW 8 B per parameter, sharded over 8 devices by ZeRO-1 and 2: P per device.
    p = 134_515_008
    m = get_model("smollm2-135m")
    assert m.param_counts()["total"] == p
    one = model_states(TrainSetup(m, precision="amp", dp=8, zero=1))
    two = model_states(TrainSetup(m, precision="amp", dp=8, zero=2))
    # No accumulation: no gradient exists in forward; backward makes them.
    assert one["forward end"] == two["forward end"] == 4 * p + p
    assert one["backward start"] == two["backward start"] == 4 * p + p
    # ZeRO-1 holds every fp32 gradient at the end of backward; ZeRO-2 reduce-scatters them and
    # keeps its eighth.
    assert one["backward end"] == one["optimizer step"] == 4 * p + p + 4 * p
    assert two["backward end"] == two["optimizer step"] == 4 * p + p + 4 * p / 8
    # Accumulating over micro-batches, the gradients (a ZeRO-2 partition) persist through forward.
    accumulating = model_states(TrainSetup(m, precision="amp", dp=8, zero=2, global_batch=32))
    assert accumulating["forward end"] == 4 * p + p + 4 * p / 8


def test_zero_2_peak_is_no_higher_than_zero_1():
    m = get_model("llama-3.1-8b")
    peaks = [float(training_memory(TrainSetup(m, precision="amp", dp=8, zero=z)).peak_bytes) for z in (0, 1, 2, 3)]
    assert peaks[3] <= peaks[2] <= peaks[1] <= peaks[0]


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(["smollm2-135m", "llama-3.1-8b", "qwen2.5-7b", "deepseek-v3", "gpt-oss-20b"]),
    precision=st.sampled_from(["mixed", "amp", "fp32"]),
    fp32_grads=st.booleans(),
    optimizer=st.sampled_from(["adamw", "adamw-8bit", "sgd-momentum", "adafactor"]),
    fused=st.booleans(),
    method=st.sampled_from(["full", "lora", "qlora"]),
    dp=st.sampled_from([2, 4, 8, 64]),
    accumulate=st.booleans(),
    offload=st.booleans(),
)
# ZeRO-3 gathers a layer as stored: NF4 under QLoRA, not at the fp32 of autocast's gradients.
@example("gpt-oss-20b", "amp", False, "adamw", True, "qlora", 2, False, False)
def test_each_zero_stage_holds_no_more_model_state_than_the_one_before(
    name, precision, fp32_grads, optimizer, fused, method, dp, accumulate, offload
):
    base = TrainSetup(
        get_model(name),
        seq_len=512,
        precision=precision,
        fp32_grads=fp32_grads and precision == "mixed",
        optimizer=optimizer,
        fused_optimizer=fused,
        method=method,
        dp=dp,
        global_batch=4 * dp if accumulate else None,
        offload_optimizer=offload,
    )
    stages = [model_states(replace(base, zero=z)) for z in (0, 1, 2, 3)]
    for phase in PHASES:
        z0, z1, z2, z3 = (stage[phase] for stage in stages)
        assert z3 <= z2 <= z1 <= z0, phase


@pytest.mark.parametrize("precision", ["amp", "mixed"])
def test_train_cli_zero_2_peak_against_zero_1(precision):
    peaks = []
    for zero in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-m", "roofline", "train", "--model", "llama-3.1-8b", "--precision", precision]
            + ["--dp", "8", "--zero", zero, "--json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        peaks.append(json.loads(proc.stdout)["memory"]["peak_bytes"])
    assert peaks[1] <= peaks[0]


def test_train_says_no_micro_batch_fits_rather_than_zero(capsys):
    """70B on a 24 GB L4 read "the largest micro-batch that fits: 0"."""
    from roofline.cli import main

    assert main(["train", "--model", "llama-3.1-70b", "--hardware", "l4"]) == 0
    assert "does NOT fit; the largest micro-batch that fits: none (not even 1)" in capsys.readouterr().out


def test_training_on_a_device_with_no_published_peak_says_so(capsys):
    """The M3 Ultra publishes no peak in any dtype: the error had ended 'allowed dtypes for m3-ultra: '."""
    from roofline.cli import main

    assert main(["train", "--model", "llama-3.1-8b", "--hardware", "m3-ultra"]) == 2
    err = capsys.readouterr().err
    assert "m3-ultra has no published peak in any dtype: a training step cannot be timed on it" in err
    assert "allowed dtypes" not in err


def test_a_lora_target_named_twice_is_refused():
    """ "q,q,q" had counted the adapter's activations three times and its parameters once."""
    from roofline.models import get_model
    from roofline.training import TrainSetup

    with pytest.raises(ValueError, match="lora_targets: q named more than once; a matrix takes one adapter"):
        TrainSetup(get_model("llama-3.1-8b"), method="lora", lora_targets=("q", "q", "v"))


def test_flags_another_setting_makes_moot_are_refused(capsys):
    """--fp32-grads beside pure-bf16 and --lora-rank beside full fine-tuning had changed nothing, in silence."""
    from roofline.cli import main
    from roofline.models import get_model
    from roofline.training import TrainSetup

    with pytest.raises(ValueError, match="fp32_grads: sets mixed precision's gradients; pure-bf16 fixes its own"):
        TrainSetup(get_model("llama-3.1-8b"), precision="pure-bf16", fp32_grads=True)
    assert TrainSetup(get_model("llama-3.1-8b"), precision="mixed", fp32_grads=True).fp32_grads
    assert main(["train", "--model", "llama-3.1-8b", "--method", "full", "--lora-rank", "8"]) == 2
    assert "--lora-rank, --lora-targets: set LoRA's adapters; --method full" in capsys.readouterr().err
    assert main(["train", "--model", "llama-3.1-8b", "--method", "lora", "--lora-rank", "8", "--json"]) == 0
