"""Real training steps of SmolLM2 135M on this CPU, their peak memory against the prediction:
fp32, full recompute and pure bf16 (each in a fresh child process; tens of seconds each, so the
cases are split over two files that two test workers run side by side: the rest are in
``test_training_real_mixed.py``)."""

from __future__ import annotations

import pytest

from tests.training_real import check_training_peak


@pytest.mark.parametrize(
    "changes",
    [
        {"seq_len": 128},
        # Long enough that the peak is at the loss's backward, beside every checkpoint: the rebuilt
        # layer comes after the logits' gradients are freed, so it must not be counted there. Six of
        # SmolLM2's 30 layers keep the step short; the peak's moment is the same.
        {"seq_len": 1536, "recompute": "full", "layers": 6},
        # bf16 matmuls run at about 1 GFLOP/s on a CPU without AVX-512 BF16 (the logits' alone
        # take seconds), so the bf16 cases run 32 tokens: the step holds the same kinds of tensors.
        {"seq_len": 32, "precision": "pure-bf16"},
    ],
    ids=["fp32-128", "checkpointing", "pure-bf16"],
)
def test_a_real_training_step_peaks_within_10_percent(changes, monkeypatch):
    # One thread in the measuring child: two test workers share two cores (its peak is the same).
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    check_training_peak(changes)
