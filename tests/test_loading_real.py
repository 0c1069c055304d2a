"""Real checkpoint loads of SmolLM2 135M on this CPU, each way, their peak memory against the
prediction (in fresh child processes; a file of its own so a second test worker can run it)."""

from __future__ import annotations

import pytest

from roofline.models import get_model


@pytest.fixture(scope="module")
def smollm2():
    return get_model("smollm2-135m")


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
