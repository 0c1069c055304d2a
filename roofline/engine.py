"""Roofline math: ceilings, the Op record, and the time and regime of Ops and of a step.

The code lives in ``roofline.ceilings`` (roofs), ``roofline.op_record`` (the Op record)
and ``roofline.optable`` (evaluation); this module is the one place callers import from.

An Op's device time is the largest of four terms (DESIGN.md):
    compute  = FLOPs / peak of the dtype its math runs in
    memory   = bytes moved / memory bandwidth
    comm     = bytes each device sends / link bandwidth (one direction) + latency per collective
    floor    = kernel launches x the least time a kernel takes on the device
and its regime is the term that wins (the floor is overhead). With a calibration the device time
comes from the fitted achievable roofs of the op's class instead (``roofline.calibration``).

Launches are asynchronous: the host dispatches kernels while the device runs earlier ones, so an
eager step takes max(sum of host dispatch time, sum of device time), not a sum of per-op maxima.
A step whose host side is longer is overhead-bound, and its ops that dispatch slower than they
run are too. Replayed from a CUDA graph, the host side is one replay. Everything works on numpy
arrays, so a sweep of thousands of points (or of devices) is one call.
"""

from roofline.ceilings import REGIME_LABELS, REGIMES, Ceilings, regime_label
from roofline.op_record import Op
from roofline.optable import (
    OpTable,
    byte_totals,
    evaluate,
    evaluate_devices,
    time_and_regime,
    time_terms,
    unpublished_peaks,
)

__all__ = [
    "REGIMES",
    "REGIME_LABELS",
    "Ceilings",
    "Op",
    "OpTable",
    "byte_totals",
    "evaluate",
    "evaluate_devices",
    "time_and_regime",
    "time_terms",
    "regime_label",
    "unpublished_peaks",
]
