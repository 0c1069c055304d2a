"""The memory model against vLLM's own start-up logs: every log's KV-cache budget within 3%, and
the term that sets most of the activation peak (the sampler's dummy run) worked by hand."""

from __future__ import annotations

import pytest

from roofline.cli import main
from roofline.memory import SAMPLER_BYTES_PER_LOGIT, workspace_bytes
from roofline.models import get_model
from roofline.settings import Settings
from roofline.startup_logs import load_logs, score
from roofline.workload import Precision

GIB = 2**30


def test_every_logs_kv_budget_within_3_percent():
    report = score()
    assert report["logs"] == 13
    for row in report["rows"]:
        assert abs(row["kv_cache_error"]) <= 0.03, row
        assert row["source"].startswith("https://github.com/llm-d-incubation/llm-d-planner/blob/")


def test_the_sampler_sets_the_activation_peak_of_a_large_vocabulary():
    # 1,024 rows x 128,256 tokens x (4 B fp32 logits + 4 B sorted values + 8 B int64 indices)
    # = 2,101,346,304 B = 1.957 GiB; vLLM v0.19 logs 1.89 GiB for Llama 3.1 8B at TP 1 and at TP 2.
    assert SAMPLER_BYTES_PER_LOGIT == 16
    llama = get_model("llama-3.1-8b")
    settings = Settings(max_num_seqs=1024, max_batched_tokens=8192)  # the logs' (vLLM's defaults on an H100)
    for tp in (1, 2):
        assert workspace_bytes(llama, Precision(), tp, settings) == 1024 * 128_256 * 16
    # Mixtral's 32,000-token vocabulary leaves the forward pass of 8,192 tokens the larger.
    mixtral = get_model("mixtral-8x7b")
    assert workspace_bytes(mixtral, Precision(), 2, settings) > 1024 * 32_000 * 16


def test_a_multimodal_checkpoints_vision_tower_is_loaded_with_it():
    from roofline.memory import weight_bytes_per_device

    gemma = get_model("gemma-3-27b")
    without = gemma.model_copy(update={"vision_params_b": None})
    # 0.417 B parameters at 2 bytes: 834,000,000 B more on one device, half each at TP 2.
    assert weight_bytes_per_device(gemma, Precision()) - weight_bytes_per_device(without, Precision()) == pytest.approx(
        834e6
    )
    assert weight_bytes_per_device(gemma, Precision(), 2) - weight_bytes_per_device(
        without, Precision(), 2
    ) == pytest.approx(417e6)


def test_the_logs_are_read_with_their_settings():
    logs = {log.log: log for log in load_logs()}
    assert logs["A.13"].memory_utilization == 0.9 and logs["A.13"].expert_weight_dtype == "mxfp4"
    assert logs["A.2"].kv_dtype == "fp8" and logs["A.2"].kv_cache_tokens == 2 * logs["A.1"].kv_cache_tokens


def test_validate_memory_command(capsys):
    assert main(["validate", "--memory"]) == 0
    out = capsys.readouterr().out
    assert "13 of 13 logs within 3%" in out and "A.8" in out
