"""roofline.profile on a CPU: a Llama-shaped model (SmolLM2-135M's shapes, two layers) profiled
forward and as a full training step, checked against FlopCounterMode, hand-worked bytes, its
own wall time, and the trace it exported, read back through the importer."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from torch.nn import functional as F  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from roofline.engine import Ceilings  # noqa: E402
from roofline.measure.schema import parse_results  # noqa: E402
from roofline.models import get_model  # noqa: E402
from roofline.profile import import_trace_files, profile, regime_split, summarize  # noqa: E402
from roofline.profile.models import project_step  # noqa: E402

# Fixed roofs so nothing is measured for the analysis: 100 GFLOP/s, 20 GB/s.
ROOFS = Ceilings(name="test CPU", peak_flops_per_s={"fp32": 1e11}, memory_bandwidth_bytes_per_s=2e10, source="measured")


@pytest.fixture(scope="module", params=["forward", "train"])
def profiled(request, tmp_path_factory):
    step = project_step(get_model("smollm2-135m"), batch=1, seq=32, train=request.param == "train", layers=2)
    trace = tmp_path_factory.mktemp("trace") / f"{request.param}.json"
    # No separate warm-up: the FlopCounterMode run before the profiled steps warms the step up.
    return profile(step.run, module=step.module, steps=2, warmup=0, trace_path=str(trace)), trace


def _shapes(op) -> list[list[int]]:
    return json.loads("[" + op.shapes.replace(" x ", ", ") + "]")


def _flop_counter(name: str, shapes: list[list[int]]) -> int:
    """FlopCounterMode's count of one call of the aten op ``name`` on tensors of ``shapes``."""
    t = [torch.empty(s) for s in shapes]
    calls = {
        "aten::linear": lambda: F.linear(*t),
        "aten::mm": lambda: torch.mm(*t),
        "aten::bmm": lambda: torch.bmm(*t),
        "aten::addmm": lambda: torch.addmm(*t),
        "aten::matmul": lambda: torch.matmul(*t),
    }
    with FlopCounterMode(display=False) as counter:
        calls[name]()
    return counter.get_total_flops()


def test_every_matmul_counts_what_flop_counter_counts(profiled):
    prof, _ = profiled
    matmuls = [op for op in prof.level("aten") if op.op_class == "linear"]
    assert len(matmuls) >= 5
    for op in matmuls:
        assert op.flops / op.count == _flop_counter(op.name, _shapes(op)), op.name
    # FlopCounterMode on the whole step counts the matmuls and nothing else here (CPU attention it leaves out).
    assert sum(op.flops for op in matmuls) == prof.flop_counter_flops


def test_linear_bytes_are_weights_input_output():
    lin = torch.nn.Linear(64, 32)
    x = torch.randn(8, 64)
    prof = profile(lin, x, steps=2, warmup=1)
    (op,) = [op for op in prof.level("aten") if op.name == "aten::linear"]
    weights, bias, inp, out = 32 * 64, 32, 8 * 64, 8 * 32
    assert op.bytes / op.count == (weights + bias + inp + out) * 4
    assert op.flops / op.count == 2 * 8 * 32 * 64
    assert op.count == 1  # per step


def test_op_times_add_up_to_the_busy_time(profiled):
    """Top-level ops run one after another on a CPU, so their times add up to the busy time (the
    union of their intervals), which the steps' wall time bounds. How much of the wall they cover
    (the Python between ops, and whatever else the machine runs) varies with load: no test."""
    prof, _ = profiled
    ops = sum(op.time_s for op in prof.level("aten"))
    assert ops == pytest.approx(prof.busy_s, abs=1e-6)  # to the trace's microsecond
    assert 0 < prof.busy_s <= prof.wall_s
    assert prof.idle_s == pytest.approx(prof.wall_s - prof.busy_s)


