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
