"""A profiled op's regime follows the engine's rule: the largest of its FLOPs at the peak, its
bytes at the bandwidth, and its dispatches at the device's least time per dispatch. An op whose
work is shorter than its dispatches is overhead-bound, whatever its intensity. Worked by hand;
no torch needed."""

from __future__ import annotations

import json

import pytest

from roofline.engine import Ceilings
from roofline.profile import import_traces, op_rows, regime_split
from roofline.profile.analysis import advice, dispatch_floor_s, op_regime, op_terms
from roofline.profile.record import ProfiledOp

# 100 GFLOP/s, 20 GB/s, and 2 µs the least time of one dispatch.
CPU = Ceilings("test CPU", {"fp32": 1e11}, 2e10, launch_overhead_s=0.0, kernel_floor_s=2e-6, source="measured")


def _op(name, flops, bytes_, count=1.0, dispatches=None, time_s=1e-3):
    return ProfiledOp(
        level="aten", name=name, op_class="other", count=count, time_s=time_s, flops=flops, bytes=bytes_,
        dispatches=dispatches,
    )  # fmt: skip


def test_the_longest_term_names_the_regime():
    gemm = _op("aten::mm", flops=2e8, bytes_=4e6)  # 2 ms of math, 0.2 ms of bytes, 2 µs of dispatch
    assert op_terms(gemm, CPU) == pytest.approx({"compute": 2e-3, "memory": 2e-4, "overhead": 2e-6})
    assert op_regime(gemm, CPU) == "compute"
    copy = _op("aten::copy_", flops=0, bytes_=4e6)  # 200 µs of bytes
    assert op_regime(copy, CPU) == "memory"
    # An add of 1,000 fp32 numbers: 12 kB is 0.6 µs at 20 GB/s, less than its one 2 µs dispatch.
    small = _op("aten::add", flops=1e3, bytes_=12e3)
    assert op_terms(small, CPU)["memory"] == pytest.approx(0.6e-6)
    assert op_regime(small, CPU) == "overhead"


def test_a_composite_op_pays_a_dispatch_for_each_op_it_calls():
    # An RMS norm of 76 kB (3.8 µs of bytes) that calls six ops: 12 µs of dispatch.
    norm = _op("aten::rms_norm", flops=46e3, bytes_=76e3, dispatches=6, time_s=100e-6)
    assert op_terms(norm, CPU)["overhead"] == pytest.approx(12e-6)
    assert op_regime(norm, CPU) == "overhead"
    # Without the count of the ops it calls, one dispatch per call: 2 µs, and its bytes win.
    assert op_regime(_op("aten::rms_norm", flops=46e3, bytes_=76e3), CPU) == "memory"
    # Its roof is the longest term, so "of roof" is 12 µs of the 100 µs it took.
    (row,) = op_rows(_profile([norm]), CPU)
    assert row["bound"] == "overhead" and row["roof_time_s"] == pytest.approx(12e-6)
    assert row["fraction_of_roof"] == pytest.approx(0.12)


def test_collectives_and_empty_ops_keep_their_regimes():
    comm = ProfiledOp(level="aten", name="c10d::allreduce_", op_class="communication", count=1, time_s=1e-4,
                      flops=0, bytes=1e3, comm_bytes=1e3)  # fmt: skip
    assert op_regime(comm, CPU) == "communication"
    assert op_regime(_op("aten::view", flops=0, bytes_=0), CPU) == "overhead"


def _profile(ops):
    from roofline.measure.schema import DeviceInfo
    from roofline.profile.record import Profile, RankSummary

    busy = sum(o.time_s for o in ops)
    device = DeviceInfo(kind="cpu", name="test", torch_version="2.13.0", date="not recorded")
    return Profile(
        source="trace", activity="cpu", device=device, steps=1,
        ranks=[RankSummary(rank=0, steps=1, wall_s=busy, busy_s=busy, idle_s=0.0)], ops=ops,
    )  # fmt: skip


def _host(name, ts, dur, dims=None, types=None):
    args = {"Input Dims": dims or [], "Input type": types or []}
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def test_a_cpu_trace_counts_the_innermost_ops_under_each_top_level_op():
    """A layer norm calling mean and (var calling sub and pow): three innermost ops; an add alone: one."""
    dims, types = [[16, 576], [576]], ["float", "float"]
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 200},
        _host("aten::rms_norm", 1, 100, dims, types),
        _host("aten::mean", 2, 10),
        _host("aten::var", 20, 60),
        _host("aten::sub", 21, 10),
        _host("aten::pow", 40, 10),
        _host("aten::add", 120, 20, [[16, 576], [16, 576]], types),
    ]
    prof = import_traces([(json.dumps({"traceEvents": events}), "cpu.json")])
    ops = {o.name: o for o in prof.level("aten")}
    assert prof.activity == "cpu"
    assert ops["aten::rms_norm"].launches == 3 and ops["aten::add"].launches == 1
    # 16 x 576 fp32 in and out of the add: 73.7 kB, 3.7 µs at 20 GB/s, past its 2 µs dispatch.
    assert op_regime(ops["aten::add"], CPU) == "memory"
    split = regime_split(prof, CPU)
    assert sum(split.values()) == pytest.approx(prof.wall_s)


