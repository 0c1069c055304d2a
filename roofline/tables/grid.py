"""Interpolation in log space over a measured grid.

Kernel latency is close to a power law between neighbouring measured sizes: flat where a launch
or a wave of tiles sets it, proportional to the work where compute or bandwidth does. So the
table is read as log(latency) multilinear in log(size) on every interpolated axis, and outside
the measured range the last two points' log-log slope carries on, clamped to [0, the power of that
size the work grows with]: latency never falls with size, and past the largest measured size a
kernel is not slower than its work grows (a GEMM twice as wide is at most two of the measured
width; a prompt's attention grows with its length squared). Without that cap a last segment that
climbs steeply carries on: vLLM's H100 table times a 4,096 x 65,536 bf16 GEMM of one row at 218 us
and of 51,200 columns at 140 us, a slope of 1.79 that read Llama 3's 128,256-column LM head at 725
us, where one twice as wide as the widest measured is 2 x 218 = 436 us at most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

MAX_SLOPE = 2.0


@dataclass(frozen=True)
class LogGrid:
    """Dense grid of log(latency) over log axes; NaN where nothing was measured."""

    axes: tuple[np.ndarray, ...]  # log of each axis' measured values, ascending
    log_latency: np.ndarray  # shape (len(axis) for axis in axes)
    # Every corner around a point must be measured: NaN there marks a point known to be no answer
    # (a host-bound call), not one the table skipped, so the corners left are not read in its place.
    strict: bool = False
    # Per axis, the largest log-log slope read past the measured range: the power of that size the
    # work grows with (None: MAX_SLOPE on every axis).
    max_slopes: tuple[float, ...] | None = None

    @classmethod
    def from_rows(
        cls, columns: Sequence[np.ndarray], latency: np.ndarray, max_slopes: tuple[float, ...] | None = None
    ) -> LogGrid:
        values = [np.unique(np.asarray(c, float)) for c in columns]
        index = tuple(np.searchsorted(v, np.asarray(c, float)) for v, c in zip(values, columns))
        # Several rows at one point (kernels of different families, read together): the fastest.
        grid = np.full(tuple(len(v) for v in values), np.inf)
        np.minimum.at(grid, index, np.log(np.asarray(latency, float)))
        grid[np.isposinf(grid)] = np.nan
        return cls(tuple(np.log(v) for v in values), grid, max_slopes=max_slopes)

    def many(self, points: Sequence[np.ndarray | float]) -> tuple[np.ndarray, np.ndarray]:
        """``__call__`` at every point of broadcast arrays (one per axis) in one pass: log(latency)
        and whether any axis was extrapolated, each of the broadcast shape."""
        arrays = np.broadcast_arrays(*(np.log(np.asarray(p, float)) for p in points))
        shape = arrays[0].shape
        x = [a.reshape(-1) for a in arrays]
        n = x[0].size
        missing = np.zeros(n, bool)  # a single-valued axis asked elsewhere: no answer
        extrapolated = np.zeros(n, bool)
        lows, weights, steps = [], [], []  # per axis: lower corner, its two weights, and dx past the edge
        for axis, xi in zip(self.axes, x):
            if len(axis) == 1:
                off = ~np.isclose(xi, axis[0])
                missing |= off
                extrapolated |= off
                lows.append(np.zeros(n, int))
                weights.append((np.ones(n), np.zeros(n)))
                steps.append(None)
                continue
            i = np.clip(np.searchsorted(axis, xi) - 1, 0, len(axis) - 2)
            t = (xi - axis[i]) / (axis[i + 1] - axis[i])
            below, above = t < 0, t > 1
            extrapolated |= below | above
            # Past an edge the base value is the edge's, continued by the slope (below).
            w1 = np.where(above, 1.0, np.where(below, 0.0, t))
            lows.append(i)
            weights.append((1.0 - w1, w1))
            dx = np.where(above, xi - axis[i + 1], np.where(below, xi - axis[i], 0.0))
            steps.append(dx)
        base = self._combine_many(lows, weights)
        value = base.copy()
        for a, dx in enumerate(steps):
            if dx is None or not np.any(dx != 0):
                continue
            lo = self._combine_many(lows, [w if j != a else (np.ones(n), np.zeros(n)) for j, w in enumerate(weights)])
            hi = self._combine_many(lows, [w if j != a else (np.zeros(n), np.ones(n)) for j, w in enumerate(weights)])
            span = self.axes[a][lows[a] + 1] - self.axes[a][lows[a]]
            slope = np.where(np.isfinite(hi - lo), (hi - lo) / span, 1.0)
            top = MAX_SLOPE if self.max_slopes is None else self.max_slopes[a]
            value = value + np.where(dx != 0, np.clip(slope, 0.0, top) * dx, 0.0)
        value = np.where(missing | np.isnan(base), np.nan, value)
        return value.reshape(shape), extrapolated.reshape(shape)

    def _combine_many(self, lows: list[np.ndarray], weights: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """Weighted mean of the measured corners around every point (weights renormalised over the
        corners measured, zero-weight corners left out): ``_combine`` over arrays."""
        total = np.zeros(lows[0].size)
        weight = np.zeros(lows[0].size)
        lost = np.zeros(lows[0].size, bool)
        for combo in product((0, 1), repeat=len(lows)):
            idx = tuple(np.minimum(low + c, len(axis) - 1) for low, c, axis in zip(lows, combo, self.axes))
            w = np.prod([ws[c] for ws, c in zip(weights, combo)], axis=0)
            value = self.log_latency[idx]
            use = (w != 0) & ~np.isnan(value)
            lost |= (w != 0) & np.isnan(value)
            total += np.where(use, w * np.where(use, value, 0.0), 0.0)
            weight += np.where(use, w, 0.0)
        if self.strict:
            weight = np.where(lost, 0.0, weight)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(weight > 0, total / np.where(weight > 0, weight, 1.0), np.nan)

    def __call__(self, point: Sequence[float]) -> tuple[float, bool]:
        """log(latency) at one point and whether any axis was extrapolated; NaN where the corners
        around the point were not measured."""
        value, extrapolated = self.many(tuple(np.asarray([p], float) for p in point))
        return float(value[0]), bool(extrapolated[0])


def leave_one_out_log_errors(grid: LogGrid) -> dict[int, np.ndarray]:
    """For every interior grid point and every axis: the point predicted from its two measured
    neighbours along that axis (the rest fixed), as log(predicted / measured). Keyed by axis.

    Neighbours are twice as far apart as in the full grid, so this bounds the error of a query
    that falls between two measured points from above."""
    out: dict[int, np.ndarray] = {}
    g = grid.log_latency
    for a, axis in enumerate(grid.axes):
        if len(axis) < 3:
            continue
        lo = np.take(g, range(0, len(axis) - 2), axis=a)
        mid = np.take(g, range(1, len(axis) - 1), axis=a)
        hi = np.take(g, range(2, len(axis)), axis=a)
        shape = [1] * g.ndim
        shape[a] = len(axis) - 2
        t = ((axis[1:-1] - axis[:-2]) / (axis[2:] - axis[:-2])).reshape(shape)
        pred = lo + t * (hi - lo)
        err = (pred - mid)[np.isfinite(pred - mid)]
        out[a] = err
    return out


def near_pair_log_differences(grid: LogGrid, within: float = 0.02) -> dict[int, np.ndarray]:
    """For every two neighbouring measured values of an axis less than ``within`` apart (the GEMM
    tables measure m = 127, 128 and 129, say) and every point of the other axes: log(latency of
    the larger / latency of the smaller). Keyed by axis.

    The work differs by under ``within``, so a smooth law predicts both alike: what they differ by
    is a tile boundary or the measurement's noise, a floor under any interpolation's error at those
    points."""
    out: dict[int, np.ndarray] = {}
    g = grid.log_latency
    for a, axis in enumerate(grid.axes):
        close = np.flatnonzero(np.diff(axis) < np.log1p(within))
        if close.size == 0:
            continue
        diff = np.take(g, close + 1, axis=a) - np.take(g, close, axis=a)
        out[a] = diff[np.isfinite(diff)]
    return out
