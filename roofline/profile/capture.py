"""Profile any PyTorch callable here: run it a few times under ``torch.profiler`` (CPU ops, and
CUDA kernels where it runs on a GPU) with the input shapes recorded, and read the exported trace
with the same importer a trace from another machine goes through, so the two give the same ops.

FLOPs per op come from the recorded shapes (``roofline.profile.counting``, flop_counter's
formulas); the step's total is also counted by ``FlopCounterMode`` on one more run and kept
beside it. Modules get profiler ranges named ``module: <path>`` for the per-module view.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, record_function
from torch.profiler import profile as torch_profile
from torch.utils.flop_counter import FlopCounterMode

from roofline.engine import Ceilings
from roofline.format import fmt_flops
from roofline.measure.schema import DeviceInfo
from roofline.profile.record import Profile
from roofline.profile.trace import MODULE_PREFIX, import_traces

OWN_TRACE_BYTES = 512 * 2**20  # a trace made here is trusted for size; the event cap still holds


def _module_ranges(root: nn.Module) -> list:
    """Hooks that open a profiler range around each submodule's forward."""
    handles = []
    for name, module in root.named_modules():
        if not name:
            continue
        stack: list = []

        def enter(_module, _args, name=name, stack=stack):
            ctx = record_function(MODULE_PREFIX + name)
            ctx.__enter__()
            stack.append(ctx)

        def leave(_module, _args, _out, stack=stack):
            if stack:
                stack.pop().__exit__(None, None, None)

        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave))
    return handles


def _device_of(module: nn.Module | None, inputs: tuple) -> torch.device:
    for value in [*inputs, *(module.parameters() if module is not None else ())]:
        if isinstance(value, torch.Tensor):
            return value.device
    return torch.device("cpu")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_info(device: torch.device) -> DeviceInfo:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return DeviceInfo(
            name=props.name,
            kind="cuda",
            cuda_version=torch.version.cuda,
            torch_version=torch.__version__,
            memory_bytes=float(props.total_memory),
            date=now,
        )
    return DeviceInfo(name=f"CPU ({os.cpu_count()} cores)", kind="cpu", torch_version=torch.__version__, date=now)


def profile(
    target: Callable | nn.Module,
    *inputs,
    steps: int = 3,
    warmup: int = 1,
    module: nn.Module | None = None,
    label: str = "",
    trace_path: str | None = None,
    count_flops: bool = True,
) -> Profile:
    """Profile ``target(*inputs)``: an ``nn.Module`` with its inputs, a training step, any
    function. ``module`` names the model whose submodules get ranges (``target`` itself when it
    is a module). ``trace_path`` keeps the exported Chrome trace. Returns a Profile per step."""
    if steps < 1 or warmup < 0:
        raise ValueError(f"steps must be >= 1 and warmup >= 0, got {steps} and {warmup}")
    if module is None and isinstance(target, nn.Module):
        module = target
    device = _device_of(module, inputs)

    def run():
        return target(*inputs)

    for _ in range(warmup):
        run()
    _sync(device)
    flop_total = None
    if count_flops:
        with FlopCounterMode(display=False) as counter:
            run()
        flop_total = float(counter.get_total_flops())
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    handles = _module_ranges(module) if module is not None else []
    try:
        with torch_profile(activities=activities, record_shapes=True) as prof:
            for _ in range(steps):
                with record_function("roofline.step"):
                    run()
                _sync(device)
    finally:
        for handle in handles:
            handle.remove()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, "rb") as fh:
            text = fh.read()
    if trace_path:
        with open(trace_path, "wb") as fh:
            fh.write(text)
    imported = import_traces([(text, "the profiler's trace")], label=label, max_bytes=OWN_TRACE_BYTES)
    notes = list(imported.notes)
    if flop_total is not None:
        counted = sum(op.flops for op in imported.level("aten"))
        notes.append(
            # In the tiles' unit, one digit more than they show: the two counts differ in the fourth.
            f"FLOPs: {fmt_flops(counted, 4)} per step from the recorded shapes; FlopCounterMode counts "
            f"{fmt_flops(flop_total, 4)} "
            "(matmuls and attention only; it leaves CPU attention and elementwise math out)"
        )
    return imported.model_copy(
        update={
            "source": "profiler",
            "device": device_info(device),
            "flop_counter_flops": flop_total,
            "notes": notes,
        }
    )


# The copy that measures a CPU's memory roof: each of its two buffers COPY_CACHE_MULTIPLE x the
# largest cache the kernel reports, so the copy streams from DRAM and not from the last-level cache
# (a 16 MiB copy on a 32 MiB-L3 EPYC read 217-235 GB/s), within [COPY_MIN_BYTES, COPY_MAX_BYTES].
CPU_CACHES = "/sys/devices/system/cpu/cpu0/cache"
COPY_CACHE_MULTIPLE = 4
COPY_MIN_BYTES = 256 * 2**20
COPY_MAX_BYTES = 2**30
_CACHE_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}


def largest_cache_bytes(caches: str = CPU_CACHES) -> int:
    """The largest CPU cache Linux reports (``index*/size``: "32768K"), 0 where none is readable."""
    sizes = [0]
    for path in Path(caches).glob("index*/size"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        unit = _CACHE_UNITS.get(text[-1:].upper(), 1)
        digits = text[:-1] if text[-1:].upper() in _CACHE_UNITS else text
        if digits.isdigit():
            sizes.append(int(digits) * unit)
    return max(sizes)


def copy_buffer_bytes(caches: str = CPU_CACHES) -> int:
    """Each buffer of the memory-roof copy (``COPY_CACHE_MULTIPLE`` x the largest cache, bounded)."""
    return int(min(COPY_MAX_BYTES, max(COPY_MIN_BYTES, COPY_CACHE_MULTIPLE * largest_cache_bytes(caches))))


def measure_cpu_roofs(seconds: float = 0.2) -> Ceilings:
    """This CPU's roofs, measured quickly: an FP32 GEMM's rate and the bandwidth (read + write
    bytes) of a copy too large for its caches (``copy_buffer_bytes``). What a CPU profile is
    placed against where no other roofs are given."""
    import time

    torch.manual_seed(0)
    n = 512
    a, b = torch.randn(n, n), torch.randn(n, n)
    src = torch.ones(copy_buffer_bytes() // 4)  # written: an untouched page reads as the shared zero page
    dst = torch.empty_like(src)

    def best(fn) -> float:
        fn()
        times, deadline = [], time.perf_counter() + seconds / 2
        while time.perf_counter() < deadline or len(times) < 3:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    gemm = 2 * n**3 / best(lambda: a @ b)
    copy = 2 * src.numel() * 4 / best(lambda: dst.copy_(src))
    one, out = torch.ones(1), torch.empty(1)
    # The least time an aten op takes here: the cheaper of an add of one number and a view, all
    # dispatch. A profiled CPU op whose work is shorter than its calls' dispatch is overhead-bound.
    dispatch = min(min(best(lambda: torch.add(one, one, out=out)), best(lambda: one.view(1))) for _ in range(3))
    return Ceilings(
        name="this CPU",
        peak_flops_per_s={"fp32": gemm, "bf16": gemm, "fp16": gemm},
        memory_bandwidth_bytes_per_s=copy,
        launch_overhead_s=0.0,
        kernel_floor_s=dispatch,
        source="measured",
    )
