"""Trace import: a hand-written GPU trace worked by hand, and hostile traces refused with clear
errors and bounded memory. No torch needed."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from roofline.engine import Ceilings
from roofline.profile import TraceError, import_traces, summarize
from roofline.profile.trace import MAX_EVENTS, MAX_TRACE_BYTES


def _op(name, ts, dur, ext, dims, types, tid=1):
    args = {"External id": ext, "Input Dims": dims, "Input type": types}
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(name, ts, dur, ext):
    args = {"External id": ext, "device": 0, "stream": 7}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


def gpu_trace(rank: int = 0, shift: float = 0.0) -> dict:
    """One step: a bf16 linear (one GEMM kernel of 40 µs), an add (5 µs), and an all-reduce
    (NCCL kernel of 20 µs); the device idles 10 µs between the GEMM and the add."""
    s = shift
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": s, "dur": 100},
        _op("aten::linear", s + 1, 10, 11, [[16, 4096], [4096, 4096]], ["c10::BFloat16", "c10::BFloat16"]),
        _op("aten::addmm", s + 2, 8, 12, [[4096], [16, 4096], [4096, 4096]], ["c10::BFloat16"] * 3),
        _kernel("nvjet_tst_128x64", s + 5, 40, 12),
        _op("aten::add", s + 20, 5, 13, [[16, 4096], [16, 4096]], ["c10::BFloat16"] * 2),
        _kernel("elementwise_add", s + 55, 5, 13),
        _op("c10d::allreduce_", s + 30, 5, 14, [[[16, 4096]]], ["TensorList"]),
        _kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", s + 60, 20, 14),
    ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}],
        "distributedInfo": {"rank": rank, "world_size": 2},
        "baseTimeNanoseconds": 1_000_000_000,
        "traceEvents": events,
    }


def test_a_gpu_trace_worked_by_hand():
    prof = import_traces([(json.dumps(gpu_trace()), "rank0.json")])
    assert prof.activity == "cuda" and prof.device.name == "NVIDIA H100 80GB HBM3"
    ops = {o.name: o for o in prof.level("aten")}
    linear = ops["aten::linear"]
    assert linear.time_s == pytest.approx(40e-6)  # its kernel's device time
    assert linear.flops == 2 * 16 * 4096 * 4096
    assert linear.bytes == (4096 * 4096 + 16 * 4096 + 16 * 4096) * 2
    assert ops["c10d::allreduce_"].op_class == "communication"
    assert ops["c10d::allreduce_"].comm_bytes == 16 * 4096 * 4  # a tensor list's dtype is not recorded: 4 bytes
    kernels = {o.name: o for o in prof.level("kernel")}
    assert kernels["nvjet_tst_128x64"].flops == linear.flops
    (rank,) = prof.ranks
    assert rank.wall_s == pytest.approx(100e-6)  # the step range; its kernels end inside it
    assert rank.busy_s == pytest.approx(65e-6)
    assert rank.idle_s == pytest.approx(35e-6)
    assert rank.communication_s == pytest.approx(20e-6)
    h100 = Ceilings(name="H100", peak_flops_per_s={"bf16": 989e12}, memory_bandwidth_bytes_per_s=3.35e12)
    report = summarize(prof, h100)
    split = report["regime_split_s"]
    assert split["communication"] == pytest.approx(20e-6)
    # The idle 35 µs, and the add: 393 kB is 0.12 µs at 3.35 TB/s, less than the 1.2 µs least time
    # of its one kernel, so its 5 µs are overhead too.
    assert split["overhead"] == pytest.approx(35e-6 + 5e-6)
    assert sum(split.values()) == pytest.approx(100e-6)


def test_a_collective_message_from_record_param_comms():
    data = gpu_trace()
    comms = _op("record_param_comms", 31, 3, 16, [[[16, 4096]]], ["TensorList"])
    comms["args"] |= {"In msg nelems": 16 * 4096, "dtype": "BFloat16", "Collective name": "allreduce"}
    data["traceEvents"].append(comms)
    data["traceEvents"][-2]["args"]["External id"] = 16  # the NCCL kernel, launched inside it
    prof = import_traces([(json.dumps(data), "rank0.json")])
    (nccl,) = [o for o in prof.level("kernel") if o.name.startswith("ncclDevKernel")]
    assert nccl.time_s == pytest.approx(20e-6)
    assert prof.ranks[0].communication_s == pytest.approx(20e-6)
    assert prof.ranks[0].communication_bytes == 16 * 4096 * 2  # bf16, as record_param_comms says


def test_two_ranks_give_each_rank_its_communication_and_the_skew():
    texts = [(json.dumps(gpu_trace(0)), "r0"), (json.dumps(gpu_trace(1, shift=7.0)), "r1")]
    prof = import_traces(texts)
    assert [r.rank for r in prof.ranks] == [0, 1]
    assert all(r.communication_s == pytest.approx(20e-6) for r in prof.ranks)
    assert prof.skew_s == pytest.approx(7e-6)


HOSTILE = {
    "truncated": (lambda: json.dumps(gpu_trace())[:-40], "not JSON"),
    "wrong schema": (lambda: json.dumps({"schema": "roofline.measure"}), "not a Chrome trace"),
    "no ops": (lambda: json.dumps({"traceEvents": []}), "no profiler ops"),
    "NaN duration": (lambda: json.dumps(gpu_trace()).replace('"dur": 40', '"dur": NaN'), "NaN is not allowed"),
    "text duration": (lambda: json.dumps(gpu_trace()).replace('"dur": 40', '"dur": "nan"'), "finite number"),
    "negative duration": (lambda: json.dumps(gpu_trace()).replace('"dur": 40', '"dur": -4'), "out of range"),
    "deep": (lambda: '{"traceEvents": ' + "[" * 100 + "]" * 100 + "}", "nested deeper"),
    "no duration": (
        lambda: json.dumps({"traceEvents": [_op("aten::add", 10.0, 0.0, 1, [[4], [4]], ["float", "float"])]}),
        "lasts 0 µs",
    ),
    "event not an object": (lambda: json.dumps({"traceEvents": [3]}), "not an object"),
    "not UTF-8": (lambda: b'{"traceEvents": ["\xff"]}', "not UTF-8"),
    "impossible shape": (
        lambda: json.dumps(gpu_trace()).replace(
            "[[16, 4096], [4096, 4096]]", "[[1000000000, 1000000000], [4096, 4096]]"
        ),
        "upload.json: trace: a tensor of shape \\[1000000000, 1000000000\\] holds 1e\\+18 elements",
    ),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_traces_get_clear_errors(case):
    make, message = HOSTILE[case]
    with pytest.raises(TraceError, match=message):
        import_traces([(make(), "upload.json")])


def test_a_huge_trace_is_refused_before_it_is_parsed():
    text = b" " * (MAX_TRACE_BYTES + 1)
    with pytest.raises(TraceError, match="larger than a trace can be"):
        import_traces([(text, "huge.json")])


def test_a_million_events_are_refused_in_bounded_memory():
    text = '{"traceEvents": [' + ",".join(['{"ph":"X"}'] * 10**6) + "]}"
    assert len(text) < MAX_TRACE_BYTES  # small enough to pass the size cap: the event cap stops it
    tracemalloc.start()
    try:
        with pytest.raises(TraceError, match=f"{MAX_EVENTS:,}"):
            import_traces([(text, "many.json")])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20  # refused before a million dicts were built


def test_kernels_launched_outside_aten_ops_count_under_their_range():
    """A compiled graph's Triton kernel is launched inside a record_function range, not an aten op."""
    data = gpu_trace()
    compiled = {"ph": "X", "cat": "user_annotation", "name": "CompiledFunction", "pid": 1, "tid": 1}
    data["traceEvents"] += [
        {**compiled, "ts": 40, "dur": 4, "args": {"External id": 15}},
        _kernel("triton_poi_fused_add_mul_0", 85, 10, 15),
    ]
    prof = import_traces([(json.dumps(data), "compiled.json")])
    ops = {o.name: o for o in prof.level("aten")}
    assert ops["CompiledFunction"].time_s == pytest.approx(10e-6)
    assert ops["CompiledFunction"].op_class == "other"
    assert prof.busy_s == pytest.approx(75e-6)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
        ("AMD Instinct MI300X", "mi300x"),
        ("NVIDIA B200", "b200"),
        ("Some Future GPU", None),
        ("CPU (2 cores)", None),
    ],
)
def test_a_profiled_gpu_is_matched_to_its_database_device(name, expected):
    from roofline.hardware import load_hardware
    from roofline.profile import match_hardware

    assert match_hardware(name, {hw.id: hw.name for hw in load_hardware().values()}) == expected


