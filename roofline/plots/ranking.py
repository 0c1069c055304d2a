"""Devices ranked on one figure: a horizontal bar each, best first, coloured by the regime that
decides its time (grey where the model does not fit), with a legend for those colours."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from roofline.engine import REGIME_LABELS
from roofline.format import fmt_seconds
from roofline.plots.style import REGIME_COLORS, legend_key, style_figure

NO_FIT = "#CCCCCC"
LOG_SPAN = 10.0  # the largest bar over the smallest past which the axis turns logarithmic
# An axis title's line at 390 px: the plot's width less the device names ("ideal bound: time (ms)" fits).
TITLE_LINE_CHARS = 24


def time_unit(values_s: Sequence[float]) -> tuple[float, str]:
    """(scale, unit) for an axis of times: the unit the typical value reads in with one digit or more
    before the point (s, ms, µs, else ns)."""
    typical = float(np.median(values_s)) if len(values_s) else 1.0
    return next(((f, u) for f, u in ((1, "s"), (1e3, "ms"), (1e6, "µs")) if typical * f >= 1), (1e9, "ns"))


def ranking_figure(
    rows: Sequence[dict],
    names: Sequence[str],
    values: Sequence[float],
    latency: bool,
    label: str,
    on_ideal: bool,
    title: str,
) -> go.Figure:
    """``rows`` (ranking rows: ``bound``, ``fits``, ``why_not``, ``time_s``, ``name``) as bars of
    ``values`` (seconds where ``latency``, else a rate named ``label``), one per device in order.
    ``on_ideal``: the values are ideal bounds (the ranking compares devices on the datasheet alone);
    the axis, the hovers and the legend's title say so (the colours stay the expected time's
    regimes), and a latency's hover gives the device's expected time beside it."""
    scale, axis = 1.0, label
    if latency:
        scale, unit = time_unit(values)
        axis = f"time ({unit})"
    # Values more than LOG_SPAN apart (2 ms beside 50 ms) on a linear axis leave the leaders as
    # slivers no one can tell apart: a log axis then, said in its title (only where every bar has a length).
    finite = [float(v) for v in values if np.isfinite(v)]
    log = len(finite) == len(values) > 1 and min(finite) > 0 and max(finite) / min(finite) > LOG_SPAN
    lines = [f"ideal bound: {axis}"] if on_ideal else [axis]
    if len(lines[0]) > TITLE_LINE_CHARS and on_ideal:
        lines = ["ideal bound:", axis]
    axis = "<br>".join(lines + (["log scale"] if log else []))

    def hover_value(r: dict, v: float) -> str:
        shown = fmt_seconds(v) if latency else f"{v:,.4g} {label}"
        if not on_ideal:
            return shown
        if r.get("roofs") == "datasheet":  # no measured kernels: its expected time is its ideal bound again
            return f"ideal bound {shown} · no expected time (datasheet roofs only)"
        expected = fmt_seconds(r["time_s"]) if latency else None
        return f"ideal bound {shown}" + (f" · expected {expected}" if expected else "")

    fig = go.Figure(
        go.Bar(
            x=[v * scale for v in values],
            y=list(names),
            orientation="h",
            marker_color=[REGIME_COLORS[r["bound"]] if r["fits"] else NO_FIT for r in rows],
            text=[("" if r["fits"] else "does not fit") for r in rows],
            textposition="inside",
            insidetextanchor="start",
            textfont=dict(size=11, color="#333333"),
            customdata=[
                [
                    ("expected time " if on_ideal and r["bound_label"] else "") + (r["bound_label"] or ""),
                    r["why_not"] or "fits",
                    hover_value(r, v),
                ]
                for r, v in zip(rows, values)
            ],
            hovertext=[r["name"] for r in rows],
            hovertemplate="<b>%{hovertext}</b><br>%{customdata[2]}<br>%{customdata[0]}<br>%{customdata[1]}<extra></extra>",
            showlegend=False,
        )
    )
    # The colours' legend: each regime the bars show, and grey where a device cannot hold the model.
    for bound in dict.fromkeys(r["bound"] for r in rows if r["fits"]):
        fig.add_trace(legend_key(REGIME_LABELS.get(bound, bound), dict(color=REGIME_COLORS[bound], symbol="square")))
    if any(not r["fits"] for r in rows):
        fig.add_trace(legend_key("does not fit", dict(color=NO_FIT, symbol="square")))
    if on_ideal:  # bars of ideal bounds, coloured by what binds each device's expected time: said so
        fig.update_layout(legend_title=dict(text="colour: regime of the expected time", side="top"))
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=11))
    fig.update_xaxes(title=axis, gridcolor="#E5E5E5", type="log" if log else "linear")
    fig.update_layout(uniformtext=dict(minsize=9, mode="hide"))  # a label too small to read is left out
    extra = 18 * axis.count("<br>")  # room for the title's further lines
    margin = dict(l=10, r=20, t=40, b=40 + extra)
    style_figure(fig, max(320, 16 * len(rows) + 100 + extra), "ranking", title, margin=margin)
    return fig
