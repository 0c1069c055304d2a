"""Training figures: memory by term over a sweep with each device's capacity, and the peaks of
each way to load a checkpoint."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from roofline.plots.style import DEVICE_COLORS, style_figure, translucent

TRAIN_MEMORY_COLORS = {
    "weights": "#7F7F7F",
    "autocast weight copies": "#BCBD22",
    "master weights (fp32)": "#A6A6A6",
    "optimizer state": "#8C564B",
    "gradients": "#9467BD",
    "activations": "#FF7F0E",
    "logits and loss": "#E377C2",
    "transient": "#17BECF",
}


def training_memory_figure(
    x: Sequence[float],
    terms: dict[str, np.ndarray],
    capacities: dict[str, float],
    x_title: str,
    title: str,
    height: int = 420,
    labels: Sequence[str] | None = None,
) -> go.Figure:
    """Memory per device at the step's peak, stacked by term, at each x; one dashed line per
    device at its usable capacity. Bars above a line do not fit that device. ``labels`` name the
    bars (default: each x with thousands separators)."""
    fig = go.Figure()
    labels = list(labels) if labels is not None else [f"{int(v):,}" for v in x]
    for term, color in TRAIN_MEMORY_COLORS.items():
        values = np.asarray(terms.get(term, np.zeros(len(x))), float) / 1e9
        if not np.any(values > 0):
            continue
        fig.add_trace(
            go.Bar(
                x=labels,
                y=values,
                name=term,
                # Lighter than the devices' capacity lines, so a line keeps its colour across a bar
                # of a similar hue (H200's orange over the activations); the legend shows the same.
                marker_color=translucent(color, 0.6),
                hovertemplate=f"{x_title} %{{x}}<br>{term}: %{{y:,.2f}} GB<extra></extra>",
            )
        )
    for i, (name, capacity) in enumerate(capacities.items()):
        fig.add_trace(
            go.Scatter(
                x=labels,
                y=[capacity / 1e9] * len(labels),
                mode="lines",
                name=f"{name}: {capacity / 1e9:,.1f} GB usable",
                line=dict(color=DEVICE_COLORS[i % len(DEVICE_COLORS)], dash="dash", width=2.5),
                hovertemplate=f"{name}: %{{y:,.1f}} GB usable<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title=x_title, type="category")
    fig.update_yaxes(title="GB per device at the peak (10⁹ B)", gridcolor="#E5E5E5", rangemode="tozero")
    # Keep the capacities readable: bars far above every device are cut at the top (their
    # hover still gives each term).
    totals = sum(np.asarray(v, float) for v in terms.values()) / 1e9 if terms else np.zeros(1)
    top = 1.6 * max(capacities.values()) / 1e9 if capacities else float(np.max(totals))
    top = max(top, 1.3 * float(np.min(totals)))
    if float(np.max(totals)) > top:
        fig.update_yaxes(range=[0, top])
        for i, total in enumerate(np.broadcast_to(totals, (len(labels),))):
            if total > top:  # a cut bar says how tall it is, at its top (x: the category's position)
                fig.add_annotation(
                    x=i,
                    y=top,
                    xref="x",
                    yref="y",
                    yanchor="top",
                    showarrow=False,
                    text=f"↑ {total:,.0f} GB",
                    textangle=-90,  # along the bar: narrow bars on a phone keep their labels apart
                    font=dict(size=10, color="#222222"),
                    bgcolor="rgba(255,255,255,0.85)",
                    hovertext=f"{total:,.1f} GB: the bar is cut at the top",
                )
    style_figure(fig, height, f"train-{x_title}", title, legend=dict(traceorder="normal"))
    return fig


def loading_figure(
    methods: Sequence[str],
    host: Sequence[float],
    device: Sequence[float],
    device_capacity: float,
    host_ram: float | None,
    device_label: str = "device memory",
) -> go.Figure:
    """Host RAM and device peaks of each loading method, with the device's memory (named
    ``device_label``: what the runtime exposes, or the nominal figure) and the host's RAM, when
    given, as lines."""
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=list(methods),
            y=np.asarray(host) / 1e9,
            name="host RAM peak",
            marker_color="#8C564B",
            hovertemplate="%{x}<br>host RAM: %{y:,.1f} GB<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            x=list(methods),
            y=np.asarray(device) / 1e9,
            name="device memory peak",
            marker_color="#1F77B4",
            hovertemplate="%{x}<br>device: %{y:,.1f} GB<extra></extra>",
        )
    )
    lines = [(device_label, device_capacity, "#1F77B4")]
    if host_ram:
        lines.append(("host RAM", host_ram, "#8C564B"))
    # A limit far above every bar would squash them to the floor: the axis stops above the bars and
    # such a limit is a legend entry of its own line, named as above the chart, instead of drawn.
    tallest = float(max(np.max(np.asarray(host, float)), np.max(np.asarray(device, float)), 1.0))
    top = 1.35 * tallest
    for name, value, color in lines:
        line = dict(color=color, dash="dash", width=1.5)
        if value > 2 * tallest:
            label = f"{name}:<br>{value / 1e9:,.1f} GB, above the chart"  # two lines: it fits a phone
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=line, name=label, hoverinfo="skip"))
            continue
        top = max(top, 1.1 * value)
        fig.add_hline(
            y=value / 1e9, line=line, annotation_text=f"{name} {value / 1e9:,.1f} GB", annotation_position="top left"
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(title="GB (10⁹ B)", gridcolor="#E5E5E5", rangemode="tozero", range=[0, top / 1e9])
    style_figure(fig, 380, "loading", "Peak memory while loading the checkpoint")
    return fig
