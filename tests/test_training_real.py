"""Real training steps and checkpoint loads of SmolLM2 135M on this CPU, their peak memory
against the prediction (each in a fresh child process; tens of seconds each, so they have a file
of their own that a second test worker can run beside the rest)."""

from __future__ import annotations

import pytest

from roofline.models import get_model
from roofline.training import TrainSetup


@pytest.fixture(scope="module")
def smollm2():
    return get_model("smollm2-135m")


@pytest.mark.parametrize(
    "changes",
    [
        {"seq_len": 128},
        # Long enough that the peak is at the loss's backward, beside every checkpoint: the rebuilt
        # layer comes after the logits' gradients are freed, so it must not be counted there. Six of
        # SmolLM2's 30 layers keep the step short; the peak's moment is the same.
        {"seq_len": 1536, "recompute": "full", "layers": 6},
        {"seq_len": 256, "precision": "amp"},
        {"seq_len": 256, "method": "lora", "lora_targets": ("q", "v")},
        {"seq_len": 128, "precision": "pure-bf16"},
    ],
    ids=["fp32-128", "checkpointing", "amp", "lora", "pure-bf16"],
)
def test_a_real_training_step_peaks_within_10_percent(smollm2, changes):
    pytest.importorskip("torch")
    from roofline.measure.training import measure

    changes = dict(changes)
    model = smollm2.model_copy(update={"num_layers": changes.pop("layers")}) if "layers" in changes else smollm2
    s = TrainSetup(model, **{"micro_batch": 1, "precision": "fp32", **changes})
    r = measure(s, "cpu")
    assert r["time_s"] > 0 and r["trainable"] > 0
    assert abs(r["predicted_peak_bytes"] / r["peak_bytes"] - 1) < 0.10, r


def test_a_real_load_peaks_within_15_percent(smollm2):
    pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from roofline.measure.loading import measure

    rows = measure(smollm2, "bf16")
    assert {r["method"] for r in rows} == {"naive", "fp32-cast", "dtype-first", "meta", "mmap", "sharded"}
    for r in rows:
        assert abs(r["predicted_peak_bytes"] / r["measured_peak_bytes"] - 1) < 0.15, r
    naive = next(r for r in rows if r["method"] == "naive")
    meta = next(r for r in rows if r["method"] == "meta")
    assert naive["measured_peak_bytes"] > 2.5 * meta["measured_peak_bytes"]  # fp32 model + checkpoint vs checkpoint
    # Casting after an fp32 build frees each fp32 tensor as its copy appears: below the fp32 model
    # plus a bf16 one (6 bytes per parameter), above the bf16 model plus the checkpoint (4).
    cast = next(r for r in rows if r["method"] == "fp32-cast")
    assert 2 * meta["measured_peak_bytes"] < cast["measured_peak_bytes"] < 0.8 * naive["measured_peak_bytes"]
