"""Roofline figures: roofs per device and dtype, the ridge, shaded regions, and points on top.

Conventions (DESIGN.md): log-log axes; one trace per ceiling; the ridge point marked;
memory- and compute-bound regions shaded for the first ceiling; every point with a hover that
gives its numbers and units; colours set explicitly; ``uirevision`` so zoom survives reruns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go

from roofline.engine import REGIME_LABELS, REGIMES, Ceilings
from roofline.format import fmt_bytes, fmt_flops, fmt_seconds
from roofline.plots.style import (
    DEVICE_COLORS,
    DTYPE_DASHES,
    GL_THRESHOLD,
    REGIME_COLORS,
    SHADE_COMPUTE,
    SHADE_MEMORY,
    bandwidth_text,
    flops_unit,
    legend_key,
    log_axes,
    sig,
    style_figure,
)


@dataclass
class PointSeries:
    """Points to place on a roofline: intensity (FLOP/B) and FLOP/s (FLOPs over the point's time,
    predicted or measured), with hover data."""

    name: str
    intensity: np.ndarray
    flops_per_s: np.ndarray
    regimes: Sequence[str]
    hover: Sequence[str]
    sizes: np.ndarray | float = 11.0
    line_color: str | None = None  # draw as a trajectory joined by a line of this colour
    symbol: str | Sequence[str] = "circle"  # one symbol, or one per point
    outline_color: str = "#FFFFFF"
    show_legend: bool = True
    extra: dict = field(default_factory=dict)
    color: str | None = None  # one colour for every point (else each point's regime colour)


# What a rate predicted from the datasheet roofs is: the best the device could do, not what it does.
IDEAL_RATE = "attainable (ideal bound)"


def rate_label(ceilings: Ceilings) -> str:
    """What a predicted rate on these roofs is: an ideal bound on the datasheet's, an expectation
    on measured or calibrated roofs."""
    if ceilings.source == "datasheet" and ceilings.roof_source is None:
        return IDEAL_RATE
    return f"expected ({ceilings.source})"


def point_hover(
    title: str,
    flops: float,
    bytes_moved: float,
    time_s: float,
    bound: str,
    attainable_flops_per_s: float,
    extra: Sequence[str] = (),
    rate_label: str = IDEAL_RATE,
) -> str:
    """The standard hover: FLOPs, bytes, intensity, time, the rate that time gives, the roof at
    this intensity, regime, units. ``rate_label`` says what the time is: a prediction from the
    datasheet roofs is an ideal bound (the default), a measured time is achieved."""
    intensity = flops / bytes_moved if bytes_moved else math.inf
    lines = [
        f"<b>{title}</b>",
        f"FLOPs: {fmt_flops(flops)}",
        f"bytes: {fmt_bytes(bytes_moved)}",
        f"intensity: {intensity:,.2f} FLOP/B",
        f"time: {fmt_seconds(time_s)}",
        # In the unit that reads: a decode norm achieves GFLOP/s, and "0.00 TFLOP/s" says nothing.
        f"{rate_label}: {fmt_flops(flops / time_s)}/s" if time_s > 0 else f"{rate_label}: n/a",
        f"roof here: {fmt_flops(attainable_flops_per_s)}/s",
        f"regime: <b>{REGIME_LABELS[bound]}</b>",
        *extra,
    ]
    return "<br>".join(lines)


# Ops below this intensity move data and do next to no arithmetic (a copy that counts one FLOP per
# megabyte): a roofline has nothing to say of them, and one at 1e-7 FLOP/B would squeeze every
# other op into a corner. They are not drawn, as ops with no FLOPs are not; the op tables list them.
MIN_DRAWN_INTENSITY = 1e-3
NARROW_REGION = 1 / 3  # share of the x axis under which a region's label breaks onto two lines


def _x_range(ceilings: Sequence[tuple[Ceilings, str]], series: Sequence[PointSeries]) -> tuple[float, float]:
    lo, hi = 0.1, 10.0
    for c, dtype in ceilings:
        hi = max(hi, c.ridge_intensity(dtype) * 8)
    for s in series:
        finite = np.asarray(s.intensity, float)
        finite = finite[np.isfinite(finite) & (finite >= MIN_DRAWN_INTENSITY)]
        if finite.size:
            lo = min(lo, float(finite.min()) / 2)
            hi = max(hi, float(finite.max()) * 2)
    return lo, hi


def _roof_widths(ceilings: Sequence[tuple[Ceilings, str]], width: float = 2.5) -> list[float]:
    """Line widths: a roof whose memory slope another device's later roof draws over (bandwidths
    within 3%: GB200, GB300 and MI350X at 8 TB/s) is drawn wider by 2 px per such device, at most
    4 px, so each shows as a stripe. One device's roofs per dtype share its colour: not counted."""
    out = []
    for i, (c, _) in enumerate(ceilings):
        bw = c.memory_bandwidth_bytes_per_s
        others = {
            later.name
            for later, _ in ceilings[i + 1 :]
            if later.name != c.name and abs(later.memory_bandwidth_bytes_per_s - bw) <= 0.03 * bw
        }
        out.append(width + min(2.0 * len(others), 4.0))
    return out


