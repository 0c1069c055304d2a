"""Human-readable numbers with units, for tables, hovers and the command line."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence


def _scaled(value: float, unit: str, base: float = 1000.0, digits: int = 3) -> str:
    value = value + 0.0  # -0.0 becomes 0.0: never "-0 B"
    prefixes = ["", "K", "M", "G", "T", "P", "E"]
    magnitude = abs(value)
    i = 0
    while magnitude >= base and i < len(prefixes) - 1:
        magnitude /= base
        value /= base
        i += 1
    return f"{value:.{digits}g} {prefixes[i]}{unit}"


def fmt_flops(flops: float, digits: int = 3) -> str:
    """FLOPs with an SI prefix, to ``digits`` significant digits: 2.04 GFLOP (4: 2.043 GFLOP)."""
    return _scaled(flops, "FLOP", digits=digits)


def fmt_rate(per_s: float, unit: str) -> str:
    """A rate with an SI prefix on its unit: 1.67 MFLOPS, 989 TFLOPS."""
    return _scaled(per_s, unit)


def fmt_amount(x: float) -> str:
    """A count or rate in its own unit: whole, with separators, from 100 up; three significant digits
    below, so a small rate never reads 0 (0.142, 41.7, 674), and "< 0.0001" below that."""
    if x == 0 or abs(x) >= 99.95:
        return f"{x + 0.0:,.0f}"  # -0.0 reads 0
    return f"{x:.3g}" if abs(x) >= 1e-4 else ("< 0.0001" if x > 0 else "> -0.0001")  # never an exponent


def fmt_bytes(n_bytes: float) -> str:
    return _scaled(n_bytes, "B")


def fmt_seconds(seconds: float) -> str:
    """Seconds in the unit that suits their size (ns to s; minutes from 10 min, hours from 2 h,
    days from 3 days, never an exponent); a negative time (a difference) keeps its sign and unit,
    and -0.0 prints as 0 ns, as does anything under a picosecond (a fitted floor of 2e-19 s is a
    zero no clock resolves, not "1.97e-10 ns")."""
    seconds = seconds + 0.0  # -0.0 becomes 0.0: never "-0 ns"
    magnitude = abs(seconds)
    if magnitude < 1e-12:
        return "0 ns"
    if not math.isfinite(magnitude):
        return f"{seconds} s"
    if magnitude >= 599.5:  # minutes from what would read "600 s"
        for unit, size, below in (("min", 60.0, 120 * 60.0), ("h", 3600.0, 72 * 3600.0), ("days", 86400.0, math.inf)):
            if magnitude < below:
                value = seconds / size
                return f"{value:,.0f} {unit}" if abs(value) >= 999.5 else f"{value:.3g} {unit}"
    if magnitude >= 1:
        return f"{seconds:.3g} s"
    if magnitude >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if magnitude >= 1e-6:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e9:.3g} ns"


def count_of(n: int, noun: str) -> str:
    """'1 layer', '32 layers': a count with its noun, plural where it is not one."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def ranks_of(tp: int, attention_dp: int, noun: str = "device") -> str:
    """'8 attention ranks of 1 device': a TP group as attention data parallel ranks."""
    return f"{attention_dp} attention ranks of {count_of(tp // attention_dp, noun)}"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain aligned text table."""
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def strict(value: object) -> object:
    """``value`` with numpy scalars as Python numbers and non-finite floats as None, so that
    ``json.dumps(..., allow_nan=False)`` never meets NaN or Infinity."""
    if isinstance(value, dict):
        return {str(k): strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps_strict(data: object) -> str:
    """Strict JSON (RFC 8259): no NaN, no Infinity."""
    return json.dumps(strict(data), indent=2, allow_nan=False)
