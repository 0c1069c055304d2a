"""Profiler ranges named like the engine's ops, so a measured step lines up op by op with its
prediction; on a CPU a host clock per range instead of the profiler."""

from __future__ import annotations

import time
from contextlib import contextmanager

from torch.profiler import record_function


class RangeTimer:
    """Host time per op name, for a CPU, where the profiler's own cost per op would swamp the
    small ops it measures (a clock read per range costs well under a microsecond)."""

    def __init__(self) -> None:
        self.enabled = False
        self.seconds: dict[str, float] = {}


TIMER = RangeTimer()


@contextmanager
def op_range(name: str):
    """A profiler range named like the engine's op (and a clock around it when timing a CPU)."""
    if not TIMER.enabled:
        with record_function(name):
            yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        TIMER.seconds[name] = TIMER.seconds.get(name, 0.0) + time.perf_counter() - start
