"""Bar charts: per-dtype peaks, time by op group and regime, memory by term."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from roofline.engine import REGIME_LABELS, REGIMES
from roofline.plots.style import DEVICE_COLORS, MEMORY_COLORS, REGIME_COLORS, label_log_ticks, style_figure


def grouped_bar_figure(
    categories: Sequence[str],
    groups: dict[str, Sequence[float | None]],
    y_title: str,
    log_y: bool = False,
    height: int = 420,
    title: str = "",
) -> go.Figure:
    """One bar per (category, group); ``None`` (unknown) draws nothing and says so on hover. On a log
    axis each value is a dot, side by side per category: a bar there starts at an arbitrary floor, so
    its length says nothing (a 37 TFLOPS bar looked like none beside a 163 TFLOPS one)."""
    fig = go.Figure()
    for i, (name, values) in enumerate(groups.items()):
        ys = [v if v is not None else None for v in values]
        hover = [
            f"<b>{name}</b><br>{cat}: {'unknown' if v is None else f'{v:,.4g}'} {y_title}"
            for cat, v in zip(categories, values)
        ]
        color = DEVICE_COLORS[i % len(DEVICE_COLORS)]
        common = dict(x=list(categories), y=ys, name=name, text=hover, hovertemplate="%{text}<extra></extra>")
        if log_y:
            marker = dict(color=color, size=9, symbol="circle", line=dict(color="#FFFFFF", width=1))
            fig.add_trace(go.Scatter(mode="markers", marker=marker, **common))
        else:
            fig.add_trace(go.Bar(marker_color=color, textposition="none", **common))
    style_figure(fig, height, "bars", title, barmode="group")
    if log_y:
        fig.update_layout(scattermode="group", scattergap=0.15)  # dots of equal peaks side by side, not on top
        fig.update_xaxes(showgrid=True, gridcolor="#F0F0F0")
    fig.update_yaxes(title=y_title, type="log" if log_y else "linear", gridcolor="#E5E5E5")
    return label_log_ticks(fig)


def time_breakdown_figure(phases: dict[str, list[dict]], panel_height: int = 210) -> go.Figure:
    """Time by op group, stacked by regime, one panel per phase (rows as from ``OpTable.rows``),
    the panels one above the other so each keeps the full width (and a phone can read it)."""
    from plotly.subplots import make_subplots

    names = list(phases)
    shown: set[str] = set()
    # 80 px between panels: the upper one's tick labels, then the lower one's title, which carries the
    # axis's unit (an axis title of its own had sat on that title at a phone's width).
    plot_px = (panel_height + 80) * len(names) - 80
    fig = make_subplots(
        rows=len(names), cols=1, subplot_titles=[f"{n} step: time (ms)" for n in names], vertical_spacing=80 / plot_px
    )
    for panel, name in enumerate(names, start=1):
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
                row=panel,
                col=1,
            )
            shown.add(regime)
        fig.update_xaxes(row=panel, col=1, gridcolor="#E5E5E5")
        fig.update_yaxes(autorange="reversed", row=panel, col=1)
    # The legend goes above the panels' own titles, with style_figure's blank title row on top of it
    # where Plotly's toolbar appears.
    style_figure(
        fig,
        plot_px + 100,
        "breakdown",
        barmode="stack",
        margin=dict(l=10, r=10, t=40, b=40),
        legend=dict(yref="paper", yanchor="bottom", y=1.0 + 40 / plot_px),
    )
    return fig


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
    capacity = [rows[n].get("capacity") for n in names]
    if any(c is not None for c in capacity):  # each device's usable memory: what stacks past it does not fit
        fig.add_trace(
            go.Scatter(
                y=names,
                x=[None if c is None else c / 1e9 for c in capacity],
                mode="markers",
                name="usable memory",
                marker=dict(symbol="line-ns", size=14, color="#111111", line=dict(width=3, color="#111111")),
                hovertemplate="%{y}<br>usable memory: %{x:,.1f} GB<extra></extra>",
            )
        )
        for i, c in enumerate(capacity):  # across the whole bar, where the legend's mark is too short to see
            if c is not None:
                fig.add_shape(
                    type="line", x0=c / 1e9, x1=c / 1e9, y0=i - 0.45, y1=i + 0.45, line=dict(color="#111111", width=3)
                )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="GB per device (10⁹ B)", gridcolor="#E5E5E5")
    fig.update_yaxes(autorange="reversed", ticksuffix="  ")  # the devices' names apart from their bars
    style_figure(fig, height, "memory")
    fig.update_layout(legend=dict(traceorder="normal"))
    return fig


def memory_compare_figure(
    names: Sequence[str], bandwidth_tbps: Sequence[float], capacity_gb: Sequence[float], height: int = 420
) -> go.Figure:
    """Memory bandwidth and capacity per device, side by side: two panels, each with its own axis
    and unit (on one axis, capacity had to be scaled to read as "100 GB" beside TB/s)."""
    from plotly.subplots import make_subplots

    # No panel titles: they would sit under the legend; each axis title names its panel.
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.24)
    for i, name in enumerate(names):
        color = DEVICE_COLORS[i % len(DEVICE_COLORS)]
        for col, values, unit, fmt in ((1, bandwidth_tbps, "TB/s", ",.2f"), (2, capacity_gb, "GB", ",.0f")):
            fig.add_trace(
                go.Bar(
                    x=[name],
                    y=[values[i]],
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    marker_color=color,
                    hovertemplate=f"<b>{name}</b><br>%{{y:{fmt}}} {unit}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(title_text="bandwidth (TB/s)", row=1, col=1, gridcolor="#E5E5E5", rangemode="tozero")
    fig.update_yaxes(title_text="capacity (GB, nominal)", row=1, col=2, gridcolor="#E5E5E5", rangemode="tozero")
    style_figure(fig, height, "memory_compare", margin=dict(l=60, r=10, t=40, b=20))
    return fig