def test_a_gpu_aten_op_pays_a_floor_for_each_kernel_it_launched():
    from tests.test_profile_trace import gpu_trace

    prof = import_traces([(json.dumps(gpu_trace()), "rank0.json")])
    ops = {o.name: o for o in prof.level("aten")}
    assert ops["aten::linear"].launches == 1 and ops["aten::add"].launches == 1
    # A record written before dispatches were counted reads as one per occurrence.
    legacy = ProfiledOp.model_validate({k: v for k, v in ops["aten::add"].model_dump().items() if k != "dispatches"})
    assert legacy.dispatches is None and legacy.launches == legacy.count
    assert prof.version == 2
    old = json.loads(prof.to_json())
    old["version"] = 1
    for op in old["ops"]:
        op.pop("dispatches", None)
    again = type(prof).model_validate(old)
    assert again.version == 1 and all(o.launches == o.count for o in again.ops)


def _kernel(name, ts, dur, ext):
    args = {"External id": ext, "device": 0, "stream": 7}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


def test_a_gpu_op_pays_a_floor_per_kernel_and_the_floor_stays_under_what_was_measured():
    """A layer norm of 16 x 4,096 bf16 launching four kernels of 1 µs: four dispatches, each faster
    than the datasheet floor of 1.2 µs, so the profile's floor is 1 µs and the op sits at 100% of
    that roof, not 120%."""
    dims, types = [[16, 4096], [4096]], ["c10::BFloat16", "c10::BFloat16"]
    op = _host("aten::layer_norm", 1, 20, dims, types)
    op["args"]["External id"] = 5
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 40},
        op,
        *(_kernel(f"norm_part_{i}", 2 + 2 * i, 1, 5) for i in range(4)),
    ]
    prof = import_traces([(json.dumps({"traceEvents": events, "deviceProperties": [{"name": "H100"}]}), "g.json")])
    (norm,) = [o for o in prof.level("aten") if o.name == "aten::layer_norm"]
    assert norm.launches == 4 and norm.time_s == pytest.approx(4e-6)
    h100 = Ceilings("H100", {"bf16": 989e12}, 3.35e12, kernel_floor_s=1.2e-6)
    assert dispatch_floor_s(prof, h100) == pytest.approx(1e-6)
    (row,) = [r for r in op_rows(prof, h100) if r["name"] == "aten::layer_norm"]
    assert row["bound"] == "overhead" and row["fraction_of_roof"] == pytest.approx(1.0)


def test_inner_ops_under_an_annotation_range_still_count_as_dispatches():
    dims, types = [[16, 576], [576]], ["float", "float"]
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 200},
        _host("aten::rms_norm", 1, 100, dims, types),
        {"ph": "X", "cat": "user_annotation", "name": "my_range", "pid": 1, "tid": 1, "ts": 2, "dur": 90},
        _host("aten::mean", 3, 10),
        _host("aten::pow", 20, 10),
        _host("aten::mul", 40, 10),
    ]
    prof = import_traces([(json.dumps({"traceEvents": events}), "cpu.json")])
    (norm,) = [o for o in prof.level("aten") if o.name == "aten::rms_norm"]
    assert norm.launches == 3


def test_a_cpu_profiles_overhead_advice_speaks_of_dispatch_not_cuda_graphs():
    split = {"compute": 0.0, "memory": 0.0, "communication": 0.0, "overhead": 1.0}
    (cpu,) = advice(split, [], "cpu")
    assert "dispatch, not its work" in cpu and "CUDA graphs" not in cpu
    assert "CUDA graphs" in advice(split, [], "cuda")[0]


def test_a_conversion_that_returns_its_input_moves_no_bytes():
    """aten::to on a tensor already in the asked dtype returns it: no inner copy, no bytes (it read
    10,000% of its roof counted as a copy). One that converts shows its aten::_to_copy inside."""
    dims, types = [[16, 49152]], ["float"]
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        _host("aten::to", 1, 2, dims, types),
        _host("aten::to", 10, 50, [[16, 576]], ["c10::BFloat16"]),
        _host("aten::_to_copy", 11, 45, [[16, 576]], ["c10::BFloat16"]),
    ]
    prof = import_traces([(json.dumps({"traceEvents": events}), "cpu.json")])
    ops = {o.shapes: o for o in prof.level("aten") if o.name == "aten::to"}
    assert ops["[16, 49152]"].bytes == 0 and op_regime(ops["[16, 49152]"], CPU) == "overhead"
    assert ops["[16, 576]"].bytes == pytest.approx(2 * 16 * 576 * 2)  # read and written, 2 bytes each
