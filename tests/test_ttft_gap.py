"""benchmarks.ttft_gap groups the accuracy report's low-load runs as its docstring says (medians
worked by hand)."""

from __future__ import annotations

import pytest

from benchmarks.ttft_gap import gaps


def _run(
    model,
    engine,
    isl,
    clients,
    measured_ttft,
    simulated_ttft,
    measured_tpot=10.0,
    simulated_tpot=9.0,
    split=False,
    warmup=2,
):
    return {
        "client_warmup": warmup,
        "model": model,
        "engine": engine,
        "isl": isl,
        "concurrency": clients,
        "measured_ttft_ms": measured_ttft,
        "tables_ttft_ms": simulated_ttft,
        "measured_tpot_ms": measured_tpot,
        "tables_tpot_ms": simulated_tpot,
        "host_fit_split": split,
    }


def test_groups_by_engine_model_kind_and_prompt_length_at_low_load():
    results = [
        _run("deepseek-r1", "sglang", 1024, 4, 260.0, 52.0),  # gap 208
        _run("deepseek-r1", "sglang", 1024, 8, 300.0, 100.0, 10.0, 8.0),  # gap 200, TPOT 0.8
        _run("deepseek-r1", "sglang", 1024, 2, 150.0, 50.0, 10.0, 7.0),  # gap 100, TPOT 0.7
        _run("llama-3.1-70b", "vllm", 8192, 4, 330.0, 300.0),  # dense, long prompt: gap 30
        _run("llama-3.1-70b", "vllm", 1024, 64, 900.0, 100.0),  # too many clients: left out
        _run("llama-3.1-70b", "vllm", 1024, 4, 90.0, 50.0, split=True),  # the host fit's split: left out
        {**_run("llama-3.1-70b", "vllm", 1024, 4, 90.0, 50.0), "tables_ttft_ms": None},  # not simulated
    ]
    found = gaps(results, most_clients=8)
    assert set(found) == {("sglang", "MoE", "<= 2,048", "2/client"), ("vllm", "dense", "> 2,048", "2/client")}
    moe = found[("sglang", "MoE", "<= 2,048", "2/client")]
    assert moe["runs"] == 3
    assert moe["gap_ms_p50"] == pytest.approx(200.0)  # median of 100, 200, 208
    assert moe["gap_ms_p10"] == pytest.approx(120.0)  # numpy's linear percentile: 100 + 0.2 x (200 - 100)
    assert moe["tpot_ratio_p50"] == pytest.approx(0.8)  # median of 0.7, 0.8, 0.9
    dense = found[("vllm", "dense", "> 2,048", "2/client")]
    assert (dense["runs"], dense["gap_ms_p50"]) == (1, pytest.approx(30.0))


def test_splits_runs_by_the_clients_warm_up():
    results = [
        _run("deepseek-r1", "sglang", 1024, 4, 400.0, 60.0, warmup=0),  # gap 340, no warm-up
        _run("deepseek-r1", "sglang", 1024, 4, 180.0, 60.0),  # gap 120, warmed up
        _run("deepseek-r1", "sglang", 1024, 4, 200.0, 60.0, warmup=None),  # gap 140, no client recorded
        {k: v for k, v in _run("deepseek-r1", "sglang", 1024, 4, 90.0, 60.0).items() if k != "client_warmup"},
    ]
    found = gaps(results, most_clients=8)
    by = {key[3]: g["gap_ms_p50"] for key, g in found.items()}
    # An older report without the field counts its runs as unknown, beside the unrecorded client's.
    assert by == {"none": pytest.approx(340.0), "2/client": pytest.approx(120.0), "?": pytest.approx(85.0)}