def test_the_exported_trace_imports_to_the_same_ops(profiled):
    prof, trace = profiled
    imported = import_trace_files([str(trace)])
    for level in ("aten", "module"):
        ours = {(o.name, o.shapes): o for o in prof.level(level)}
        theirs = {(o.name, o.shapes): o for o in imported.level(level)}
        assert ours.keys() == theirs.keys()
        for key, o in ours.items():
            t = theirs[key]
            assert (o.count, o.flops, o.bytes) == (t.count, t.flops, t.bytes)
            assert o.time_s == pytest.approx(t.time_s, rel=1e-12)
    assert imported.wall_s == pytest.approx(prof.wall_s, rel=1e-12)


def test_modules_hold_their_ops(profiled):
    prof, _ = profiled
    modules = {o.name: o for o in prof.level("module")}
    assert {"layers.0", "layers.1", "layers.0.q", "embed", "norm"} <= modules.keys()
    # A layer's FLOPs include its linears' (forward ops only: backward runs outside module ranges).
    layer = modules["layers.0"]
    inner = sum(modules[f"layers.0.{n}"].flops for n in ("q", "k", "v", "o", "gate", "up", "down"))
    assert layer.flops >= inner > 0


def test_summary_splits_the_step_and_says_what_moves_it(profiled):
    prof, _ = profiled
    split = regime_split(prof, ROOFS)
    assert sum(split.values()) == pytest.approx(prof.wall_s)
    report = summarize(prof, ROOFS)
    assert report["top_ops"][0]["time_s"] >= report["top_ops"][-1]["time_s"]
    assert report["what_would_move_it"]
    assert report["step_bound"] in split
    json.dumps(report)  # plain data for --json


def test_a_profile_is_a_measurement_results_file(profiled):
    prof, _ = profiled
    results = prof.to_results()
    again = parse_results(results.to_json())
    assert len(again.sweeps) >= 5
    assert all(p.time_s > 0 and p.bytes > 0 for p in again.sweeps)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_profile_has_kernels_matched_to_their_ops():
    lin = torch.nn.Linear(4096, 4096, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    prof = profile(lin, x, steps=5)
    assert prof.activity == "cuda" and prof.device.kind == "cuda"
    (op,) = [o for o in prof.level("aten") if o.name == "aten::linear"]
    assert op.flops == 2 * 64 * 4096 * 4096 and op.dtype == "bf16" and op.time_s > 0
    kernels = prof.level("kernel")
    assert kernels and sum(k.flops for k in kernels) == pytest.approx(op.flops)
    assert 0 < prof.busy_s <= prof.wall_s
    assert summarize(prof, ROOFS)["top_ops"][0]["name"] == "aten::linear"


def test_the_cpu_memory_roof_copies_past_the_largest_cache(tmp_path):
    """A copy that fits the last-level cache measures the cache: each buffer is 4x the largest
    cache Linux reports, at least 256 MiB and at most 1 GiB (hand-worked from fake sysfs files)."""
    from roofline.profile.capture import copy_buffer_bytes, largest_cache_bytes

    def caches(**sizes):
        root = tmp_path / "_".join(sizes.values())
        for index, size in sizes.items():
            (root / index).mkdir(parents=True)
            (root / index / "size").write_text(size + "\n")
        return str(root)

    epyc = caches(index0="32K", index2="512K", index3="32768K")  # this CI machine's kind: a 32 MiB L3
    assert largest_cache_bytes(epyc) == 32 * 2**20
    assert copy_buffer_bytes(epyc) == 256 * 2**20  # 4 x 32 MiB = 128 MiB: the floor
    assert copy_buffer_bytes(caches(index3="96M")) == 384 * 2**20  # 4 x 96 MiB
    assert copy_buffer_bytes(caches(index3="1152M")) == 2**30  # a 1.1 GiB V-cache: the ceiling
    assert largest_cache_bytes(caches(index3="lots")) == 0 and largest_cache_bytes(str(tmp_path / "none")) == 0
    assert copy_buffer_bytes(str(tmp_path / "none")) == 256 * 2**20
