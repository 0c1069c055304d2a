"""The host's cost of an eager step: measured on a host-bound probe of the model (its layers with
tiny matrices), carried by a calibration, and the eager step predicted from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofline.engine import evaluate
from roofline.hardware import get_hardware
from roofline.measure.schema import load_results
from roofline.models import get_model
from roofline.ops import step_ops
from roofline.settings import Settings
from roofline.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
QUICK_RUN = ROOT / "examples" / "h100-sxm-quick-run.json"


def test_the_probe_keeps_the_layers_and_ops_and_shrinks_every_matrix():
    from roofline.measure.host_probe import probe_model

    for model_id in ("llama-3.1-8b", "deepseek-v3", "gpt-oss-20b"):
        m = get_model(model_id)
        tiny = probe_model(m)
        assert (tiny.num_layers, tiny.num_heads, tiny.num_kv_heads) == (m.num_layers, m.num_heads, m.num_kv_heads)
        assert (tiny.moe is None) == (m.moe is None) and (tiny.mla is None) == (m.mla is None)
        w, t = Workload(m, "decode", 1, 64), Workload(tiny, "decode", 1, 64)
        # The same kernels in the same order, so the same launches the engine counts...
        assert [(op.name, op.count, op.launches) for op in step_ops(w)] == [
            (op.name, op.count, op.launches) for op in step_ops(t)
        ]
        # ...with every weight tiny: DeepSeek-V3's 671 B parameters become under 60 M.
        assert tiny.param_counts()["total"] < 60e6


def test_a_calibration_carries_its_host_cost_per_launch_and_kernel_floor():
    results = load_results(QUICK_RUN)
    cal = results.calibration
    assert cal.host_per_launch_s == results.ceilings.eager_host_per_launch_s > 0
    assert cal.kernel_floor_s == results.ceilings.graph_launch_overhead_s
    w = Workload(get_model("llama-3.1-8b"), "decode", 1, 2048)
    ops = step_ops(w)
    c = Settings(calibration=cal).ceilings(get_hardware("h100-sxm"), 1, cuda_graphs=False)
    table = evaluate(ops, c)
    # Eager: every launch the engine counts costs the host the probe's figure.
    launches = sum(op.launches * op.count for op in ops)
    assert float(table.host_time_s) == pytest.approx(launches * cal.host_per_launch_s)
    assert c.kernel_floor_s == cal.kernel_floor_s
    # From a CUDA graph the host pays one replay per step, not the launches.
    graph = Settings(calibration=cal).ceilings(get_hardware("h100-sxm"), 1, cuda_graphs=True)
    assert float(evaluate(ops, graph).host_time_s) < 1e-4


def test_the_shipped_h200_runs_eager_decode_is_predicted_within_25_percent():
    """The H200 quick run: its probe ran in four rounds over the run (22.3 to 33.3 ms, median
    29.5 ms: the host's speed drifted that much within half a minute), and the eager decode it
    measured, 36.0 ms, is predicted at 29.5 ms from that median (0.82x); on the datasheet's host
    costs 0.17x."""
    results = load_results(ROOT / "examples" / "h200-sxm-quick-run.json")
    assert "median of 4 rounds over the run" in results.ceilings.eager_host_probe
    decode = next(s for s in results.steps if s.phase == "decode")
    ratio = decode.predicted_s["calibrated"] / decode.eager.median_s
    assert 0.75 <= ratio <= 1.25, ratio
    assert decode.predicted_s["datasheet"] / decode.eager.median_s < 0.3
    assert results.calibration.hardware_id == "h200-sxm"
    from roofline.cli.render_plans import measure

    assert "host per launch of an eager step 76.2 µs: an eager decode step of llama-3.1-8b" in measure(results)


def test_the_shipped_h100_runs_eager_decode_is_predicted_within_25_percent():
    """The quick run measured Llama 3.1 8B's eager decode (batch 1, 2,048 cached) at 28.2 ms; the
    calibration predicts it from the host-bound probe and the fitted kernel roofs, measured apart.
    Before the probe the prediction was 0.21x (the datasheet's, still shown beside)."""
    results = load_results(QUICK_RUN)
    decode = next(s for s in results.steps if s.phase == "decode")
    ratio = decode.predicted_s["calibrated"] / decode.eager.median_s
    assert 0.75 <= ratio <= 1.25, ratio
    assert decode.predicted_s["datasheet"] / decode.eager.median_s < 0.3
    assert decode.kernels == 837 and decode.graph is not None


def test_the_probe_takes_the_median_of_its_rounds_and_says_their_spread():
    """A virtualised host's speed drifts (an 8B eager decode on an H200 read 20 to 26 ms over five
    interleaved rounds), so the probe runs in rounds over the suite and the median round is the cost."""
    import torch

    from roofline.measure.host_probe import HostProbe

    probe = HostProbe(get_model("llama-3.2-1b"), torch.device("cpu"), "fp32")
    with pytest.raises(ValueError, match="no round"):
        probe.result()
    probe.rounds_s = [0.010, 0.030, 0.012]
    per_launch, what = probe.result()
    assert probe.launches == 195  # what the engine counts for the 1B model's decode step
    assert per_launch == pytest.approx(0.012 / 195)
    assert "12.00 ms (median of 3 rounds over the run: 10.00 to 30.00 ms) over the 195 launches" in what
    assert probe.round(2) > 0 and len(probe.rounds_s) == 4
