"""Plotly figures built from engine data. No Streamlit here: pages only display these.

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

REGIME_COLORS: dict[str, str] = {
    "compute": "#D62728",
    "memory": "#1F77B4",
    "communication": "#2CA02C",
    "overhead": "#9467BD",
}
DEVICE_COLORS: tuple[str, ...] = ("#222222", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#8C564B", "#F0E442")
DTYPE_DASHES: dict[str, str] = {
    "bf16": "solid",
    "fp16": "solid",
    "fp8": "dash",
    "int8": "dashdot",
    "fp4": "dot",
    "tf32": "longdash",
    "fp32": "longdashdot",
    "fp64": "dot",
}
SHADE_MEMORY = "rgba(31, 119, 180, 0.07)"
SHADE_COMPUTE = "rgba(214, 39, 40, 0.06)"
FONT = dict(family="Inter, Helvetica, Arial, sans-serif", size=13, color="#222222")
GL_THRESHOLD = 2000


@dataclass
class PointSeries:
    """Points to place on a roofline: intensity (FLOP/B) and achieved FLOP/s, with hover data."""

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


def point_hover(
    title: str,
    flops: float,
    bytes_moved: float,
    time_s: float,
    bound: str,
    attainable_flops_per_s: float,
    extra: Sequence[str] = (),
) -> str:
    """The standard hover: FLOPs, bytes, intensity, time, attainable TFLOPS, regime, units."""
    intensity = flops / bytes_moved if bytes_moved else math.inf
    lines = [
        f"<b>{title}</b>",
        f"FLOPs: {fmt_flops(flops)}",
        f"bytes: {fmt_bytes(bytes_moved)}",
        f"intensity: {intensity:,.2f} FLOP/B",
        f"time: {fmt_seconds(time_s)}",
        f"achieved: {flops / time_s / 1e12:,.2f} TFLOP/s" if time_s > 0 else "achieved: n/a",
        f"roof here: {attainable_flops_per_s / 1e12:,.2f} TFLOP/s",
        f"regime: <b>{REGIME_LABELS[bound]}</b>",
        *extra,
    ]
    return "<br>".join(lines)


def _sig(value: float) -> str:
    """Four significant figures, without scientific notation for the usual range."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.4g}"


def _x_range(ceilings: Sequence[tuple[Ceilings, str]], series: Sequence[PointSeries]) -> tuple[float, float]:
    lo, hi = 0.1, 10.0
    for c, dtype in ceilings:
        hi = max(hi, c.ridge_intensity(dtype) * 8)
    for s in series:
        finite = np.asarray(s.intensity, float)
        finite = finite[np.isfinite(finite) & (finite > 0)]
        if finite.size:
            lo = min(lo, float(finite.min()) / 2)
            hi = max(hi, float(finite.max()) * 2)
    return lo, hi


