"""Training setups that once failed: MLA models with full fine-tuning and LoRA."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.training import TrainSetup, levers, linear_shapes, lora_params, plan_to_fit

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
