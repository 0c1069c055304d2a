"""Measurement on the local device: the quick suite on the CPU (CI), the results file, collectives
with gloo, and the GPU suite where CUDA is present."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from roofline.measure.devices import match_hardware_id
from roofline.measure.schema import ResultsError, load_results, parse_results, save_results

ROOT = Path(__file__).resolve().parent.parent
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def cpu_results():
    from roofline.measure.suite import run_suite

    return run_suite(device="cpu", quick=True)


def test_quick_cpu_suite_is_plausible(cpu_results):
    c = cpu_results.ceilings
    assert cpu_results.device.kind == "cpu" and cpu_results.device.name.startswith("CPU")
    # A copy on any machine of the last decade moves between 1 GB/s and 2 TB/s.
    assert 1e-3 < c.memory_bandwidth_tbps < 2.0
    assert 1e-3 < c.read_bandwidth_tbps < 2.0
    # fp32 GEMM on a CPU: between 1 GFLOP/s and 100 TFLOP/s.
    assert 1e-3 < c.peak_tflops["fp32"] < 100
    # An eager PyTorch op costs between 50 ns and 1 ms of dispatch.
    assert 5e-8 < c.launch_overhead_s < 1e-3
    assert c.graph_launch_overhead_s is None
    kinds = {op.kind for op in cpu_results.ops}
    assert kinds == {"gemm", "layer"}
    for op in cpu_results.ops:
        assert op.time_s > 0 and op.predicted_time_s > 0 and op.flops > 0 and op.bytes > 0
        assert op.timing.p10_s <= op.time_s <= op.timing.p90_s
        # The model is within a factor of 30 either way on any machine (it is usually within 3x).
        assert 1 / 30 < op.ratio < 30, op
        assert op.predicted_datasheet_time_s is None  # a CPU has no datasheet device
    # No measured point may beat the achievable roof it is compared with.
    roofs = cpu_results.ceilings_for_engine()
    for op in cpu_results.ops:
        if op.kind == "gemm":
            assert op.flops / op.time_s <= roofs.peak("fp32") * 1.0001


def test_results_round_trip(cpu_results, tmp_path):
    path = tmp_path / "results.json"
    save_results(cpu_results, path)
    assert json.loads(path.read_text())["schema"] == "roofline.measure"
    assert load_results(path) == cpu_results


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "not JSON"),
        ('{"schema": "something-else", "version": 1}', "not a roofline measurement file"),
        ("[1, 2]", "not a roofline measurement file"),
        ('{"schema": "roofline.measure", "version": 99}', "version 99 is not supported"),
        ('{"schema": "roofline.measure", "version": 1, "mode": "quick"}', "missing required field 'device'"),
    ],
)
def test_corrupt_or_foreign_files_are_rejected(text, message):
    with pytest.raises(ResultsError, match=message):
        parse_results(text, "upload.json")


def test_extra_or_negative_fields_are_rejected(cpu_results):
    data = json.loads(cpu_results.to_json())
    data["ceilings"]["memory_bandwidth_tbps"] = -1
    with pytest.raises(ResultsError, match="memory_bandwidth_tbps"):
        parse_results(json.dumps(data))
    data = json.loads(cpu_results.to_json())
    data["evil"] = "__import__('os')"
    with pytest.raises(ResultsError, match="unknown field 'evil'"):
        parse_results(json.dumps(data))


@pytest.mark.parametrize(
    "name, expected",
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA H200", "h200-sxm"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("AMD Instinct MI300X", "mi300x"),
        ("Some Other GPU", None),
    ],
)
def test_device_names_match_the_database(name, expected):
    assert match_hardware_id(name) == expected


def test_collectives_with_gloo_on_two_processes(tmp_path):
    out = tmp_path / "allreduce.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "-m",
            "roofline.measure.collectives",
            "--backend",
            "gloo",
            "--max-bytes",
            str(2**20),
            "--repeats",
            "3",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = load_results(out)
    coll = results.collectives
    assert coll.backend == "gloo" and coll.world_size == 2
    assert [p.message_bytes for p in coll.points] == [2**p for p in range(12, 21, 2)]
    assert all(p.bus_bandwidth_gbps > 0 for p in coll.points)
    assert coll.link_bandwidth_bytes_per_s > 0 and coll.latency_s > 0


def test_collectives_outside_torchrun_is_a_clear_error():
    proc = subprocess.run(
        [sys.executable, "-m", "roofline.measure.collectives"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "run this under torchrun" in proc.stderr


def test_measure_cli_json(tmp_path):
    out = tmp_path / "m.json"
    proc = subprocess.run(
        [sys.executable, "-m", "roofline", "measure", "--device", "cpu", "--quick", "--json", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["device"]["name"]
    assert {"memory_bandwidth_tbps", "peak_tflops", "launch_overhead_s"} <= set(data["ceilings"])
    assert {"name", "flops", "bytes", "time_s", "predicted_time_s"} <= set(data["ops"][0])
    assert load_results(out).device.name == data["device"]["name"]


def test_engine_and_dashboard_imports_do_not_load_torch():
    code = (
        "import sys; import roofline.cli, roofline.inference, roofline.kvcache, roofline.plots, "
        "roofline.measure.schema; assert 'torch' not in sys.modules, 'torch was imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
def test_quick_gpu_suite():
    from roofline.measure.suite import run_suite

    results = run_suite(device="cuda", quick=True)
    c = results.ceilings
    assert results.device.kind == "cuda" and results.device.clocks_mhz is not None
    assert {"fp32", "bf16", "fp16"} <= set(c.peak_tflops)
    assert c.graph_launch_overhead_s is not None and c.graph_launch_overhead_s < c.launch_overhead_s
    if results.device.matched_hardware_id:
        from roofline.hardware import get_hardware

        hw = get_hardware(results.device.matched_hardware_id)
        # A healthy GPU copies at 50-100% of its datasheet bandwidth and runs bf16 GEMMs at 30-100% of peak.
        assert 0.5 < c.memory_bandwidth_tbps / hw.memory_bandwidth_tbps < 1.0
        assert 0.3 < c.peak_tflops["bf16"] / hw.peak_tflops.bf16 < 1.0
        assert all(op.predicted_datasheet_time_s for op in results.ops)
