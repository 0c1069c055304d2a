"""Real training steps of SmolLM2 135M on this CPU, their peak memory against the prediction:
autocast and LoRA (the other cases are in ``test_training_real.py``; split so that two test
workers share them)."""

from __future__ import annotations

import pytest

from tests.training_real import check_training_peak


@pytest.mark.parametrize(
    "changes",
    [
        {"seq_len": 32, "precision": "amp"},  # 32 tokens: bf16 matmuls are slow on this CPU (test_training_real.py)
        {"seq_len": 128, "method": "lora", "lora_targets": ("q", "v")},
    ],
    ids=["amp", "lora"],
)
def test_a_real_training_step_peaks_within_10_percent(changes, monkeypatch):
    # One thread in the measuring child: two test workers share two cores (its peak is the same).
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    check_training_peak(changes)
