"""Charts of a simulated serving benchmark: latency against request rate with the saturation
knee, TTFT and TPOT distributions of one run, and the server over that run."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from roofline.format import fmt_seconds
from roofline.plots.style import DEVICE_COLORS, MEMORY_COLORS, log_axes, style_figure, translucent

TTFT_COLOR = DEVICE_COLORS[1]
TPOT_COLOR = DEVICE_COLORS[2]
REFERENCE_COLOR = "#555555"
MEASURED_COLOR = "#111111"  # measured benchmark points: black diamonds, the outline in the metric's colour
TARGET_COLOR = "#D62728"


MS = 1e3  # the figures draw latencies in milliseconds, as the metrics beside them read
PAST_SATURATION = "past saturation: a finite run sees the start of a queue that grows without bound"


def _vline(fig: go.Figure, x: float, text: str, color: str, dash: str, y: float, side: str = "left") -> None:
    """A vertical line over the whole plot of log x with its label beside it (none where ``text`` is
    empty); the label is placed separately (log10 coordinates) because ``add_vline``'s label lands in
    the wrong place on log axes."""
    fig.add_shape(
        type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1, line=dict(color=color, dash=dash, width=1.5)
    )
    if not text:
        return
    fig.add_annotation(
        x=math.log10(x),
        y=y,
        xref="x",
        yref="paper",
        text=text,
        showarrow=False,
        xanchor=side,
        yanchor="top",
        font=dict(size=11, color=color),
        bgcolor="rgba(255, 255, 255, 0.8)",
    )


def _hline(fig: go.Figure, y: float, text: str, color: str, dash: str, row: int) -> None:
    """A horizontal line across one panel of log y, labelled at its left end (log10 coordinates)."""
    yref = "y" if row == 1 else f"y{row}"
    fig.add_shape(
        type="line", xref="x domain", yref=yref, x0=0, x1=1, y0=y, y1=y, line=dict(color=color, dash=dash, width=1.5)
    )
    fig.add_annotation(
        x=0.01,
        y=math.log10(y),
        xref="x domain",
        yref=yref,
        text=text,
        showarrow=False,
        xanchor="left",
        yanchor="bottom",
        font=dict(size=11, color=color),
    )


def latency_rate_figure(
    rate_per_s: np.ndarray,
    percentiles: Mapping[str, Mapping[int, np.ndarray]],
    saturation_per_s: float,
    targets: Mapping[str, float | None],
    steady: Mapping[str, np.ndarray] | None = None,
    mean_running: np.ndarray | None = None,
    chosen_rate_per_s: float | None = None,
    title: str = "",
    height: int = 620,
) -> go.Figure:
    """TTFT (top) and TPOT (bottom) against the Poisson request rate, log-log: the p50 line with
    the p90-p99 band shaded, the saturation throughput as a vertical line (the knee), the
    targets, and ``steady`` (the steady-state model at each run's mean batch) dotted.

    ``percentiles[metric][p]``: seconds at each rate, metric ``ttft_s`` or ``tpot_s``; drawn in
    milliseconds, as the page's figures beside it read."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.07)
    rate = np.asarray(rate_per_s, float)
    for row, (metric, label, color) in enumerate((("ttft_s", "TTFT", TTFT_COLOR), ("tpot_s", "TPOT", TPOT_COLOR)), 1):
        p = {k: np.asarray(v, float) * MS for k, v in percentiles[metric].items()}
        fig.add_trace(
            go.Scatter(
                x=rate,
                y=p[99],
                mode="lines",
                line=dict(width=0, color=color),
                legendgroup=metric,
                showlegend=False,
                hoverinfo="skip",
            ),
            row=row,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=rate,
                y=p[90],
                mode="lines",
                line=dict(width=0.5, color=color),
                fill="tonexty",
                fillcolor=translucent(color, 0.22),
                name=f"{label} p90–p99",
                legendgroup=metric,
                hoverinfo="skip",
            ),
            row=row,
            col=1,
        )
        running = np.full(rate.size, np.nan) if mean_running is None else np.asarray(mean_running, float)
        hover = [
            f"<b>{label}</b> at {r:.3g} requests/s<br>p50 {fmt_seconds(a / MS)} · p90 {fmt_seconds(b / MS)} · "
            f"p99 {fmt_seconds(c / MS)}"
            + (f"<br>mean running batch {m:.1f}" if np.isfinite(m) else "")
            + (f"<br>{PAST_SATURATION}" if 0 < saturation_per_s < r else "")
            for r, a, b, c, m in zip(rate, p[50], p[90], p[99], running)
        ]
        fig.add_trace(
            go.Scatter(
                x=rate,
                y=p[50],
                mode="lines+markers",
                line=dict(width=2.5, color=color),
                marker=dict(size=7, color=color),
                name=f"{label} p50",
                legendgroup=metric,
                text=hover,
                hovertemplate="%{text}<extra></extra>",
            ),
            row=row,
            col=1,
        )
        if steady is not None and metric in steady:
            fig.add_trace(
                go.Scatter(
                    x=rate,
                    y=np.asarray(steady[metric], float) * MS,
                    mode="lines",
                    line=dict(width=1.5, color=REFERENCE_COLOR, dash="dot"),
                    name="steady state at each run's mean batch",
                    legendgroup="steady",
                    showlegend=row == 1,
                    hovertemplate=f"steady-state {label} %{{y:.3g}} ms at the mean batch<extra></extra>",
                ),
                row=row,
                col=1,
            )
        target = targets.get(metric)
        if target:
            _hline(fig, target * MS, f"{label} target {fmt_seconds(target)}", TARGET_COLOR, "dash", row)
    log_axes(fig, "", "")
    fig.update_yaxes(title_text="TTFT (ms)", row=1, col=1)
    fig.update_yaxes(title_text="TPOT (ms)", row=2, col=1)
    fig.update_xaxes(title_text="request rate (requests/s, Poisson arrivals)", row=2, col=1)
    shown = np.append(rate, chosen_rate_per_s or rate[0]) if rate.size else np.array([1.0])
    lo, hi = math.log10(shown.min()) - 0.05, math.log10(shown.max()) + 0.05
    fig.update_xaxes(range=[lo, hi])

    def side(x: float) -> str:  # labels of lines in the right half go to their left
        return "right" if math.log10(x) > (lo + hi) / 2 else "left"

    if 0 < saturation_per_s < 10**hi:
        # Past the knee a finite run sees only the start of a queue that a longer run grows without bound:
        # its points read lower than a server held at that rate would give.
        for yref in ("y domain", "y2 domain"):  # each panel, not the gap between them
            fig.add_shape(
                type="rect",
                xref="x",
                yref=yref,
                x0=saturation_per_s,
                x1=10**hi,
                y0=0,
                y1=1,
                fillcolor="rgba(120, 120, 120, 0.10)",
                line_width=0,
                layer="below",
            )
    if saturation_per_s > 0:
        _vline(
            fig,
            saturation_per_s,
            f" saturation {saturation_per_s:.3g} req/s ",
            "#222222",
            "solid",
            1.0,
            side=side(saturation_per_s),
        )
    if chosen_rate_per_s:
        _vline(
            fig,
            chosen_rate_per_s,
            f" this run {chosen_rate_per_s:.3g} req/s ",
            REFERENCE_COLOR,
            "dot",
            0.5,
            side=side(chosen_rate_per_s),
        )
    style_figure(fig, height, "load_rate", title)
    return fig