def roofline_figure(
    ceilings: Sequence[tuple[Ceilings, str]],
    series: Sequence[PointSeries] = (),
    title: str = "",
    height: int = 580,
    shade_from: int = 0,
) -> go.Figure:
    """A roofline for each (ceilings, dtype) pair, with point series on top; the memory- and
    compute-bound regions are shaded at the ridge of the ``shade_from``-th pair."""
    asked = list(ceilings)
    ceilings = [(c, d) for c, d in asked if c.has_peak(d)]  # an unpublished peak has no roof to draw
    # A device with none of the asked dtypes' peaks keeps its memory slope: the bound its ops are timed on.
    slopes = list({c.name: c for c, _ in asked if not any(c is has for has, _ in ceilings)}.values())
    fig = go.Figure()
    scale, unit = flops_unit(ceilings)
    x_lo, x_hi = _x_range(ceilings, series)
    device_color: dict[str, str] = {}
    y_values: list[float] = []
    for c in slopes:
        color = device_color.setdefault(c.name, DEVICE_COLORS[len(device_color) % len(DEVICE_COLORS)])
        bw = c.memory_bandwidth_bytes_per_s
        xs = np.array([x_lo, x_hi])
        y_values.extend((bw * xs / scale).tolist())
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=bw * xs / scale,
                mode="lines",
                name=f"{c.name}<br>{bandwidth_text(bw)}; no published compute peak",
                line=dict(color=color, width=2.5, dash="dot"),
                hovertemplate=f"<b>{c.name}</b> memory slope (no published compute peak)<br>"
                "intensity %{x:,.2f} FLOP/B<br>at most %{y:,.2f} " + unit + "<extra></extra>",
            )
        )

    widths = _roof_widths(ceilings)
    for i, (c, dtype) in enumerate(ceilings):
        color = device_color.setdefault(c.name, DEVICE_COLORS[len(device_color) % len(DEVICE_COLORS)])
        peak = c.peak(dtype)
        ridge = c.ridge_intensity(dtype)
        bw = c.memory_bandwidth_bytes_per_s
        xs = np.array([x_lo, ridge, x_hi])
        ys = np.minimum(peak, bw * xs) / scale
        y_values.extend(ys.tolist())
        # Two lines, so a long device name and its figures fit a phone-wide legend.
        label = f"{c.name} · {dtype}<br>{sig(peak / scale)} {unit}, {bandwidth_text(bw)}"
        # Engine-measured tables time the ops; the lines they sit under stay the datasheet's.
        line_source = "datasheet" if c.source == "engine-measured" else c.source
        if line_source != "datasheet":
            label += f" [{line_source}]"
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                name=label,
                line=dict(color=color, width=widths[i], dash=DTYPE_DASHES.get(dtype, "solid")),
                hovertemplate=(
                    f"<b>{c.name}</b> {dtype} ({line_source} roof)<br>"
                    "intensity %{x:,.2f} FLOP/B<br>attainable %{y:,.1f} " + unit + "<extra></extra>"
                ),
                legendgroup=f"roof{i}",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[ridge],
                y=[peak / scale],
                mode="markers",
                marker=dict(symbol="diamond", size=10, color=color, line=dict(color="white", width=1)),
                name=f"ridge {ridge:,.0f} FLOP/B",
                showlegend=False,
                legendgroup=f"roof{i}",
                hovertemplate=(
                    f"<b>ridge point</b> {c.name} {dtype}<br>"
                    f"intensity {ridge:,.1f} FLOP/B<br>peak {peak / scale:,.1f} {unit}<extra></extra>"
                ),
            )
        )

    if ceilings:
        c0, d0 = ceilings[min(max(shade_from, 0), len(ceilings) - 1)]
        ridge0 = c0.ridge_intensity(d0)
        for x0, x1, shade in ((x_lo, ridge0, SHADE_MEMORY), (ridge0, x_hi, SHADE_COMPUTE)):
            fig.add_shape(
                type="rect",
                xref="x",
                yref="paper",
                x0=x0,
                x1=x1,
                y0=0,
                y1=1,
                fillcolor=shade,
                line_width=0,
                layer="below",
            )
        # Annotations on log axes take log10 coordinates. A region narrower than a third of the axis
        # (a phone's chart is some 300 px wide) takes its label on two lines, inside its shade.
        decades = math.log10(x_hi / x_lo)
        ridge_at = min(max(ridge0, x_lo), x_hi) if math.isfinite(ridge0) else x_hi
        memory_share, compute_share = math.log10(ridge_at / x_lo) / decades, math.log10(x_hi / ridge_at) / decades
        # The memory region's label at its top left, above the sloped roof, where no point can sit (at its
        # bottom left, the small ops of a step sat on it); the compute region's at its bottom right.
        fig.add_annotation(
            x=math.log10(x_lo) + 0.05,
            y=0.98,
            xref="x",
            yref="paper",
            xanchor="left",
            yanchor="top",
            text="memory-<br>bound" if memory_share < NARROW_REGION else "memory-bound",
            showarrow=False,
            font=dict(color=REGIME_COLORS["memory"], size=13),
        )
        fig.add_annotation(
            x=math.log10(x_hi) - 0.05,
            y=0.02,
            xref="x",
            yref="paper",
            xanchor="right",
            text="compute-<br>bound" if compute_share < NARROW_REGION else "compute-bound",
            showarrow=False,
            font=dict(color=REGIME_COLORS["compute"], size=13),
        )

    for s in series:
        x = np.asarray(s.intensity, float)
        y = np.asarray(s.flops_per_s, float) / scale
        keep = np.isfinite(x) & (x >= MIN_DRAWN_INTENSITY) & (y > 0)
        y_values.extend(y[keep].tolist())
        colors = s.color or [REGIME_COLORS[r] for r, k in zip(s.regimes, keep) if k]
        hover = [h for h, k in zip(s.hover, keep) if k]
        sizes = s.sizes if np.isscalar(s.sizes) else np.asarray(s.sizes)[keep]
        symbols = s.symbol if isinstance(s.symbol, str) else [sym for sym, k in zip(s.symbol, keep) if k]
        trace_cls = go.Scattergl if keep.sum() > GL_THRESHOLD else go.Scatter
        # Points coloured by regime: the legend's swatch would take one point's regime colour and
        # read as that regime, so the series is named by a grey swatch of its symbol instead.
        by_regime = s.color is None and s.show_legend
        group = f"series{len(fig.data)}"
        fig.add_trace(
            trace_cls(
                x=x[keep],
                y=y[keep],
                mode="lines+markers" if s.line_color else "markers",
                name=s.name,
                line=dict(color=s.line_color or "#888888", width=1.5),
                marker=dict(color=colors, size=sizes, symbol=symbols, line=dict(color=s.outline_color, width=1.2)),
                text=hover,
                hovertemplate="%{text}<extra></extra>",
                showlegend=s.show_legend and not by_regime,
                legendgroup=group,
            )
        )
        if by_regime:
            # Its symbol (not the "x" of a point that does not fit), outline and line, so that two
            # series of one chart read apart in the legend as they do on the plot.
            symbol = s.symbol if isinstance(s.symbol, str) else next((m for m in s.symbol if m != "x"), "circle")
            outline = dict(color=s.outline_color, width=1.5) if s.outline_color else None
            key = legend_key(s.name, dict(color="#9e9e9e", size=10, symbol=symbol, line=outline), group)
            if s.line_color:
                key.update(mode="lines+markers", line=dict(color=s.line_color, width=1.5))
            fig.add_trace(key)

    # One legend entry per regime colour, so the marker colours read without hovering.
    used = {r for s in series if s.color is None for r in s.regimes}
    for regime in REGIMES:
        if regime in used:
            fig.add_trace(legend_key(REGIME_LABELS[regime], dict(color=REGIME_COLORS[regime], size=10)))

    if any(not isinstance(s.symbol, str) and "x" in s.symbol for s in series):
        fig.add_trace(legend_key("does not fit in memory", dict(symbol="x", color="#555555", size=10)))

    y_pos = [v for v in y_values if v > 0]
    y_lo = min(y_pos) / 3 if y_pos else 1e-3
    y_hi = max(y_pos) * 2.5 if y_pos else 1e4
    style_figure(
        fig,
        height,
        "roofline",
        title,
        title_font_size=17,
    )
    log_axes(fig, "arithmetic intensity (FLOP/byte)", f"performance ({unit})")
    fig.update_xaxes(range=[math.log10(x_lo), math.log10(x_hi)])
    fig.update_yaxes(range=[math.log10(y_lo), math.log10(y_hi)])
    return fig


