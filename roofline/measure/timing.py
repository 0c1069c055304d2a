"""Timing kernels: warm-up, CUDA events (or a synchronised clock on the CPU), the median of many
repeats with the spread, and inputs rotated so that caches do not flatter the result."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from roofline.measure.schema import Timing


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_fn(
    fn: Callable[[object], object],
    inputs: Sequence[object],
    device: torch.device,
    repeats: int = 20,
    warmup: int = 3,
    min_time_s: float = 0.0,
) -> Timing:
    """Time ``fn(inputs[i % len(inputs)])``: each repeat gets the next input set, so a buffer is
    reused only after the others have passed through the cache."""
    for i in range(warmup):
        fn(inputs[i % len(inputs)])
    synchronize(device)
    samples: list[float] = []
    start_all = time.perf_counter()
    i = 0
    while i < repeats or (time.perf_counter() - start_all) < min_time_s and i < repeats * 20:
        arg = inputs[i % len(inputs)]
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(arg)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn(arg)
            samples.append(time.perf_counter() - t0)
        i += 1
    values = np.array(samples)
    return Timing(
        median_s=float(np.median(values)),
        p10_s=float(np.percentile(values, 10)),
        p90_s=float(np.percentile(values, 90)),
        repeats=len(samples),
    )


def rotation_count(bytes_per_set: float, cache_bytes: float, limit: int = 16) -> int:
    """How many input sets to cycle through so that together they exceed twice the cache."""
    if bytes_per_set <= 0:
        return 1
    return int(min(limit, max(1, np.ceil(2 * cache_bytes / bytes_per_set) + 1)))
