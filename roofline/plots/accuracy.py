"""Predicted against measured on log axes: one point per serving run, the line of perfect
agreement and a band of ±25% around it, one colour per engine."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from roofline.plots.style import DEVICE_COLORS, GL_THRESHOLD, legend_key, log_axes, style_figure

ENGINE_COLORS = {"vllm": DEVICE_COLORS[1], "sglang": DEVICE_COLORS[2], "trtllm": DEVICE_COLORS[3]}
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
BAND = 0.25


def accuracy_figure(
    measured_ms: Sequence[float],
    predicted_ms: Sequence[float],
    engines: Sequence[str],
    hovers: Sequence[str],
    title: str,
    metric: str,
    below_ideal: Sequence[bool] | None = None,
) -> go.Figure:
    """Measured (x) against predicted (y) ``metric`` in ms; points above the line are predicted
    slower than measured. Runs flagged in ``below_ideal`` (measured below the ideal bound of their
    simulated setup) are drawn hollow."""
    x, y = np.asarray(measured_ms, float), np.asarray(predicted_ms, float)
    hollow = np.zeros(x.shape, bool) if below_ideal is None else np.asarray(below_ideal, bool)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    fig = go.Figure()
    if ok.any():
        lo = float(min(x[ok].min(), y[ok].min())) / 1.3
        hi = float(max(x[ok].max(), y[ok].max())) * 1.3
        line = np.array([lo, hi])
        for factor, name, dash in (
            (1.0, "predicted = measured", "solid"),
            (1 + BAND, f"±{BAND:.0%}", "dot"),
            (1 - BAND, f"±{BAND:.0%}", "dot"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=line,
                    y=line * factor,
                    mode="lines",
                    name=name,
                    line=dict(color="#888888", width=1, dash=dash),
                    hoverinfo="skip",
                    showlegend=factor != 1 - BAND,
                    legendgroup=name,
                )
            )
    engines = np.asarray(engines)
    hovers = np.asarray(hovers, dtype=object)
    # SVG up to the house threshold, not WebGL: in a browser without a GPU, a WebGL chart's context
    # and shaders cost a cold page about 0.4 s before its first point, more than 2,000 SVG markers
    # take to draw. Each engine's hollow runs are a trace of their own, in the engine's legend
    # group, so that every trace is styled as a whole instead of point by point.
    trace_cls = go.Scattergl if ok.sum() > GL_THRESHOLD else go.Scatter
    order = list(dict.fromkeys(engines[ok].tolist()))  # the legend's order: as the runs come
    # The engine with the most runs is drawn first, under the others: drawn last, TensorRT-LLM's 944
    # runs covered most of vLLM's and SGLang's where the three overlap.
    for engine in sorted(order, key=lambda e: -int((ok & (engines == e)).sum())):
        color = ENGINE_COLORS.get(engine, "#444444")
        runs = ok & (engines == engine)
        name = f"{ENGINE_NAMES.get(engine, engine)} ({int(runs.sum())})"
        for open_ in (False, True):
            pick = runs & (hollow == open_)
            if not pick.any():
                continue
            fig.add_trace(
                trace_cls(
                    x=x[pick],
                    y=y[pick],
                    mode="markers",
                    name=name,
                    legendgroup=engine,
                    legendrank=1000 + order.index(engine),
                    showlegend=not open_ or not (runs & ~hollow).any(),  # one entry per engine
                    marker=dict(
                        size=6,
                        color=color,
                        opacity=0.7,  # on each marker: where runs pile up, the colour deepens
                        symbol="circle-open" if open_ else "circle",
                        line=dict(width=1.5 if open_ else 0, color=color),
                    ),
                    text=hovers[pick],
                    hovertemplate="%{text}<extra></extra>",
                )
            )
    if (hollow & ok).any():
        key = legend_key(
            f"hollow: measured below the ideal bound ({int((hollow & ok).sum())})",
            dict(size=7, color="#444444", symbol="circle-open"),
        )
        fig.add_trace(key.update(legendrank=2000))  # after the engines
    log_axes(fig, f"measured {metric} (ms)", f"predicted {metric} (ms)")
    style_figure(fig, 460, f"accuracy-{metric}", title)
    return fig
