"""A whole model step measured: eager wall time, the same step replayed from a CUDA graph, and
every op's kernel time attributed through profiler ranges named like the engine's ops."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from roofline.measure.model import TORCH_DTYPES, Model, build_model
from roofline.measure.ranges import TIMER
from roofline.measure.schema import Timing
from roofline.measure.timing import synchronize, time_device, time_wall
from roofline.models import ModelConfig


@dataclass
class StepRun:
    eager: Timing
    graph: Timing | None
    graph_note: str | None
    kernel_time_s: float  # per step, measured layers only
    kernels: int
    op_time_s: dict[str, float]  # engine op name -> kernel (device) time per step, measured layers
    attributed_s: float
    op_kernels: dict[str, float] | None = None  # engine op name -> kernels per step (GPU only)


def _event_time(evt, on_device: bool) -> float:
    """Seconds an event's kernels ran (GPU) or its host time (CPU), children included."""
    if on_device:
        us = getattr(evt, "device_time_total", None)
        if us is None:
            us = getattr(evt, "cuda_time_total", 0.0)
        return us / 1e6
    return evt.cpu_time_total / 1e6


def _kernels_under(evt) -> int:
    """Kernels launched inside a host range: its own launches and its children's, all the way down."""
    count = len(getattr(evt, "kernels", None) or [])
    for child in getattr(evt, "cpu_children", None) or []:
        count += _kernels_under(child)
    return count


def _on_host(evt) -> bool:
    return getattr(evt, "device_type", None) == torch.autograd.DeviceType.CPU


def _is_kernel(evt) -> bool:
    """A device event that is work (a kernel, a copy), not the device-side copy of a profiler range:
    the profiler mirrors each ``record_function`` range on the GPU timeline as a user annotation
    spanning from its first kernel's start to its last kernel's end, idle gaps included. Counting
    those beside the kernels would count every kernel twice and, in an eager step where the GPU
    waits on the host, the host's gaps as well."""
    kind = getattr(evt, "device_type", None)
    return kind is not None and not _on_host(evt) and not getattr(evt, "is_user_annotation", False)


def measure_step(
    m: ModelConfig,
    layers: int,
    phase: str,
    batch: int,
    seq_len: int,
    dtype: str,
    device: torch.device,
    repeats: int,
    op_names: set[str],
    model: Model | None = None,
) -> StepRun:
    """One prefill of ``seq_len`` tokens or one decode step with ``seq_len`` cached, on the first
    ``layers`` layers of ``m`` (``model``, built once for several steps, or built here); times per
    step (not scaled to the whole model here)."""
    torch_dtype = TORCH_DTYPES[dtype]
    torch.manual_seed(0)
    if model is None:
        model = build_model(m, layers, device, torch_dtype)
    context = seq_len + (1 if phase == "decode" else 0)
    caches = model.new_cache(batch, context, device, torch_dtype)
    s = seq_len if phase == "prefill" else 1
    position = 0 if phase == "prefill" else seq_len
    ids = torch.randint(0, m.vocab_size, (batch, s), device=device)
    for cache in caches:
        cache["position"] = torch.tensor([position], device=device)
        for key in ("k", "v", "latent", "rope"):
            if key in cache:
                cache[key].normal_()
    rotary = model.rotary(position, s, device, torch_dtype)

    def step() -> torch.Tensor:
        return model(ids, caches, position, rotary)

    with torch.inference_mode():
        eager = time_wall(step, device, repeats=repeats)
        graph, note = None, None
        if device.type == "cuda":
            if m.moe is not None:
                note = "MoE routing is data-dependent here (which experts run is decided on the device): eager only"
            else:
                try:
                    graph = time_device(lambda _: step(), [None], device, calls=1, repeats=repeats)
                except RuntimeError as exc:  # pragma: no cover - a capture failure is reported, not fatal
                    note = f"could not capture the step in a CUDA graph: {str(exc)[:120]}"
                if graph is not None and graph.method != "cuda-graph":
                    graph, note = None, "the step could not be captured in a CUDA graph: eager only"
        else:
            note = "no CUDA graphs on a CPU"
        runs = max(3, repeats // 2)
        op_time: dict[str, float] = defaultdict(float)
        op_kernels: dict[str, float] | None = None
        if device.type == "cuda":  # kernel (device) time inside each op's profiler range
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(runs):
                    step()
                synchronize(device)
            events = prof.events()
            op_kernels = defaultdict(float)
            for evt in events:  # the host-side range: the kernels it launched, its children's included
                if evt.name in op_names and _on_host(evt):
                    op_time[evt.name] += _event_time(evt, True) / runs
                    op_kernels[evt.name] += _kernels_under(evt) / runs
            kernels = [e for e in events if _is_kernel(e)]
            kernel_total = sum(e.device_time for e in kernels) / 1e6 / runs
            count = round(len(kernels) / runs)
            attributed = sum(op_time.values())
        else:  # on a CPU the work is the host's: a clock around each op's range, against the wall time
            # A noisy host (a shared 2-core machine) has outlier runs: medians over 5+ runs, per op
            # and for the whole step, so one slow run moves neither.
            samples, per_op, in_ops = [], defaultdict(list), []
            for _ in range(max(5, runs)):
                TIMER.seconds, TIMER.enabled = {}, True
                t0 = time.perf_counter()
                step()
                samples.append(time.perf_counter() - t0)
                TIMER.enabled = False
                for name, seconds in TIMER.seconds.items():
                    per_op[name].append(seconds)
                in_ops.append(sum(TIMER.seconds.values()))
            op_time.update({name: float(np.median(values)) for name, values in per_op.items()})
            kernel_total, count = float(np.median(samples)), len(op_time)
            # Medians do not add up: the ops' share is the median of each run's own sum, at most
            # that run's wall time, so it stays at most the median step (the per-op medians' sum can pass it).
            attributed = float(np.median(in_ops))
    kernels_per_op = None if op_kernels is None else dict(op_kernels)
    return StepRun(eager, graph, note, kernel_total, count, dict(op_time), attributed, kernels_per_op)
