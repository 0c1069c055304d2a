"""Roofline math and the GEMM workload, against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.engine import Ceilings, Op, evaluate, evaluate_devices, time_terms, unpublished_peaks
from roofline.hardware import get_hardware
from roofline.matmul import log_sweep_values, matmul_counts, matmul_op, matmul_sweep

H100 = Ceilings.from_hardware(get_hardware("h100-sxm"), launch_overhead_s=4e-6)


def test_ridge_point_h100_bf16():
    # 989.4e12 FLOP/s / 3.35e12 B/s = 295.343... FLOP/B
    assert H100.ridge_intensity("bf16") == pytest.approx(989.4 / 3.35)
    assert H100.ridge_intensity("bf16") == pytest.approx(295.3433, rel=1e-5)
    # fp8 doubles the peak at the same bandwidth: 1978.9 / 3.35 = 590.716
    assert H100.ridge_intensity("fp8") == pytest.approx(590.716, rel=1e-5)


def test_attainable_is_min_of_the_two_roofs():
    # At 10 FLOP/B: 3.35e12 * 10 = 33.5 TFLOP/s (below the 989.4 roof).
    assert H100.attainable_flops_per_s(10.0, "bf16") == pytest.approx(33.5e12)
    # At 1000 FLOP/B: 3350 TFLOP/s of bandwidth, capped by the 989.4 peak.
    assert H100.attainable_flops_per_s(1000.0, "bf16") == pytest.approx(989.4e12)


def test_gemm_4096_cubed_bf16_on_h100():
    op = matmul_op(4096, 4096, 4096, "bf16")
    # FLOPs: 2 * 4096^3 = 2 * 68,719,476,736 = 137,438,953,472
    assert op.flops == 137_438_953_472
    # bytes: (4096*4096 A + 4096*4096 B) * 2 B + 4096*4096 C * 2 B = 3 * 16,777,216 * 2 = 100,663,296
    assert op.bytes == 100_663_296
    # intensity: 137,438,953,472 / 100,663,296 = 1365.33 FLOP/B (4096 / 3)
    assert op.intensity == pytest.approx(4096 / 3)
    table = evaluate([op], H100)
    # compute: 137,438,953,472 / 989.4e12 = 138.911 us; memory: 100,663,296 / 3.35e12 = 30.048 us
    assert table.terms_s[0, 0] == pytest.approx(138.911e-6, rel=1e-5)
    assert table.terms_s[1, 0] == pytest.approx(30.048e-6, rel=1e-4)
    assert table.time_s[0] == pytest.approx(138.911e-6, rel=1e-5)
    assert table.bounds == ["compute"]


def test_gemv_is_memory_bound():
    # M=1, N=K=4096 bf16: FLOPs 2*4096*4096 = 33,554,432; bytes (4096 + 16,777,216 + 4096) * 2 = 33,570,816
    op = matmul_op(1, 4096, 4096, "bf16")
    assert op.flops == 33_554_432 and op.bytes == 33_570_816
    table = evaluate([op], H100)
    # 33,570,816 / 3.35e12 = 10.021 us > 4 us launch > 33.9 ns compute
    assert table.time_s[0] == pytest.approx(10.0211e-6, rel=1e-4)
    assert table.bounds == ["memory"]


def test_tiny_gemm_is_overhead_bound():
    # 64^3 bf16: 524,288 FLOPs (0.53 ns), 24,576 B (7.3 ns) - both far below dispatching it: a
    # linear layer costs the host 18.5/10.6 of a tiny op, 4 us x 1.745 = 6.981 us, and the device
    # waits for the host.
    table = evaluate([matmul_op(64, 64, 64, "bf16")], H100)
    assert table.bounds == ["overhead"] and bool(table.host_bound)
    assert table.effective_s[0] == table.total_time_s == pytest.approx(4e-6 * 18.5 / 10.6)
    # Replayed from a CUDA graph the host cost is gone, but a kernel still takes its 1.2 us floor:
    # still overhead (latency), not memory.
    graphs = Ceilings.from_hardware(get_hardware("h100-sxm"), launch_overhead_s=0.0)
    table = evaluate([matmul_op(64, 64, 64, "bf16")], graphs)
    assert table.bounds == ["overhead"] and table.time_s[0] == pytest.approx(1.2e-6)
    # Without that floor the same GEMM is memory-bound.
    bare = Ceilings.from_hardware(get_hardware("h100-sxm"), launch_overhead_s=0.0, kernel_floor_s=0.0)
    assert evaluate([matmul_op(64, 64, 64, "bf16")], bare).bounds == ["memory"]


def test_an_eager_step_costs_the_longer_of_host_and_device():
    # Launches are asynchronous: two ops of device time 10 us and 1 us, dispatched at 4 us each
    # (tiny ops, factor 1): host 8 us < device 11 us -> the step takes 11 us, device-bound.
    def op(name: str, seconds: float) -> Op:
        return Op(name, flops=0.0, dtype="bf16", act_bytes=seconds * 3.35e12, launches=1, group="residual")

    c = Ceilings.from_hardware(get_hardware("h100-sxm"), launch_overhead_s=4e-6, kernel_floor_s=0.0)
    table = evaluate([op("a", 10e-6), op("b", 1e-6)], c)
    assert table.step_time_s == pytest.approx(11e-6) and not table.host_bound
    assert table.bounds == ["memory", "memory"]
    # ten 1 us ops: host 40 us > device 10 us -> 40 us, overhead-bound, every op too
    table = evaluate([op(f"x{i}", 1e-6) for i in range(10)], c)
    assert table.step_time_s == pytest.approx(40e-6) and table.host_bound
    assert set(table.bounds) == {"overhead"} and table.total_bound == "overhead"
    assert sum(table.time_by_regime_s().values()) == pytest.approx(40e-6)


def test_communication_term_and_count():
    # An all-reduce of 16 MiB over TP=2 on NVLink 4: each GPU sends 2*(2-1)/2 * 16,777,216 = 16,777,216 B
    # at 450e9 B/s one way = 37.282 us, plus 10 us latency = 47.282 us; 32 layers -> 1.51 ms.
    op = Op(
        "all-reduce", flops=0.0, dtype="bf16", act_bytes=0.0, comm_bytes=16_777_216, collectives=1, launches=1, count=32
    )
    table = evaluate([op], H100)
    assert table.bounds == ["communication"]
    assert table.time_s[0] == pytest.approx(32 * (16_777_216 / 450e9 + 10e-6))
    assert table.comm_bytes[0] == 32 * 16_777_216


def test_counts_multiply_totals():
    op = matmul_op(1, 4096, 4096, "bf16")
    one = evaluate([op], H100)
    many = evaluate([Op(**{**op.__dict__, "count": 32})], H100)
    assert many.flops[0] == 32 * one.flops[0]
    assert many.time_s[0] == pytest.approx(32 * one.time_s[0])


def test_weight_only_bytes_follow_the_dtype():
    fp8 = matmul_op(8, 8192, 8192, "fp8")
    # fp8 inputs are 1 byte, the result is written in bf16 (2 bytes).
    assert fp8.bytes == (8 * 8192 + 8192 * 8192) * 1 + 8 * 8192 * 2
    assert evaluate([fp8], H100).bounds == ["memory"]


def test_sweep_matches_op_by_op_evaluation():
    ms = log_sweep_values(1, 16384, 40)
    sweep = matmul_sweep(ms, 4096, 4096, "bf16", H100)
    loop = evaluate([matmul_op(int(m), 4096, 4096, "bf16") for m in ms], H100)
    np.testing.assert_allclose(sweep.time_s, loop.time_s)
    np.testing.assert_allclose(sweep.flops, loop.flops)
    assert sweep.bounds == loop.bounds
    # The trajectory crosses the ridge: memory-bound at M=1, compute-bound at M=16384.
    assert sweep.bounds[0] == "memory" and sweep.bounds[-1] == "compute"


def test_time_terms_broadcasts_over_devices():
    flops, bytes_moved = matmul_counts(np.array([1, 4096]), 4096, 4096, "bf16")
    peaks = np.array([[989.4e12], [312e12]])
    bws = np.array([[3.35e12], [2.039e12]])
    terms = time_terms(flops, bytes_moved, peaks, bws)
    assert terms.shape == (4, 2, 2)


@pytest.mark.parametrize("bad", [0, -1])
def test_non_positive_sizes_are_rejected(bad):
    with pytest.raises(ValueError, match="M must be a positive integer"):
        matmul_op(bad, 8, 8)


def test_unknown_dtype_is_rejected():
    with pytest.raises(ValueError, match="unknown dtype 'fp7'; allowed: fp64"):
        matmul_op(8, 8, 8, "fp7")


def test_what_if_scaling():
    doubled = H100.scaled(memory=2.0)
    assert doubled.memory_bandwidth_bytes_per_s == pytest.approx(6.7e12)
    gemv = matmul_op(1, 8192, 8192, "bf16")
    assert evaluate([gemv], H100).time_s[0] / evaluate([gemv], doubled).time_s[0] == pytest.approx(2.0, rel=1e-3)


def test_flops_match_torch_flop_counter():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    for m, n, k in [(1, 4096, 4096), (128, 1024, 512), (17, 33, 65)]:
        a = torch.randn(m, k)
        b = torch.randn(k, n)
        with FlopCounterMode(display=False) as counter:
            torch.matmul(a, b)
        assert counter.get_total_flops() == matmul_op(m, n, k, "fp32").flops


# A device that publishes no bf16 peak: 1 TB/s, fp32 only.
NO_BF16 = Ceilings("no-bf16", {"fp32": 10e12}, 1e12, launch_overhead_s=0.0, kernel_floor_s=0.0)


def test_a_missing_peak_leaves_a_lower_bound_not_an_error():
    # 2 TFLOP in bf16 over 1 GB of weights: memory 1e9 / 1e12 = 1 ms; compute unknown (no bf16 peak).
    op = Op("gemv", 2e12, "bf16", weight_bytes=1e9, launches=1)
    table = evaluate([op], NO_BF16)
    assert np.isnan(table.terms_s[0, 0]) and table.terms_s[1, 0] == pytest.approx(1e-3)
    assert table.time_s[0] == pytest.approx(1e-3) and table.total_time_s == pytest.approx(1e-3)
    assert table.is_lower_bound and table.unknown_peaks == ("bf16",)
    row = table.rows()[0]
    assert row["compute_s"] is None and row["bound"] == "memory" and row["bound_certain"] is False
    assert "no peak for bf16" in table.rests_on() and "lower bound" in table.rests_on()
    # With a 1 PFLOP/s bf16 peak the same op takes 2e12 / 1e15 = 2 ms: compute-bound, above the bound.
    known = evaluate([op], Ceilings("bf16", {"bf16": 1e15}, 1e12, launch_overhead_s=0.0, kernel_floor_s=0.0))
    assert known.total_time_s == pytest.approx(2e-3) and not known.is_lower_bound
    assert known.rows()[0]["bound_certain"] is True


def test_an_op_without_flops_needs_no_peak():
    # A copy of 1 MB moves 1e6 / 1e12 = 1 us and needs no compute peak: its time is exact.
    table = evaluate([Op("copy", 0.0, "bf16", act_bytes=1e6)], NO_BF16)
    assert table.terms_s[0, 0] == 0.0 and table.time_s[0] == pytest.approx(1e-6) and not table.is_lower_bound
    assert time_terms(0.0, 1e6, np.nan, 1e12)[0] == 0.0


def test_many_devices_with_and_without_the_peak():
    op = Op("gemv", 2e12, "bf16", weight_bytes=1e9, launches=1)
    with_peak = Ceilings("bf16", {"bf16": 1e15}, 1e12, launch_overhead_s=0.0, kernel_floor_s=0.0)
    step, by_regime = evaluate_devices([op], [with_peak, NO_BF16])
    # 2 ms compute-bound where the peak is known; 1 ms memory, a lower bound, where it is not.
    assert step == pytest.approx([2e-3, 1e-3])
    assert by_regime[0] == pytest.approx([2e-3, 0.0]) and by_regime[1] == pytest.approx([0.0, 1e-3])
    assert unpublished_peaks([op], [with_peak, NO_BF16]) == [(), ("bf16",)]


def test_a_missing_link_still_means_it_cannot_run():
    op = Op("all-reduce", 0.0, "bf16", comm_bytes=1e6, collectives=1)
    step, _ = evaluate_devices([op], [NO_BF16])
    assert np.isnan(step[0])
