"""Interpolation in log space over a measured grid.

Kernel latency is close to a power law between neighbouring measured sizes: flat where a launch
or a wave of tiles sets it, proportional to the work where compute or bandwidth does. So the
table is read as log(latency) multilinear in log(size) on every interpolated axis, and outside
the measured range the last two points' log-log slope carries on (clamped to [0, 2]: latency never
falls with size, and nothing here grows faster than quadratically).
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

    @classmethod
    def from_rows(cls, columns: Sequence[np.ndarray], latency: np.ndarray) -> LogGrid:
        values = [np.unique(np.asarray(c, float)) for c in columns]
        index = tuple(np.searchsorted(v, np.asarray(c, float)) for v, c in zip(values, columns))
        grid = np.full(tuple(len(v) for v in values), np.nan)
        grid[index] = np.log(np.asarray(latency, float))
        return cls(tuple(np.log(v) for v in values), grid)

    def __call__(self, point: Sequence[float]) -> tuple[float, bool]:
        """log(latency) at ``point`` and whether any axis was extrapolated; NaN where the corners
        around the point were not measured."""
        x = np.log(np.asarray(point, float))
        corners, extrapolated = [], False
        for axis, xi in zip(self.axes, x):
            if len(axis) == 1:
                if not np.isclose(xi, axis[0]):
                    return float("nan"), True
                corners.append(((0, 1.0),))
                continue
            i = int(np.clip(np.searchsorted(axis, xi) - 1, 0, len(axis) - 2))
            t = (xi - axis[i]) / (axis[i + 1] - axis[i])
            if t < 0 or t > 1:
                extrapolated = True
            corners.append(((i, 1.0 - t), (i + 1, t)))
        value = self._extrapolate(corners, x) if extrapolated else self._combine(corners)
        return value, extrapolated

    def _combine(self, corners) -> float:
        """Weighted mean of the measured corners (weights renormalised over those measured)."""
        total, weight = 0.0, 0.0
        for combo in product(*corners):
            idx = tuple(c[0] for c in combo)
            value = self.log_latency[idx]
            if np.isnan(value):
                continue
            w = float(np.prod([c[1] for c in combo]))
            if w == 0.0:
                continue
            total += w * value
            weight += w
        return total / weight if weight > 0.0 else float("nan")

    def _extrapolate(self, corners, x) -> float:
        """Outside an axis' range: the value at the nearest edge, continued with the edge
        segment's log-log slope (clamped), axis by axis."""
        edge_corners, slopes_from = [], []
        for axis_i, (axis, pair) in enumerate(zip(self.axes, corners)):
            if len(pair) == 1:
                edge_corners.append(pair)
                continue
            (i0, w0), (i1, w1) = pair
            if w0 >= 0 and w1 >= 0:
                edge_corners.append(pair)
                continue
            edge = i1 if w1 > 1 else i0
            edge_corners.append(((edge, 1.0),))
            slopes_from.append((axis_i, i0, i1, x[axis_i] - axis[edge]))
        base = self._combine(edge_corners)
        if np.isnan(base):
            return base
        for axis_i, i0, i1, dx in slopes_from:
            sub = [c if j != axis_i else ((i0, 1.0),) for j, c in enumerate(edge_corners)]
            lo = self._combine(sub)
            sub = [c if j != axis_i else ((i1, 1.0),) for j, c in enumerate(edge_corners)]
            hi = self._combine(sub)
            slope = (hi - lo) / (self.axes[axis_i][i1] - self.axes[axis_i][i0]) if np.isfinite(hi - lo) else 1.0
            base += float(np.clip(slope, 0.0, MAX_SLOPE)) * dx
        return base


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