def roofline_figure(
    ceilings: Sequence[tuple[Ceilings, str]],
    series: Sequence[PointSeries] = (),
    title: str = "",
    height: int = 580,
) -> go.Figure:
    """A roofline for each (ceilings, dtype) pair, with point series on top."""
    fig = go.Figure()
    x_lo, x_hi = _x_range(ceilings, series)
    device_color: dict[str, str] = {}
    y_values: list[float] = []

    for i, (c, dtype) in enumerate(ceilings):
        color = device_color.setdefault(c.name, DEVICE_COLORS[len(device_color) % len(DEVICE_COLORS)])
        peak = c.peak(dtype)
        ridge = c.ridge_intensity(dtype)
        bw = c.memory_bandwidth_bytes_per_s
        xs = np.array([x_lo, ridge, x_hi])
        ys = np.minimum(peak, bw * xs) / 1e12
        y_values.extend(ys.tolist())
        label = f"{c.name} · {dtype} ({_sig(peak / 1e12)} TFLOP/s, {_sig(bw / 1e12)} TB/s)"
        if c.source != "datasheet":
            label += f" [{c.source}]"
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                name=label,
                line=dict(color=color, width=2.5, dash=DTYPE_DASHES.get(dtype, "solid")),
                hovertemplate=(
                    f"<b>{c.name}</b> {dtype} ({c.source} roof)<br>"
                    "intensity %{x:,.2f} FLOP/B<br>attainable %{y:,.1f} TFLOP/s<extra></extra>"
                ),
                legendgroup=f"roof{i}",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[ridge],
                y=[peak / 1e12],
                mode="markers",
                marker=dict(symbol="diamond", size=10, color=color, line=dict(color="white", width=1)),
                name=f"ridge {ridge:,.0f} FLOP/B",
                showlegend=False,
                legendgroup=f"roof{i}",
                hovertemplate=(
                    f"<b>ridge point</b> {c.name} {dtype}<br>"
                    f"intensity {ridge:,.1f} FLOP/B<br>peak {peak / 1e12:,.1f} TFLOP/s<extra></extra>"
                ),
            )
        )

    if ceilings:
        c0, d0 = ceilings[0]
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
        # Annotations on log axes take log10 coordinates.
        fig.add_annotation(
            x=math.log10(x_lo) + 0.05,
            y=0.02,
            xref="x",
            yref="paper",
            xanchor="left",
            text="memory-bound",
            showarrow=False,
            font=dict(color=REGIME_COLORS["memory"], size=13),
        )
        fig.add_annotation(
            x=math.log10(x_hi) - 0.05,
            y=0.02,
            xref="x",
            yref="paper",
            xanchor="right",
            text="compute-bound",
            showarrow=False,
            font=dict(color=REGIME_COLORS["compute"], size=13),
        )

    for s in series:
        x = np.asarray(s.intensity, float)
        y = np.asarray(s.flops_per_s, float) / 1e12
        keep = np.isfinite(x) & (x > 0) & (y > 0)
        y_values.extend(y[keep].tolist())
        colors = [REGIME_COLORS[r] for r, k in zip(s.regimes, keep) if k]
        hover = [h for h, k in zip(s.hover, keep) if k]
        sizes = s.sizes if np.isscalar(s.sizes) else np.asarray(s.sizes)[keep]
        symbols = s.symbol if isinstance(s.symbol, str) else [sym for sym, k in zip(s.symbol, keep) if k]
        trace_cls = go.Scattergl if keep.sum() > GL_THRESHOLD else go.Scatter
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
                showlegend=s.show_legend,
            )
        )

    # One legend entry per regime colour, so the marker colours read without hovering.
    used = {r for s in series for r in s.regimes}
    for regime in REGIMES:
        if regime in used:
            fig.add_trace(
                go.Scatter(
                    x=[None],
                    y=[None],
                    mode="markers",
                    name=REGIME_LABELS[regime],
                    marker=dict(color=REGIME_COLORS[regime], size=10),
                    hoverinfo="skip",
                )
            )

    if any(not isinstance(s.symbol, str) and "x" in s.symbol for s in series):
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name="does not fit in memory",
                marker=dict(symbol="x", color="#555555", size=10),
                hoverinfo="skip",
            )
        )

    y_pos = [v for v in y_values if v > 0]
    y_lo = min(y_pos) / 3 if y_pos else 1e-3
    y_hi = max(y_pos) * 2.5 if y_pos else 1e4
    style_figure(
        fig,
        height,
        "roofline",
        title,
        title_font_size=17,
        legend=dict(y=-0.14, font=dict(size=12)),
    )
    _log_axes(fig, "arithmetic intensity (FLOP/byte)", "performance (TFLOP/s)")
    fig.update_xaxes(range=[math.log10(x_lo), math.log10(x_hi)])
    fig.update_yaxes(range=[math.log10(y_lo), math.log10(y_hi)])
    return fig


def grouped_bar_figure(
    categories: Sequence[str],
    groups: dict[str, Sequence[float | None]],
    y_title: str,
    log_y: bool = False,
    height: int = 420,
    title: str = "",
) -> go.Figure:
    """One bar per (category, group); ``None`` (unknown) draws no bar and says so on hover."""
    fig = go.Figure()
    for i, (name, values) in enumerate(groups.items()):
        ys = [v if v is not None else None for v in values]
        hover = [
            f"<b>{name}</b><br>{cat}: {'unknown' if v is None else f'{v:,.4g}'} {y_title}"
            for cat, v in zip(categories, values)
        ]
        fig.add_trace(
            go.Bar(
                x=list(categories),
                y=ys,
                name=name,
                marker_color=DEVICE_COLORS[i % len(DEVICE_COLORS)],
                text=hover,
                hovertemplate="%{text}<extra></extra>",
                textposition="none",
            )
        )
    style_figure(fig, height, "bars", title, barmode="group", legend=dict(y=-0.12))
    fig.update_yaxes(title=y_title, type="log" if log_y else "linear", gridcolor="#E5E5E5")
    return fig