def distribution_figure(
    seconds: np.ndarray,
    label: str,
    color: str,
    target_s: float | None = None,
    reference_s: float | None = None,
    reference_label: str = "",
    title: str = "",
    height: int = 360,
) -> go.Figure:
    """The empirical CDF of one latency over a run's requests, log x in milliseconds, with
    p50/p90/p99 marked, the target dashed and a reference (the steady-state figure) dotted."""
    values = np.sort(np.asarray(seconds, float)[np.isfinite(seconds)]) * MS
    target_ms = target_s * MS if target_s else None
    reference_ms = reference_s * MS if reference_s and np.isfinite(reference_s) else None
    fig = go.Figure()
    share = np.arange(1, values.size + 1) / max(values.size, 1)
    fig.add_trace(
        go.Scatter(
            x=values,
            y=share,
            mode="lines",
            line=dict(color=color, width=2.5, shape="hv"),
            name=f"{label} of each request",
            hovertemplate=f"{label} ≤ %{{x:.3g}} ms for %{{y:.1%}} of requests<extra></extra>",
        )
    )
    if values.size:
        qs = [50, 90, 99]
        at = np.percentile(values, qs)
        fig.add_trace(
            go.Scatter(
                x=at,
                y=np.array(qs) / 100,
                mode="markers+text",
                marker=dict(size=9, color=color, line=dict(color="#222222", width=1)),
                text=[f"p{q} {fmt_seconds(v / MS)}" for q, v in zip(qs, at)],
                textposition="middle right",
                textfont=dict(size=11),
                name="p50 · p90 · p99",
                hovertemplate="%{text}<extra></extra>",
            )
        )
    has_reference = bool(reference_s and np.isfinite(reference_s))
    # The reference sits at the curve's foot, where any label beside it would cross the curve: it is
    # named under the axis instead.
    x_title = f"{label} (ms)" + (
        f"<br><span style='font-size:11px'>dotted: {reference_label} ({fmt_seconds(reference_s)})</span>"
        if has_reference and reference_label
        else ""
    )
    log_axes(fig, x_title, "share of requests")
    fig.update_yaxes(type="linear", range=[0, 1.05], tickformat=".0%")
    if target_ms:
        _vline(fig, target_ms, f" target {fmt_seconds(target_s)}", TARGET_COLOR, "dash", 0.25)
    if has_reference:
        _vline(fig, reference_ms, "", REFERENCE_COLOR, "dot", 0.0)  # named under the axis
    if values.size:
        shown = [values[0], values[-1]] + [v for v in (target_ms, reference_ms) if v]
        lo, hi = math.log10(min(shown)), math.log10(max(shown))
        # Room on the right for the percentiles' labels, about a quarter of the plot's width.
        fig.update_xaxes(range=[lo - 0.05 - 0.05 * (hi - lo), hi + 0.15 + 0.4 * (hi - lo)])
    style_figure(fig, height, f"load_{label}", title, showlegend=False)
    return fig


