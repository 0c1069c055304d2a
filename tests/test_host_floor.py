"""benchmarks.host_floor picks each group's least TPOT and divides it by its step's kernels, as its
docstring and the README say (figures of the shipped report)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.host_floor import floors
from roofline.silicon_sample import load_silicon_sample

REPORT = Path(__file__).resolve().parents[1] / "docs" / "accuracy.json"


def test_the_floor_is_the_least_tpot_of_a_group_at_few_clients_over_its_kernels():
    rows = {r["id"]: r for r in load_silicon_sample()}
    results = json.loads(REPORT.read_text())["steady"]["results"]
    llama = [
        r
        for r in results
        if (r["engine"], r["device"], r["model"], r["tp"]) == ("trtllm", "h100-sxm", "llama-3.1-8b", 8)
    ]
    assert len(llama) > 18  # runs past 16 clients too
    (found,) = [f for f in floors(llama, rows) if f["tp"] == 8]
    few = [r for r in llama if r["concurrency"] <= 16]
    assert found["runs"] == len(few) == 18
    assert found["floor_ms"] == min(r["measured_tpot_ms"] for r in few) == min(r["measured_tpot_ms"] for r in llama)
    # Llama 3.1 8B at TP 8, FP8: 32 layers of the op model's kernels; the README's 452 and 6.0 us.
    assert found["kernels"] == 452
    assert round(found["us_per_kernel"], 2) == round(found["floor_ms"] * 1e3 / 452, 2) == 6.04
    # A run past the clients counted is not a floor, even the least of its group.
    faster = dict(llama[0], concurrency=64, measured_tpot_ms=0.5)
    assert floors([faster, *few], rows)[0]["floor_ms"] == found["floor_ms"]
    # Across three models of one engine version the floor per kernel holds within 7%.
    by_model = {
        f["model"]: f
        for f in floors(results, rows)
        if (f["engine"], f["version"], f["device"], f["tp"]) == ("trtllm", "1.0.0rc3", "h100-sxm", 8)
    }
    per_kernel = [f["us_per_kernel"] for f in by_model.values()]
    assert set(by_model) == {"llama-3.1-8b", "qwen3-32b", "qwen3-235b-a22b"}
    assert [by_model[m]["kernels"] for m in ("llama-3.1-8b", "qwen3-32b", "qwen3-235b-a22b")] == [452, 964, 1884]
    assert max(per_kernel) / min(per_kernel) < 1.07