def op_table_series(table, label: str, symbol: str, total_time_s: float) -> PointSeries:
    """An evaluated step's ops as points: colour by regime, area by share of the step's time."""
    rows = table.rows()
    intensity = np.array([r["intensity"] if r["intensity"] is not None else np.nan for r in rows], float)
    achieved = table.achieved_flops_per_s
    share = table.time_s / total_time_s if total_time_s > 0 else np.zeros(len(rows))
    sizes = 7.0 + 38.0 * np.sqrt(share)
    hover = []
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
        hover.append(point_hover(r["name"], r["flops"], r["bytes"] or 1.0, r["time_s"], r["bound"], float(roof), extra))
    return PointSeries(
        f"{label} ops",
        intensity,
        achieved,
        [r["bound"] for r in rows],
        hover,
        sizes=sizes,
        symbol=symbol,
        outline_color="#333333",
    )


def _roof_dtype(ceilings: Ceilings, dtype: str) -> str:
    return dtype if dtype in ceilings.peak_flops_per_s else next(iter(ceilings.peak_flops_per_s))


def time_breakdown_figure(phases: dict[str, list[dict]], height: int = 380) -> go.Figure:
    """Time by op group, stacked by regime, one panel per phase (rows as from ``OpTable.rows``)."""
    from plotly.subplots import make_subplots

    names = list(phases)
    shown: set[str] = set()
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=[f"{n} step" for n in names], horizontal_spacing=0.16)
    for col, name in enumerate(names, start=1):
        rows = phases[name]
        groups = list(dict.fromkeys(r["group"] for r in rows))
        for regime in REGIMES:
            times = [sum(r["time_s"] for r in rows if r["group"] == g and r["bound"] == regime) * 1e3 for g in groups]
            if not any(times):
                continue
            fig.add_trace(
                go.Bar(
                    y=groups,
                    x=times,
                    orientation="h",
                    name=REGIME_LABELS[regime],
                    marker_color=REGIME_COLORS[regime],
                    legendgroup=regime,
                    showlegend=regime not in shown,
                    hovertemplate=f"%{{y}}: %{{x:.3f}} ms {REGIME_LABELS[regime]}<extra>{name}</extra>",
                ),
                row=1,
                col=col,
            )
            shown.add(regime)
        fig.update_xaxes(title_text="time (ms)", row=1, col=col, gridcolor="#E5E5E5")
        fig.update_yaxes(autorange="reversed", row=1, col=col)
    style_figure(fig, height, "breakdown", barmode="stack", legend=dict(y=-0.18), margin=dict(l=10, r=10, t=40, b=40))
    return fig


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
        point_hover(lbl, f, b, t, r, a, extra[i] if extra else ())
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


def _log_axes(fig: go.Figure, x_title: str, y_title: str) -> None:
    for update, title in ((fig.update_xaxes, x_title), (fig.update_yaxes, y_title)):
        update(
            type="log",
            title=title,
            showgrid=True,
            gridcolor="#E5E5E5",
            zeroline=False,
            linecolor="#444444",
            mirror=True,
            ticks="outside",
        )


def style_figure(fig: go.Figure, height: int, revision: str, title: str = "", **overrides) -> None:
    """The house style of every chart: white background, horizontal legend below, the user's zoom
    kept across reruns (`revision`). `overrides` go to `update_layout` last."""
    fig.update_layout(
        title=dict(text=title, x=0.01, font=dict(size=16)),
        height=height,
        template="plotly_white",
        font=FONT,
        paper_bgcolor="white",
        plot_bgcolor="white",
        uirevision=revision,
        hoverlabel=dict(bgcolor="white", font=dict(size=12, color="#222222")),
        legend=dict(orientation="h", yanchor="top", y=-0.16, xanchor="left", x=0),
        margin=dict(l=70, r=20, t=50 if title else 20, b=40),
    )
    if overrides:
        fig.update_layout(**overrides)


