"""The calibration's mechanism on synthetic kernels timed by a known law: a fit recovers the
law's parameters, and a held-out model step predicted from the fitted roofs equals the law's
own time for the step's ops. Nothing here is timed, so the checks are exact up to the fit's
grid, whatever else the machine is doing. (How well a calibration fitted on a real machine
predicts a real step is a measurement: ``python -m benchmarks.measure_suite`` prints it.)"""

from __future__ import annotations

import numpy as np
import pytest

from roofline.calibration import LINEAR_BUCKETS, KernelPoint, fit_calibration, fit_class, linear_bucket
from roofline.engine import Ceilings, evaluate
from roofline.models import ModelConfig
from roofline.ops import step_ops
from roofline.workload import Precision, Workload
from tests.small_models import small_model

ELT = 4.0  # fp32 bytes

# op class -> (latency s, bandwidth B/s, peak FLOP/s, parallel half-occupancy); None: no such term.
LAW = {
    "linear_m1": (4e-6, 40e9, 0.5e12, None),
    "linear_skinny": (6e-6, 30e9, 0.8e12, None),
    "linear_large": (8e-6, 25e9, 1.2e12, None),
    "attention_decode": (5e-6, 20e9, None, 6.0),
    "attention_prefill": (7e-6, None, 0.3e12, 12.0),
    "norm": (2e-6, 15e9, None, None),
    "residual": (2e-6, 18e9, None, None),
    "activation": (3e-6, 16e9, None, None),
}


def law_time_s(op_class: str, flops, moved, parallel=1.0):
    """The known law: latency + max(bytes / bandwidth, FLOPs / peak), both slowed by occupancy."""
    latency, bandwidth, peak, half = LAW[op_class]
    occupancy = 1.0 if half is None else np.asarray(parallel, float) / (parallel + half)
    memory = np.asarray(moved, float) / (bandwidth * occupancy) if bandwidth else 0.0
    compute = np.asarray(flops, float) / (peak * occupancy) if peak else 0.0
    return latency + np.maximum(memory, compute)


def synthetic_sweeps(m: ModelConfig) -> list[KernelPoint]:
    """The suite's sweeps (linear layers over M, decode and prefill attention, the elementwise
    kernels over tokens), each point timed by the law instead of a clock."""
    h, i, nh, nkv, hd = m.hidden_size, m.intermediate_size, m.num_heads, m.num_kv_heads, m.head_dim
    points = []
    for n, k in ((3 * h, h), (h, h), (2 * i, h), (h, i), (m.vocab_size, h)):
        for rows in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048):
            flops, moved = 2.0 * rows * n * k, (rows * k + n * k + rows * n) * ELT
            points.append(
                KernelPoint(
                    op_class="linear",
                    name="linear",
                    shape={"m": rows, "n": n, "k": k},
                    flops=flops,
                    bytes=moved,
                    time_s=float(law_time_s(linear_bucket(rows), flops, moved)),
                )
            )
    for b in (1, 2, 4, 8, 16):
        for c in (128, 512, 2048, 4096):
            flops, moved = 2.0 * b * nh * c * 2 * hd, 2 * b * c * nkv * hd * ELT + 2 * b * nh * hd * ELT
            parallel = b * nkv
            points.append(
                KernelPoint(
                    op_class="attention_decode",
                    name="decode attention",
                    shape={"batch": b, "context": c},
                    flops=flops,
                    bytes=moved,
                    parallel=parallel,
                    time_s=float(law_time_s("attention_decode", flops, moved, parallel)),
                )
            )
    for b, s in ((1, 64), (1, 128), (1, 256), (1, 512), (2, 1024), (1, 2048), (4, 512)):
        flops = 2.0 * nh * b * s * (s + 1) / 2 * 2 * hd
        moved = b * s * (2 * nh + 2 * nkv) * hd * ELT
        parallel = b * nh * np.ceil(s / 128)
        points.append(
            KernelPoint(
                op_class="attention_prefill",
                name="prefill attention",
                shape={"batch": b, "seq": s},
                flops=flops,
                bytes=moved,
                parallel=parallel,
                time_s=float(law_time_s("attention_prefill", flops, moved, parallel)),
            )
        )
    for t in (1, 4, 16, 64, 256, 1024, 4096):
        for op_class, width, moved in (
            ("norm", h, 2 * t * h * ELT + h * ELT),
            ("residual", h, 3 * t * h * ELT),
            ("activation", i, 3 * t * i * ELT),
        ):
            points.append(
                KernelPoint(
                    op_class=op_class,
                    name=op_class,
                    shape={"tokens": t},
                    flops=float(t * width),
                    bytes=moved,
                    time_s=float(law_time_s(op_class, t * width, moved)),
                )
            )
    return points