def op_table_series(table, label: str, symbol: str, total_time_s: float) -> PointSeries:
    """An evaluated step's ops as points: colour by regime, area by share of the step's time."""
    rows = table.rows()
    intensity = np.array([r["intensity"] if r["intensity"] is not None else np.nan for r in rows], float)
    rate = table.achieved_flops_per_s
    share = table.time_s / total_time_s if total_time_s > 0 else np.zeros(len(rows))
    sizes = 7.0 + 38.0 * np.sqrt(share)
    hover = []
    rate_name = rate_label(table.ceilings)
    for r, s in zip(rows, share):
        roof = table.ceilings.attainable_flops_per_s(r["intensity"] or 0.0, _roof_dtype(table.ceilings, r["dtype"]))
        extra = [
            f"× {r['count']} per step ({label})",
            f"weights {fmt_bytes(r['weight_bytes'])} · activations {fmt_bytes(r['activation_bytes'])} · "
            f"KV {fmt_bytes(r['kv_bytes'])}",
            f"share of step: {s * 100:.1f}%",
        ]
        if r["comm_bytes"]:
            extra.append(f"sent over links: {fmt_bytes(r['comm_bytes'])}")
        hover.append(
            point_hover(
                r["name"],
                r["flops"],
                r["bytes"] or 1.0,
                r["time_s"],
                r["bound"],
                float(roof),
                extra,
                rate_name,
            )
        )
    return PointSeries(
        f"{label} ops",
        intensity,
        rate,
        [r["bound"] for r in rows],
        hover,
        sizes=sizes,
        symbol=symbol,
        outline_color="#333333",
    )