def capacity_figure(
    contexts: np.ndarray,
    curves: dict[str, np.ndarray],
    max_context: int,
    no_fit_from: dict[str, int | None] | None = None,
    title: str = "",
    height: int = 500,
    dashes: dict[str, str] | None = None,
) -> go.Figure:
    """Max concurrent sequences against context, one curve per device (or variant), log-log.

    ``no_fit_from[name]`` is the context beyond which not even one sequence fits; that region
    is shaded in the curve's colour. Zero-capacity points are left out (log axes).
    """
    fig = go.Figure()
    x = np.asarray(contexts, float)
    for i, (name, batches) in enumerate(curves.items()):
        color = DEVICE_COLORS[i % len(DEVICE_COLORS)]
        y = np.where(np.asarray(batches) >= 1, batches, np.nan).astype(float)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines+markers",
                name=name,
                line=dict(color=color, width=2.5, dash=(dashes or {}).get(name, "solid")),
                marker=dict(size=6, color=color),
                connectgaps=False,
                hovertemplate=(
                    f"<b>{name}</b><br>context %{{x:,.0f}} tokens<br>max %{{y:,.0f}} sequences<extra></extra>"
                ),
            )
        )
        start = (no_fit_from or {}).get(name)
        if start is not None and start < max_context:
            fig.add_shape(
                type="rect",
                xref="x",
                yref="paper",
                x0=max(start, x.min()),
                x1=max_context,
                y0=0,
                y1=1,
                fillcolor=color,
                opacity=0.08,
                line_width=0,
                layer="below",
            )
            fig.add_annotation(
                x=math.log10(max(start, x.min())),
                y=0.04 + 0.06 * i,
                xref="x",
                yref="paper",
                xanchor="left",
                showarrow=False,
                text=f"  not even one sequence fits ({name})",
                font=dict(color=color, size=11),
            )
    fig.add_shape(
        type="line",
        xref="x",
        yref="paper",
        x0=max_context,
        x1=max_context,
        y0=0,
        y1=1,
        line=dict(color="#444444", dash="dot", width=1.5),
    )
    fig.add_annotation(
        x=math.log10(max_context),
        y=1.0,
        xref="x",
        yref="paper",
        xanchor="right",
        yanchor="bottom",
        showarrow=False,
        text=f"model max {max_context:,}",
        font=dict(size=11, color="#444444"),
    )
    _log_axes(fig, "context length (tokens per sequence)", "max concurrent sequences")
    style_figure(fig, height, "capacity", title)
    return fig


MEMORY_COLORS = {
    "weights": "#7F7F7F",
    "KV cache": "#1F77B4",
    "activations": "#FF7F0E",
    "free": "#C7E9C0",
    "over capacity": "#D62728",
}


def memory_bar_figure(rows: dict[str, dict[str, float]], height: int = 260) -> go.Figure:
    """A stacked horizontal bar per device: weights / KV / activations / free, in GB per device."""
    fig = go.Figure()
    names = list(rows)
    for part, color in MEMORY_COLORS.items():
        values = [rows[n].get(part, 0.0) / 1e9 for n in names]
        if not any(values):
            continue
        fig.add_trace(
            go.Bar(
                y=names,
                x=values,
                orientation="h",
                name=part,
                marker_color=color,
                hovertemplate=f"%{{y}}<br>{part}: %{{x:,.1f}} GB<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="GB per device (10⁹ B)", gridcolor="#E5E5E5")
    fig.update_yaxes(autorange="reversed")
    style_figure(fig, height, "memory")
    fig.update_layout(legend=dict(y=-0.3, traceorder="normal"))
    return fig


def crossover_figure(
    contexts: np.ndarray,
    weight_bytes: np.ndarray,
    kv_bytes: np.ndarray,
    crossover: int | None,
    batch: int,
    height: int = 380,
) -> go.Figure:
    """Bytes a decode step reads: weights (flat) against KV cache (growing with context)."""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=contexts,
            y=np.asarray(weight_bytes) / 1e9,
            name="weights read per step",
            line=dict(color=MEMORY_COLORS["weights"], width=2.5),
            hovertemplate="context %{x:,.0f}<br>weights %{y:,.2f} GB<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=contexts,
            y=np.asarray(kv_bytes) / 1e9,
            name=f"KV cache read per step (batch {batch})",
            line=dict(color=MEMORY_COLORS["KV cache"], width=2.5),
            hovertemplate="context %{x:,.0f}<br>KV cache %{y:,.2f} GB<extra></extra>",
        )
    )
    if crossover is not None:
        fig.add_shape(
            type="line",
            xref="x",
            yref="paper",
            x0=crossover,
            x1=crossover,
            y0=0,
            y1=1,
            line=dict(color=REGIME_COLORS["memory"], dash="dash"),
        )
        right_half = math.log10(crossover) > math.log10(float(np.max(contexts))) / 2
        fig.add_annotation(
            x=math.log10(crossover),
            y=0.97,
            xref="x",
            yref="paper",
            xanchor="right" if right_half else "left",
            showarrow=False,
            text=f"  KV reads overtake weights at {crossover:,} tokens  ",
            font=dict(color=REGIME_COLORS["memory"]),
        )
    _log_axes(fig, "context length (tokens cached per sequence)", "GB read per decode step, per device")
    style_figure(fig, height, "crossover")
    return fig
