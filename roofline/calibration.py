"""Calibrated roofs: achievable efficiency per op class, fitted on measured kernel sweeps.

A datasheet roof says what a device could do; a kernel reaches some fraction of it that depends
on its class and shape. For each class this fits one model to the kernels measured on the device:

    time = latency + max(bytes / (bandwidth x e), FLOPs / (peak x e)),   e = p / (p + p_half)

``latency`` is the kernel's fixed cost (launch, tail, reductions), ``bandwidth`` and ``peak`` the
rates the class achieves, and ``e`` an occupancy term for classes whose parallelism ``p`` varies
(decode attention: batch x KV heads; prefill attention: batch x heads x query tiles): a decode
step at batch 1 cannot fill the GPU, which FlashDecoding-style split-K kernels exist to fix.
The fit minimises the squared log error over the class's sweep points, so every point counts
alike whether it takes 2 us or 2 ms. Classes: ``linear`` (every matmul, skinny GEMV to large
GEMM), ``attention_decode``, ``attention_prefill``, ``norm``, ``residual``, ``activation``.

Linear layers are fitted in three buckets of the rows M they see (a GEMV, a skinny GEMM up to
64 rows, a large GEMM), since libraries run different kernels for each. The fit sees only the
sweeps; a whole model step measured apart is the held-out check.
Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, ClassVar

import numpy as np
from pydantic import Field

from roofline.datafiles import DataRecord

CLASSES: tuple[str, ...] = (
    "linear_m1",
    "linear_skinny",
    "linear_large",
    "attention_decode",
    "attention_prefill",
    "norm",
    "residual",
    "activation",
)
# Linear layers are fitted by the rows M they see: libraries pick different kernels for a GEMV
# (decode at batch 1), a skinny GEMM (small batches) and a large one.
LINEAR_BUCKETS: tuple[tuple[float, str], ...] = ((1, "linear_m1"), (64, "linear_skinny"), (np.inf, "linear_large"))


def linear_bucket(m: float) -> str:
    for top, name in LINEAR_BUCKETS:
        if m <= top:
            return name
    return LINEAR_BUCKETS[-1][1]


# Which terms a class's fit has: bandwidth, peak, occupancy.
# A GEMV (M = 1) does two FLOPs per weight read: memory binds it on every device, and with its
# points all at one intensity a compute term could not be told from the bandwidth term.
_TERMS = {
    "linear_m1": (True, False, False),
    "linear_skinny": (True, True, False),
    "linear_large": (True, True, False),
    "attention_decode": (True, False, True),
    "attention_prefill": (False, True, True),
    "norm": (True, False, False),
    "residual": (True, False, False),
    "activation": (True, False, False),
}
# Elementwise ops no sweep covers (rotary embedding, softmax, gathers) use the norm fit.
_FALLBACK = {"elementwise": "norm"}


def elementwise_flops(op_class: str, elements: float, norm: str = "rmsnorm") -> float:
    """The FLOPs the engine counts for an elementwise kernel of a sweep, over ``elements``
    elements (the hidden size x tokens for a norm or a residual add, the MLP width x tokens for
    SiLU x up), so a sweep point and its op sit at the same intensity."""
    from roofline.ops import ACTIVATION_FLOPS_PER_ELEMENT, NORM_FLOPS_PER_ELEMENT

    per_element = {
        "norm": NORM_FLOPS_PER_ELEMENT[norm],
        "residual": 1.0,
        "activation": ACTIVATION_FLOPS_PER_ELEMENT["gated"],
    }[op_class]
    return float(per_element * elements)


class KernelPoint(DataRecord):
    """One measured kernel of a sweep: what it is, what it moves, how long it took on the device."""

    op_class: str
    name: str
    shape: dict[str, Annotated[int, Field(ge=1, le=2**40)]] = Field(default_factory=dict)
    # Plausible ranges: one kernel's work and time (a larger figure is a corrupt file).
    flops: float = Field(ge=0, le=1e21)
    bytes: float = Field(gt=0, le=1e18)
    parallel: float = Field(default=1.0, gt=0, le=1e12)
    time_s: float = Field(ge=1e-12, le=3600.0)


def sweep_class(point: KernelPoint) -> str:
    """The class a sweep point is fitted in (linear layers by the rows they see)."""
    return linear_bucket(point.shape.get("m", 1)) if point.op_class == "linear" else point.op_class


class ClassFit(DataRecord):
    """The fitted achievable roof of one op class."""

    op_class: str
    latency_s: float = Field(ge=0, le=10.0)
    bandwidth_bytes_per_s: float | None = Field(default=None, ge=1e3, le=1e16)
    flops_per_s: float | None = Field(default=None, ge=1e3, le=1e19)
    parallel_half: float | None = Field(default=None, ge=1e-12, le=1e12)
    points: int = Field(ge=1, le=2**31)
    median_abs_error: float = Field(ge=0, le=1e6)  # |predicted / measured - 1| over the class's points
    max_abs_error: float = Field(ge=0, le=1e6)

    def predict(self, flops: np.ndarray, moved: np.ndarray, parallel: np.ndarray | float = 1.0) -> np.ndarray:
        e = 1.0 if self.parallel_half is None else np.asarray(parallel, float) / (parallel + self.parallel_half)
        memory = np.asarray(moved, float) / (self.bandwidth_bytes_per_s * e) if self.bandwidth_bytes_per_s else 0.0
        compute = np.asarray(flops, float) / (self.flops_per_s * e) if self.flops_per_s else 0.0
        return self.latency_s + np.maximum(memory, compute)


def _predict(params: np.ndarray, terms: tuple[bool, bool, bool], f, b, p) -> np.ndarray:
    latency, log_bw, log_peak, log_half = params
    e = p / (p + np.exp(log_half)) if terms[2] else 1.0
    memory = b / (np.exp(log_bw) * e) if terms[0] else 0.0
    compute = f / (np.exp(log_peak) * e) if terms[1] else 0.0
    return latency + np.maximum(memory, compute)


def _nelder_mead(loss, x0: np.ndarray, step: float, iterations: int = 300) -> np.ndarray:
    """Minimise ``loss`` from ``x0`` with the downhill simplex (Nelder and Mead 1965)."""
    n = len(x0)
    simplex = np.vstack([x0, x0 + step * np.eye(n)])
    values = np.array([loss(x) for x in simplex])
    for _ in range(iterations):
        order = np.argsort(values)
        simplex, values = simplex[order], values[order]
        centroid = simplex[:-1].mean(axis=0)
        reflected = 2 * centroid - simplex[-1]
        r = loss(reflected)
        if r < values[0]:
            expanded = 3 * centroid - 2 * simplex[-1]
            e = loss(expanded)
            simplex[-1], values[-1] = (expanded, e) if e < r else (reflected, r)
        elif r < values[-2]:
            simplex[-1], values[-1] = reflected, r
        else:
            contracted = (centroid + simplex[-1]) / 2
            c = loss(contracted)
            if c < values[-1]:
                simplex[-1], values[-1] = contracted, c
            else:
                simplex[1:] = (simplex[0] + simplex[1:]) / 2
                values[1:] = [loss(x) for x in simplex[1:]]
    return simplex[int(np.argmin(values))]


def fit_class(points: Sequence[KernelPoint], memory_roof_bytes_per_s: float | None = None) -> ClassFit:
    """Least squares on log(time): a coarse-to-fine grid finds the basin, then a simplex descent
    polishes it (the grid alone stalls where latency and bandwidth trade off along a valley). A
    fitted bandwidth past ``memory_roof_bytes_per_s`` (the device's measured memory roof) is fitted
    again held at it, or at the fastest point's own rate where that is higher: a slope past the
    roof comes from sizes too short for their transfer to outweigh the fixed cost, not from a
    faster memory."""
    fit = _fit_class(points)
    roof = memory_roof_bytes_per_s
    if roof and fit.bandwidth_bytes_per_s and fit.bandwidth_bytes_per_s > roof:
        fit = _fit_class(points, max(max(pt.bytes / pt.time_s for pt in points), roof))
    return fit


def _fit_class(points: Sequence[KernelPoint], top_bytes_per_s: float | None = None) -> ClassFit:
    if not points:
        raise ValueError("no kernel points to fit")
    op_class = points[0].op_class
    terms = _TERMS[op_class]
    # A fit needs at least as many points as parameters: with fewer, the occupancy term goes
    # first, then the latency (one point gives one rate; three parameters through it are any
    # three, such as a prefill peak 3.5x the datasheet's).
    if len(points) < 1 + sum(terms) and terms[2]:
        terms = (terms[0], terms[1], False)
    fit_latency = len(points) >= 1 + sum(terms)
    f = np.array([pt.flops for pt in points])
    b = np.array([pt.bytes for pt in points])
    p = np.array([pt.parallel for pt in points])
    t = np.array([pt.time_s for pt in points])
    rate_b = b / t
    rate_f = np.where(f > 0, f / t, 1.0)
    # Search ranges from the data: rates up to 3x the best seen, latency up to the fastest kernel.
    spans = {
        "latency": (0.0, float(t.min())),
        "bw": (np.log(rate_b.max() / 50), np.log(top_bytes_per_s or rate_b.max() * 3)),
        "peak": (np.log(rate_f.max() / 50), np.log(rate_f.max() * 3)),
        "half": (np.log(p.min() / 100 + 1e-9), np.log(p.max() * 10)),
    }
    best = np.array([0.0, np.log(rate_b.max()), np.log(rate_f.max()), np.log(p.max())])
    active = [i for i, on in enumerate((fit_latency, *terms)) if on]
    names = ["latency", "bw", "peak", "half"]
    lo = np.array([spans[n][0] for n in names])
    hi = np.array([spans[n][1] for n in names])
    top = np.array([np.inf, spans["bw"][1] if top_bytes_per_s else np.inf, np.inf, np.inf])  # a roof holds

    def loss(params: np.ndarray) -> np.ndarray:
        pred = np.stack([_predict(pp, terms, f, b, p) for pp in params])
        return np.mean(np.log(pred / t) ** 2, axis=1)

    for _ in range(6):  # refine the grid around the best point six times
        grids = [np.linspace(lo[i], hi[i], 9) if i in active else [best[i]] for i in range(4)]
        mesh = np.array(np.meshgrid(*grids, indexing="ij")).reshape(4, -1).T
        losses = loss(mesh)
        best = mesh[int(np.argmin(losses))]
        width = (hi - lo) / 4
        lo, hi = np.maximum(best - width, [0, -np.inf, -np.inf, -np.inf]), np.minimum(best + width, top)

    # The polish works on unbounded coordinates: latency as a logistic share of the fastest kernel.
    t_min = float(t.min())

    def params_of(x: np.ndarray) -> np.ndarray:
        full = best.copy()
        full[active] = x
        if fit_latency:
            with np.errstate(over="ignore"):  # far out, exp overflows to inf and the share to 0, its limit
                full[0] = t_min / (1 + np.exp(-x[0]))
        return full

    floor, ceiling = np.array([spans[n][0] for n in names]), np.array([spans[n][1] for n in names])

    def bounded_loss(x: np.ndarray) -> float:
        full = params_of(x)
        if np.any(full[1:] < floor[1:]) or np.any(full[1:] > ceiling[1:]):
            return np.inf  # rates and occupancy stay in the ranges the data allows
        return float(loss(full[None])[0])

    share = np.clip(best[0] / t_min, 1e-6, 1 - 1e-6)
    x0 = best[active].copy()
    if fit_latency:
        x0[0] = np.log(share / (1 - share))
    x = _nelder_mead(bounded_loss, x0, step=0.5)
    x = _nelder_mead(bounded_loss, x, step=0.05)
    if loss(params_of(x)[None])[0] < loss(best[None])[0]:
        best = params_of(x)
    errors = np.abs(_predict(best, terms, f, b, p) / t - 1)
    return ClassFit(
        op_class=op_class,
        latency_s=float(best[0]),
        bandwidth_bytes_per_s=float(np.exp(best[1])) if terms[0] else None,
        flops_per_s=float(np.exp(best[2])) if terms[1] else None,
        parallel_half=float(np.exp(best[3])) if terms[2] else None,
        points=len(points),
        median_abs_error=float(np.median(errors)),
        max_abs_error=float(errors.max()),
    )


class Calibration(DataRecord):
    """Fitted achievable roofs per op class for one device, with where they came from."""

    device: str = Field(min_length=1, max_length=200)
    source: str  # what was measured: the results file's device, date and torch version
    fits: dict[str, ClassFit] = Field(min_length=1)
    hardware_id: str | None = None  # the database device it was measured on (it applies to that one)
    memory_bytes: float | None = Field(default=None, gt=0, le=1e18)  # the memory the runtime exposed there
    # Measured with the fits: the host's cost per launch of an eager step of the measured model (its
    # host-bound tiny probe) and the least device time of a kernel (replayed from a CUDA graph).
    host_per_launch_s: float | None = Field(default=None, ge=0, le=1.0)
    kernel_floor_s: float | None = Field(default=None, ge=0, le=1.0)

    kind: ClassVar[str] = "calibrated"

    @property
    def label(self) -> str:
        return f"calibrated on {self.source}"

    @property
    def short_label(self) -> str:
        return f"fitted on {self.device}"

    def device_terms(self, ops, flops: np.ndarray, moved: np.ndarray, ideal: np.ndarray):
        """A roof source (``roofline.roofs``): replacement time terms for ``ops`` (shape (4, ops,
        *sweep), like ``ideal``, the datasheet's) and a label per op. The calibrated time of each op
        goes to the term its fit says binds; classes with no fit keep the datasheet roofs (NaN)."""
        compute = np.full(np.shape(flops), np.nan)
        memory = np.full(np.shape(flops), np.nan)
        labels = []
        for i, op in enumerate(ops):
            # The sweeps time one call of each kernel: an op occurrence is one call.
            per_call_f, per_call_b = flops[i], moved[i]
            parallel = np.asarray(op.meta.get("parallel", 1.0), float)
            if op.op_class == "linear":
                rows = np.broadcast_to(np.asarray(op.meta.get("m", 1.0), float), np.shape(per_call_f))
                buckets = [(name, rows_in) for name, rows_in in self._linear_masks(rows)]
            else:
                name = op.op_class if op.op_class in self.fits else _FALLBACK.get(op.op_class, "")
                buckets = [(name, np.ones(np.shape(per_call_f), bool))]
            fitted = [name for name, mask in buckets if name in self.fits and np.any(mask)]
            labels.append(
                f"calibrated {', '.join(fitted)} ({self.source})" if fitted else f"datasheet (no {op.op_class} fit)"
            )
            for name, mask in buckets:
                fit = self.fits.get(name)
                if fit is None or not np.any(mask):
                    continue
                time = fit.predict(per_call_f, per_call_b, parallel)
                e = 1.0 if fit.parallel_half is None else parallel / (parallel + fit.parallel_half)
                mem = per_call_b / (fit.bandwidth_bytes_per_s * e) if fit.bandwidth_bytes_per_s else 0.0
                cmp = per_call_f / (fit.flops_per_s * e) if fit.flops_per_s else 0.0
                compute_binds = np.asarray(cmp) >= np.asarray(mem)
                compute[i] = np.where(mask, np.where(compute_binds, time, 0.0), compute[i])
                memory[i] = np.where(mask, np.where(compute_binds, 0.0, time), memory[i])
        terms = np.full(ideal.shape, np.nan)
        terms[0], terms[1] = compute, memory
        # The link and the kernel floor stay: a calibrated op is never faster than its floor.
        terms[2] = np.where(np.isnan(compute), np.nan, ideal[2])
        terms[3] = np.where(np.isnan(compute), np.nan, ideal[3])
        return terms, labels

    def _linear_masks(self, rows: np.ndarray):
        """Each linear bucket with the sweep points it covers; a bucket with no fit borrows the
        nearest fitted one."""
        order = [name for _, name in LINEAR_BUCKETS]
        fitted = [i for i, name in enumerate(order) if name in self.fits]
        lower = 0.0
        for i, (top, _) in enumerate(LINEAR_BUCKETS):
            if fitted:
                nearest = order[min(fitted, key=lambda j: abs(j - i))]
                yield nearest, (rows > lower) & (rows <= top)
            lower = top

    def scaled(self, compute: float, memory: float) -> Calibration:
        """What-if: the achievable rates multiplied like the datasheet roofs."""
        fits = {
            k: f.model_copy(
                update={
                    "bandwidth_bytes_per_s": f.bandwidth_bytes_per_s * memory if f.bandwidth_bytes_per_s else None,
                    "flops_per_s": f.flops_per_s * compute if f.flops_per_s else None,
                }
            )
            for k, f in self.fits.items()
        }
        return self.model_copy(update={"fits": fits})


def fit_calibration(
    points: Sequence[KernelPoint],
    device: str,
    source: str,
    hardware_id: str | None = None,
    memory_bytes: float | None = None,
    memory_roof_bytes_per_s: float | None = None,
) -> Calibration:
    """One fit per class that has sweep points, its bandwidth bounded by the measured memory roof
    (``fit_class``)."""
    by_class: dict[str, list[KernelPoint]] = {}
    for pt in points:
        op_class = sweep_class(pt)
        if op_class in _TERMS:
            by_class.setdefault(op_class, []).append(pt.model_copy(update={"op_class": op_class}))
    if not by_class:
        raise ValueError("no kernel sweeps of a calibrated class (linear, attention, norm, residual, activation)")
    fits = {c: fit_class(pts, memory_roof_bytes_per_s) for c, pts in by_class.items()}
    return Calibration(device=device, source=source, fits=fits, hardware_id=hardware_id, memory_bytes=memory_bytes)