def series_figure(
    time_s: np.ndarray,
    running: np.ndarray,
    waiting: np.ndarray,
    kv_used: np.ndarray,
    max_num_seqs: int | None = None,
    marked_s: float | None = None,
    title: str = "",
    height: int = 520,
) -> go.Figure:
    """The server over one run: the running batch, the queue and the KV cache in use. Each value
    is a step's (or a stretch of decode steps'), stamped at its end and drawn over the step."""
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    t = np.asarray(time_s, float)
    rows = (
        (np.asarray(running, float), "running batch", DEVICE_COLORS[0], "requests", "%{y:,.0f} running"),
        (np.asarray(waiting, float), "queue", TARGET_COLOR, "requests", "%{y:,.0f} waiting"),
        (100 * np.asarray(kv_used, float), "KV cache in use", MEMORY_COLORS["KV cache"], "%", "%{y:.1f}% of KV"),
    )
    for row, (y, name, color, unit, hover) in enumerate(rows, 1):
        fig.add_trace(
            go.Scatter(
                x=t,
                y=y,
                mode="lines",
                line=dict(color=color, width=2, shape="vh"),  # a value holds over the step that ends at it
                name=name,
                hovertemplate=f"t = %{{x:.2f}} s: {hover}<extra></extra>",
            ),
            row=row,
            col=1,
        )
        fig.update_yaxes(title_text=f"{name}<br>({unit})", title_standoff=8, rangemode="tozero", row=row, col=1)
        if unit == "requests" and not np.any(y[np.isfinite(y)] >= 5):  # whole requests: no tick at 0.5
            fig.update_yaxes(dtick=1, row=row, col=1)
    top = float(np.nanmax(rows[0][0])) if t.size else 1.0
    if max_num_seqs:
        top = max(top, max_num_seqs)
        fig.add_hline(y=max_num_seqs, line=dict(color=REFERENCE_COLOR, dash="dot", width=1), row=1, col=1)
        fig.add_annotation(
            x=0.01,
            y=max_num_seqs,
            xref="x domain",
            yref="y",
            text=f"max_num_seqs {max_num_seqs}",
            showarrow=False,
            xanchor="left",
            yanchor="bottom",
            font=dict(size=11, color=REFERENCE_COLOR),
        )
    fig.update_yaxes(range=[0, 1.2 * max(top, 1.0)], row=1, col=1)
    if t.size and not np.any(np.asarray(waiting, float) > 0):  # an empty panel says why it is empty
        fig.add_annotation(
            x=0.5,
            y=0.5,
            xref="x2 domain",
            yref="y2 domain",
            # Two short lines: one long one ran past a phone's plot, over the axis title and off its edge.
            text="the queue stayed empty:<br>no request waited for a place",
            showarrow=False,
            bgcolor="rgba(255,255,255,0.9)",  # over the marked step's line
            font=dict(size=11, color=REFERENCE_COLOR),
        )
    fig.update_yaxes(range=[0, 105], row=3, col=1)
    fig.update_xaxes(title_text="time since the first request (s)", row=3, col=1)
    if marked_s is not None:  # unlabelled: the text under the chart says which step it is
        fig.add_shape(
            type="line",
            xref="x",
            yref="paper",
            x0=marked_s,
            x1=marked_s,
            y0=0,
            y1=1,
            line=dict(color="#222222", dash="dash", width=1.5),
        )
    style_figure(fig, height, "load_series", title, showlegend=False)
    return fig