def test_a_gzipped_trace_imports_and_a_gzip_bomb_stays_small():
    import gzip

    packed = gzip.compress(json.dumps(gpu_trace()).encode())
    assert import_traces([(packed, "rank0.json.gz")]).wall_s == pytest.approx(100e-6)
    bomb = gzip.compress(b" " * (MAX_TRACE_BYTES + 10))  # 16 KB packed
    with pytest.raises(TraceError, match="unpacks to more than a trace can be"):
        import_traces([(bomb, "bomb.json.gz")])
    with pytest.raises(TraceError, match="damaged gzip"):
        import_traces([(packed[:-30], "cut.json.gz")])


def test_a_calibration_gives_each_op_its_achievable_time():
    """The shipped H100 kernel sweeps' calibration: the 16-row GEMM gets its fitted (skinny GEMM)
    time, at or above the bound of the datasheet roofs."""
    from pathlib import Path

    from roofline.measure.schema import load_results
    from roofline.profile import op_rows, roofs_for

    example = Path(__file__).resolve().parent.parent / "examples" / "h100-sxm-kernel-sweeps.json"
    prof = import_traces([(json.dumps(gpu_trace()), "rank0.json")])
    calibrated = roofs_for(prof, results=load_results(example))
    assert calibrated.source == "calibrated" and calibrated.hardware_id == "h100-sxm"
    plain = roofs_for(prof, hardware="h100-sxm")
    rows = {r["name"]: r for r in op_rows(prof, calibrated)}
    plain_rows = {r["name"]: r for r in op_rows(prof, plain)}
    linear = rows["aten::linear"]
    assert linear["roofs"] == "calibrated" and plain_rows["aten::linear"]["roofs"] == "datasheet"
    assert linear["roof_time_s"] >= plain_rows["aten::linear"]["roof_time_s"] > 0
    # No fit for collectives: the link's bandwidth and latency bound it (NVLink, 16 × 4096 × 4 bytes).
    comm = rows["c10d::allreduce_"]
    assert comm["roofs"] == "peak and bandwidth"
    assert comm["roof_time_s"] == pytest.approx(
        16 * 4096 * 4 / calibrated.link_bandwidth_bytes_per_s + calibrated.collective_latency_s
    )


def test_events_of_one_start_and_length_nest_as_deep_as_they_repeat():
    """2,000 identical events each sit inside the one before: the walk down them is not recursive
    (it had raised RecursionError from about 500). Each is one op; only the innermost dispatches."""
    events = [_op("aten::add", 1000.0, 100.0, i, [[4, 4], [4, 4]], ["float", "float"]) for i in range(2000)]
    profile = import_traces([(json.dumps({"traceEvents": events}), "same.json")])
    (op,) = [o for o in profile.level("aten") if o.name == "aten::add"]
    assert op.count == 1 and op.dispatches == 1