def _roof_dtype(ceilings: Ceilings, dtype: str) -> str:
    return dtype if dtype in ceilings.peak_flops_per_s else next(iter(ceilings.peak_flops_per_s), dtype)


def step_series(
    name: str,
    flops: np.ndarray,
    bytes_moved: np.ndarray,
    time_s: np.ndarray,
    bounds: Sequence[str],
    labels: Sequence[str],
    ceilings: Ceilings,
    dtype: str,
    line_color: str,
    symbol: str = "circle",
    extra: Sequence[Sequence[str]] | None = None,
    fits: Sequence[bool] | None = None,
) -> PointSeries:
    """Whole steps (e.g. a decode step at each batch size) as a trajectory on the roofline.

    Steps that do not fit in memory (``fits`` False) are drawn as crosses."""
    intensity = flops / bytes_moved
    roof = ceilings.attainable_flops_per_s(intensity, dtype)
    hover = [
        point_hover(lbl, f, b, t, r, a, extra[i] if extra else (), rate_label(ceilings))
        for i, (lbl, f, b, t, r, a) in enumerate(zip(labels, flops, bytes_moved, time_s, bounds, roof))
    ]
    return PointSeries(
        name,
        intensity,
        flops / time_s,
        list(bounds),
        hover,
        sizes=8.0,
        line_color=line_color,
        symbol=symbol if fits is None else [symbol if f else "x" for f in fits],
        outline_color=line_color,
    )
