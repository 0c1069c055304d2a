"""KV-cache capacity charts: sequences that fit against context, and what decode reads."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from roofline.plots.style import DEVICE_COLORS, MEMORY_COLORS, REGIME_COLORS, log_axes, style_figure


def capacity_figure(
    contexts: np.ndarray,
    curves: dict[str, np.ndarray],
    max_context: int,
    no_fit_from: dict[str, int | None] | None = None,
    title: str = "",
    height: int = 500,
    dashes: dict[str, str] | None = None,
    caps: dict[int, list[str]] | None = None,
) -> go.Figure:
    """Max concurrent sequences against context, one curve per device (or variant), log-log.

    ``caps``: the engine's sequence cap (the most sequences it runs at once) and the curves it
    applies to; a cap some of those curves rise past is drawn as a dotted line, since memory then
    holds more sequences than the engine runs.

    ``no_fit_from[name]`` is the context beyond which not even one sequence fits on that device.
    Only the contexts where no curve holds a sequence are shaded: a shade per device would lie
    over another device's curve. A curve with no sequence at any context says so in its legend
    entry. Zero-capacity points are left out (log axes); the x axis ends just past the model's
    maximum context.
    """
    fig = go.Figure()
    x = np.asarray(contexts, float)
    holds = False  # whether any curve holds a sequence at some context
    for i, (name, batches) in enumerate(curves.items()):
        color = DEVICE_COLORS[i % len(DEVICE_COLORS)]
        y = np.where(np.asarray(batches) >= 1, batches, np.nan).astype(float)
        holds = holds or bool(np.isfinite(y).any())
        xs, end = x, (no_fit_from or {}).get(name)
        if end is not None and np.isfinite(y).any() and x[np.isfinite(y)].max() < end < x.max():
            # The longest context one sequence fits at, between two points of the grid: the curve ends there.
            at = int(np.searchsorted(x, end))
            xs, y = np.insert(x, at, end), np.insert(y, at, 1.0)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=y,
                mode="lines+markers",
                name=name if np.isfinite(y).any() else f"{name}: not one sequence fits",
                line=dict(color=color, width=2.5, dash=(dashes or {}).get(name, "solid")),
                marker=dict(size=6, color=color),
                connectgaps=False,
                hovertemplate=(
                    f"<b>{name}</b><br>context %{{x:,.0f}} tokens<br>max %{{y:,.0f}} sequences<extra></extra>"
                ),
            )
        )
    for cap, names in sorted((caps or {}).items()):
        past = [n for n in names if n in curves and np.nanmax(np.asarray(curves[n], float), initial=0) > cap]
        if not past:
            continue
        fig.add_hline(y=cap, line=dict(color="#444444", dash="dot", width=1.2), layer="below")
        # At the right, left of the model's maximum, where the falling curves are far below it.
        fig.add_annotation(
            x=math.log10(max_context),
            y=math.log10(cap),
            xref="x",
            yref="y",
            xanchor="right",
            yanchor="bottom",
            showarrow=False,
            text=f"engine cap {cap:,}" + (f"<br>({', '.join(past)})" if len(caps) > 1 else "") + " ",
            align="right",
            font=dict(size=11, color="#444444"),
        )
    starts = list((no_fit_from or {}).values())
    if starts and all(s is not None for s in starts) and max(starts) < max_context:
        start = max(max(starts), x.min())
        fig.add_shape(
            type="rect",
            xref="x",
            yref="paper",
            x0=start,
            x1=max_context,
            y0=0,
            y1=1,
            fillcolor=REGIME_COLORS["compute"],
            opacity=0.06,
            line_width=0,
            layer="below",
        )
        # Written inside the shade; where the shade is narrow, ending at the model's maximum,
        # under its label and above the curves' last points.
        near_end = math.log10(max_context / start) < 0.6
        fig.add_annotation(
            x=math.log10(max_context if near_end else start),
            y=0.92 if near_end else 0.04,
            xref="x",
            yref="paper",
            xanchor="right" if near_end else "left",
            showarrow=False,
            # Says where the shade starts: near the model's maximum the words run left of the shade.
            # Short lines, broken: one long line ran left over the curves or, on a phone, off the plot.
            text=(
                " not one sequence fits at any context"
                + ("<br>on any device" if len(starts) > 1 else "")
                + "<br>(the weights leave no room)"
                if not holds
                else f" past {start:,.0f} tokens<br>not one sequence fits"
                + ("<br>on any device" if len(starts) > 1 else "")
            ),
            align="right" if near_end else "left",
            font=dict(color=REGIME_COLORS["compute"], size=11),
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
        y=0.99,
        xref="x",
        yref="paper",
        xanchor="right",
        yanchor="top",
        showarrow=False,
        text=f"model max {max_context:,} ",
        font=dict(size=11, color="#444444"),
    )
    log_axes(fig, "context (tokens per sequence)", "max concurrent sequences")
    fig.update_xaxes(range=[math.log10(min(x.min(), max_context)) - 0.05, math.log10(max_context) + 0.08])
    style_figure(fig, height, "capacity", title)
    return fig


def crossover_figure(
    contexts: np.ndarray,
    weight_bytes: np.ndarray,
    kv_bytes: np.ndarray,
    crossover: int | None,
    batch: int,
    height: int = 380,
    fits_up_to: int | None = None,
    device: str = "",
) -> go.Figure:
    """Bytes a decode step reads: weights (flat) against KV cache (growing with context). Past
    ``fits_up_to`` (the longest context at which ``batch`` sequences fit on ``device``) the KV line
    is dashed: reads of a batch the device cannot hold."""
    fig = go.Figure()
    contexts = np.asarray(contexts)
    beyond = contexts > fits_up_to if fits_up_to is not None else np.zeros(contexts.shape, bool)
    fig.add_trace(
        go.Scatter(
            x=contexts,
            y=np.asarray(weight_bytes) / 1e9,
            name="weights read per step",
            line=dict(color=MEMORY_COLORS["weights"], width=2.5),
            hovertemplate="context %{x:,.0f}<br>weights %{y:,.2f} GB<extra></extra>",
        )
    )
    kv_gb = np.asarray(kv_bytes) / 1e9
    fig.add_trace(
        go.Scatter(
            x=contexts[~beyond],
            y=kv_gb[~beyond],
            # the cache read, the new token's K and V among it, and their write (2 tokens above the cached)
            name=f"KV cache read and written per step (batch {batch})",
            line=dict(color=MEMORY_COLORS["KV cache"], width=2.5),
            hovertemplate="context %{x:,.0f}<br>KV cache %{y:,.2f} GB<extra></extra>",
        )
    )
    if beyond.any():
        first = int(np.argmax(beyond))
        span = slice(max(first - 1, 0), None)  # from the last context that fits, so the two lines meet
        fig.add_trace(
            go.Scatter(
                x=contexts[span],
                y=kv_gb[span],
                name=f"… batch {batch} does not fit{' on ' + device if device else ''}",
                line=dict(color=MEMORY_COLORS["KV cache"], width=1.5, dash="dash"),
                hovertemplate="context %{x:,.0f}<br>KV cache %{y:,.2f} GB (does not fit)<extra></extra>",
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
            text=f" KV > weights from {crossover:,} tokens ",
            font=dict(color=REGIME_COLORS["memory"], size=11),
            bgcolor="rgba(255,255,255,0.8)",
        )
    log_axes(fig, "tokens cached per sequence", "GB a decode step moves")
    style_figure(fig, height, "crossover")
    return fig