@pytest.mark.parametrize("op_class", sorted(LAW))
def test_a_fit_recovers_the_law_it_was_timed_by(op_class):
    points = [p for p in synthetic_sweeps(small_model()) if _class_of(p) == op_class]
    points = [p.model_copy(update={"op_class": op_class}) for p in points]
    fit = fit_class(points)
    latency, bandwidth, peak, _ = LAW[op_class]
    # Every point is predicted within 2% (the fit searches a refined grid, not a closed form).
    assert fit.max_abs_error < 0.02, fit
    # The rate that binds the largest kernels is recovered within 5%.
    if bandwidth and fit.bandwidth_bytes_per_s:
        biggest = max(points, key=lambda p: p.bytes)
        if biggest.bytes / bandwidth >= (biggest.flops / peak if peak else 0):
            assert fit.bandwidth_bytes_per_s == pytest.approx(bandwidth, rel=0.05)
    if peak and op_class in ("linear_large", "attention_prefill"):
        assert fit.flops_per_s == pytest.approx(peak, rel=0.05)
    assert fit.latency_s <= min(p.time_s for p in points)
    assert fit.latency_s == pytest.approx(latency, rel=0.25, abs=1e-6)


def _class_of(p: KernelPoint) -> str:
    return linear_bucket(p.shape["m"]) if p.op_class == "linear" else p.op_class


def _law_of_op(op) -> np.ndarray | None:
    """The law's time of one occurrence of an engine op, by the class the calibration files it in."""
    if op.op_class == "linear":
        op_class = linear_bucket(float(np.max(op.meta.get("m", 1.0))))
    elif op.op_class == "elementwise":
        op_class = "norm"
    else:
        op_class = op.op_class
    if op_class not in LAW:
        return None
    moved = op.weight_bytes + op.act_bytes + op.kv_bytes
    return law_time_s(op_class, op.flops, moved, op.meta.get("parallel", 1.0))


@pytest.mark.parametrize("phase, batch, seq_len", [("decode", 2, 256), ("prefill", 1, 128), ("decode", 16, 1024)])
def test_a_held_out_step_is_predicted_from_the_fitted_roofs(phase, batch, seq_len):
    """Fit on the sweeps, then predict a model step none of them is: every op the calibration
    covers takes the law's time (times its count), within the fit's error."""
    m = small_model()
    calibration = fit_calibration(synthetic_sweeps(m), device="synthetic", source="the law in this test")
    assert set(calibration.fits) == set(LAW)
    ceilings = Ceilings(
        name="synthetic",
        peak_flops_per_s={"fp32": 1e12},
        memory_bandwidth_bytes_per_s=50e9,
        launch_overhead_s=0.0,
        kernel_floor_s=0.0,
        roof_source=calibration,
        source="calibrated",
    )
    w = Workload(m, phase, batch, seq_len, precision=Precision(weight_dtype="fp32", act_dtype="fp32", kv_dtype="fp32"))
    ops = step_ops(w)
    table = evaluate(ops, ceilings)
    covered_predicted, covered_law = 0.0, 0.0
    for i, op in enumerate(ops):
        law = _law_of_op(op)
        if law is None:
            continue
        expected = float(law) * op.count
        assert float(table.time_s[i]) == pytest.approx(expected, rel=0.03), op.name
        covered_predicted += float(table.time_s[i])
        covered_law += expected
    # The step's covered ops are most of it (the rest, e.g. the embedding gather, keeps datasheet roofs).
    assert covered_law > 0.5 * float(table.total_time_s)
    assert covered_predicted == pytest.approx(covered_law, rel=0.03)


def test_linear_buckets_split_at_their_edges():
    assert [linear_bucket(m) for m in (1, 2, 64, 65, 1e6)] == [
        "linear_m1",
        "linear_skinny",
        "linear_skinny",
        "linear_large",
        "linear_large",
    ]
    assert LINEAR_BUCKETS[-1][0] == np.inf


def test_one_point_gives_one_rate_not_three_parameters():
    # One prefill attention kernel: 2 TFLOP in 4 ms is 500 TFLOP/s. Three parameters through one
    # point could be anything (a peak of 3.4 PFLOP/s and a large occupancy term fitted it once);
    # with one point the fit keeps the rate alone.
    one = KernelPoint(
        op_class="attention_prefill", name="prefill attention", shape={"batch": 1, "seq": 8192},
        flops=2e12, bytes=1e9, parallel=512, time_s=4e-3,
    )  # fmt: skip
    fit = fit_class([one])
    assert fit.parallel_half is None and fit.latency_s == 0.0
    assert fit.flops_per_s == pytest.approx(500e12, rel=1e-3)
    assert fit.predict(np.array([2e12]), np.array([1e9]), 512)[0] == pytest.approx(4e-3, rel=1e-3)
