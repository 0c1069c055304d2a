"""What a results file's own figures say about its roofs: sweep kernels that moved data faster
than the suite's copy and read kernels (so those roofs are what the suite's simple kernels reach,
not the device's limit), and fitted latency floors too small for the sweep's sizes to resolve."""

from __future__ import annotations

from roofline.calibration import sweep_class
from roofline.format import fmt_seconds
from roofline.measure.schema import Results

RESOLVED = 0.01  # a fitted floor under this share of its class's fastest point is not resolved
NOT_RESOLVED = "not resolved"


def fastest_point_s(results: Results) -> dict[str, float]:
    """Each calibration class's fastest sweep point, in seconds."""
    fastest: dict[str, float] = {}
    for p in results.sweeps:
        cls = sweep_class(p)
        fastest[cls] = min(fastest.get(cls, p.time_s), p.time_s)
    return fastest


def latency_label(latency_s: float, fastest_s: float | None) -> str:
    """A fitted latency floor as text; one under 1% of the class's fastest point is a fit's
    leftover, not a floor the sweep saw (large GEMMs: every point is many microseconds of work)."""
    if fastest_s and latency_s < RESOLVED * fastest_s:
        return NOT_RESOLVED
    return fmt_seconds(latency_s)


def unresolved_note(results: Results) -> str:
    """'' unless a class's fitted floor is not resolved: then which, and why."""
    if results.calibration is None:
        return ""
    fastest = fastest_point_s(results)
    names = [
        f"{cls} (fastest point {fmt_seconds(fastest[cls])})"
        for cls, fit in results.calibration.fits.items()
        if latency_label(fit.latency_s, fastest.get(cls)) == NOT_RESOLVED
    ]
    if not names:
        return ""
    return (
        f"Latency {NOT_RESOLVED}: " + ", ".join(names) + ": the fitted floor is under 1% of the class's fastest "
        "sweep point, so the sweep's sizes do not show one; these classes are predicted by their rates alone."
    )


def above_roof_line(results: Results) -> str:
    """'' unless a sweep kernel moved data faster than the copy and read roofs: then which, how
    fast, and what that says of those roofs."""
    c = results.ceilings
    if c is None or not results.sweeps:
        return ""
    roof_tbps = max(c.memory_bandwidth_tbps, c.read_bandwidth_tbps or 0.0)
    rates = [(p.bytes / p.time_s / 1e12, p) for p in results.sweeps if p.time_s > 0]
    above = [(r, p) for r, p in rates if r > roof_tbps]
    if not above:
        return ""
    rate, best = max(above, key=lambda item: item[0])
    shape = ", ".join(f"{k} {v:,}" for k, v in best.shape.items())
    return (
        f"{len(above)} of {len(rates)} sweep kernels moved data faster than the copy and read roofs "
        f"(the fastest: {best.name} at {shape}, {rate * 1e3:,.0f} GB/s against {roof_tbps * 1e3:,.0f} GB/s). "
        "The memory roofs are what this suite's copy and reduction kernels reach, and this device's fastest "
        "kernels go past them: those points sit above the measured roofs on the chart (the datasheet's stand "
        "above them all). The calibration's fitted rates "
        "come from the sweeps themselves."
    )


def fitted_above_roof(results: Results) -> dict[str, float]:
    """The op classes whose fitted bandwidth is above every memory roof the file measured and
    above the class's own fastest point, with that bandwidth (bytes/s): a slope, not a rate."""
    c, cal = results.ceilings, results.calibration
    if c is None or cal is None:
        return {}
    roof = max(c.memory_bandwidth_tbps, c.read_bandwidth_tbps or 0.0) * 1e12
    fastest: dict[str, float] = {}  # each class's fastest point's own rate: a fit held there is fine
    for p in results.sweeps:
        if p.time_s > 0:
            cls = sweep_class(p)
            fastest[cls] = max(fastest.get(cls, 0.0), p.bytes / p.time_s)
    return {
        f.op_class: f.bandwidth_bytes_per_s
        for f in cal.fits.values()
        if f.bandwidth_bytes_per_s and f.bandwidth_bytes_per_s > max(roof, fastest.get(f.op_class, 0.0)) * (1 + 1e-9)
    }


def fitted_above_roof_note(results: Results) -> str:
    """'' unless a class's fitted bandwidth is above every memory roof the file measured: then
    which, and what such a rate is (a fit's marginal rate over sizes too short for their transfer
    to outweigh the kernel's fixed cost, not a bandwidth the kernel reaches)."""
    slopes = fitted_above_roof(results)
    c, cal = results.ceilings, results.calibration
    above = [f for f in cal.fits.values() if f.op_class in slopes] if slopes else []
    if not above:
        return ""
    roof = max(c.memory_bandwidth_tbps, c.read_bandwidth_tbps or 0.0) * 1e12
    largest: dict[str, tuple[float, float]] = {}
    for p in results.sweeps:
        cls = sweep_class(p)
        if p.bytes > largest.get(cls, (0.0, 0.0))[0]:
            largest[cls] = (p.bytes, p.time_s)
    parts = []
    for f in above:
        if f.op_class in largest:
            moved, time_s = largest[f.op_class]
            parts.append(
                f"{f.op_class} {f.bandwidth_bytes_per_s / 1e9:,.0f} GB/s (its largest point {moved / 1e6:,.0f} MB in "
                f"{fmt_seconds(time_s)}, {moved / time_s / 1e9:,.0f} GB/s)"
            )
    return (
        f"Fitted above the measured memory roof ({roof / 1e9:,.0f} GB/s): " + "; ".join(parts) + ". Such a rate is "
        "the fit's slope between sizes whose transfers are too short to outweigh the kernel's fixed cost, not a "
        "bandwidth the kernel reaches: it predicts the sizes swept, and larger ones run slower than it says (the "
        "suite now holds such a rate at the measured roof, or at the class's fastest point where that is faster, "
        "and sweeps norms, residual adds and activations to 16,384 tokens)."
    )
