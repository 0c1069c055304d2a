"""The house style every chart shares: colours, fonts, log axes, layout."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

REGIME_COLORS: dict[str, str] = {
    "compute": "#D62728",
    "memory": "#1F77B4",
    "communication": "#2CA02C",
    "overhead": "#9467BD",
}


# Twelve distinct device colours (Okabe-Ito first, then darker and muted ones), none of them the
# regime colours; a page compares at most this many devices at once (MAX_COMPARED).
DEVICE_COLORS: tuple[str, ...] = (
    "#222222",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#8C564B",
    "#F0E442",
    "#A6761D",
    "#7F7F7F",
    "#17BECF",
    "#BCBD22",
    "#393B79",
)


MAX_COMPARED = len(DEVICE_COLORS)


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


def translucent(hex_color: str, alpha: float) -> str:
    """A ``#RRGGBB`` colour as ``rgba(...)`` with opacity ``alpha``."""
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"


SHADE_MEMORY = "rgba(31, 119, 180, 0.07)"


SHADE_COMPUTE = "rgba(214, 39, 40, 0.06)"


FONT = dict(family="Inter, Helvetica, Arial, sans-serif", size=13, color="#222222")


GL_THRESHOLD = 2000


# Height added per legend entry past the third: on a 390 px phone a legend row holds one or two.
LEGEND_ROW_PX = 20
# A blank legend title line in this font size is at least as tall as Plotly's toolbar (25 to 28 px
# as Chromium draws it); over a title of the chart's own, two blank lines in the legend's font are.
TOOLBAR_ROW_FONT_PX = 18
_BLANK_LINES = "\u00a0<br>\u00a0<br>"  # two blank lines of the legend's 12 px font: the toolbar's row


MEMORY_COLORS = {
    "weights": "#7F7F7F",
    "KV cache": "#1F77B4",
    "activations": "#FF7F0E",
    "reserved": "#8C564B",
    "free": "#C7E9C0",
    "over capacity": "#D62728",
}


_AXIS = dict(gridcolor="#E5E5E5", linecolor="#444444", zerolinecolor="#E5E5E5", automargin=True)
# The house template: plotly_white's look in a few layout settings. Plotly copies the default
# template into every figure it makes, and plotly_white carries defaults for every trace type,
# which made building the figures most of a page's rerun; this one is a tenth of the cost.
pio.templates["roofline"] = go.layout.Template(
    layout=dict(
        paper_bgcolor="white",
        plot_bgcolor="white",
        font=FONT,
        colorway=list(DEVICE_COLORS),
        xaxis=_AXIS,
        yaxis=_AXIS,
        hoverlabel=dict(bgcolor="white", font=dict(size=12, color="#222222")),
    )
)
pio.templates.default = "roofline"


# Full values on every log-axis tick label (0.5, 2, 5,000; no exponent): without a tick format
# Plotly labels the ticks between decades with their bare leading digit, so "5" under 1 means 0.5.
LOG_TICKFORMAT = ",~r"
# Up to this many decades an axis is labelled 1-2-5 (0.5, 1, 2, 5, 10); past it, decades only,
# which a phone's width still holds without labels running into each other.
LOG_125_MAX_DECADES = 2.0


def _log_span(fig: go.Figure, name: str) -> float | None:
    """How many decades the axis ``name`` ("xaxis", "yaxis2") shows: its range if set, else the
    extent of the positive values its traces put on it (None: no numbers to go by)."""
    axis = fig.layout[name]
    if axis.range is not None and None not in axis.range:
        return abs(float(axis.range[1]) - float(axis.range[0]))
    letter, suffix = name[0], name[5:]
    values = []
    for trace in fig.data:
        if (getattr(trace, f"{letter}axis", None) or letter) != letter + suffix:
            continue
        try:
            v = np.asarray(getattr(trace, letter, None), dtype=float).ravel()
        except (TypeError, ValueError):  # categories
            continue
        values.append(v[np.isfinite(v) & (v > 0)])
    values = np.concatenate(values) if values else np.array([])
    return float(np.log10(values.max() / values.min())) if values.size else None


def label_log_ticks(fig: go.Figure) -> go.Figure:
    """Label every log axis of the figure with full values, 1-2-5 over a short span and decades
    only over a long one (minor gridlines keep the steps between); returns the figure. Shared by
    every chart: the pages show figures through one function, which calls this last, so an axis
    made log after the figure was styled is labelled too."""
    for name in fig.layout:
        if not name.startswith(("xaxis", "yaxis")):
            continue
        axis = fig.layout[name]
        if axis.type != "log" or axis.tickformat or axis.tickvals is not None:
            continue  # an axis whose ticks a chart set itself keeps them (minor ticks among them crowd)
        span = _log_span(fig, name)
        axis.tickformat = LOG_TICKFORMAT
        short = span is not None and span <= LOG_125_MAX_DECADES
        axis.dtick = "D2" if short else 1
        # Minor gridlines between decades help over a few decades; over many they merge into a band.
        many = span is None or span > 2 * LOG_125_MAX_DECADES
        axis.minor = dict(ticks="outside", ticklen=3, showgrid=not many, gridcolor="#F3F3F3")
    return fig


def log_axes(fig: go.Figure, x_title: str, y_title: str) -> None:
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


def legend_key(name: str, marker: dict, group: str | None = None) -> go.Scatter:
    """A legend entry with nothing drawn: it explains a colour or a symbol the chart's points use."""
    return go.Scatter(x=[None], y=[None], mode="markers", name=name, marker=marker, legendgroup=group, hoverinfo="skip")


def legend_entries(fig: go.Figure) -> int:
    """How many lines the figure's legend lists: one per legend group, more for an entry whose name
    runs over several (a roof's device, and its peak and bandwidth under it)."""
    seen: dict[str, int] = {}
    for i, trace in enumerate(fig.data):
        if trace.showlegend is False or not trace.name:
            continue
        key = trace.legendgroup or f"#{i}"
        seen[key] = max(seen.get(key, 1), 1 + trace.name.count("<br>"))
    return sum(seen.values())


def toolbar_row(title: str | None = None) -> dict:
    """The legend title that keeps the toolbar's row clear: a blank line tall enough, or blank lines
    over ``title`` (the figure's own legend title)."""
    title = (title or "").removeprefix(_BLANK_LINES).strip("\u00a0")  # a figure styled before keeps one row
    if title:
        return dict(text=_BLANK_LINES + title, side="top", font=dict(size=12))
    return dict(text="\u00a0", side="top", font=dict(size=TOOLBAR_ROW_FONT_PX))


def style_figure(fig: go.Figure, height: int, revision: str, title: str = "", **overrides) -> None:
    """The house style of every chart: white background, the user's zoom kept across reruns
    (`revision`), and a horizontal legend above the plot, where it can wrap to as many rows as a
    narrow screen needs without covering an axis title (Plotly widens the top margin to fit it)
    or being covered by Plotly's toolbar: it hangs from the figure's top under a blank title row
    as tall as the toolbar (``toolbar_row``), in pixels, so a chart shown taller or shorter (full
    screen) keeps the row. A legend title the figure has already goes under that row.
    A legend of many entries adds height, so the plot keeps its area on a phone, where entries
    stack one or two to a row. `overrides` go to `update_layout` last."""
    entries = legend_entries(fig)
    fig.update_layout(
        title=dict(text=title, x=0.01, font=dict(size=16)),
        height=height + LEGEND_ROW_PX * max(0, entries - 3),
        font=FONT,
        paper_bgcolor="white",
        plot_bgcolor="white",
        uirevision=revision,
        hoverlabel=dict(bgcolor="white", font=dict(size=12, color="#222222")),
        # The legend hangs from the figure's top, its entries below the row Plotly's toolbar appears in
        # on hover (or a tap); the plot starts below the legend.
        legend=dict(
            orientation="h",
            yref="container",
            yanchor="top",
            y=1,
            xanchor="left",
            x=0,
            font=dict(size=12),
            title=toolbar_row(fig.layout.legend.title.text),
            # As tall as its entries need: the height above grows with them, where Plotly's default
            # (half the figure) had hidden a phone's last entries in a scroll box.
            maxheight=1,
        ),
        margin=dict(l=70, r=20, t=50 if title else 20, b=40),
    )
    if overrides:
        fig.update_layout(**overrides)
    label_log_ticks(fig)


def sig(value: float) -> str:
    """Four significant figures, without scientific notation for the usual range."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.4g}"


def flops_unit(ceilings) -> tuple[float, str]:
    """The y axis's unit: TFLOP/s, or GFLOP/s where no roof drawn reaches 1 TFLOP/s (a CPU's),
    whose figures would read 0.00x TFLOP/s."""
    peaks = [c.peak(d) for c, d in ceilings if c.has_peak(d)]
    return (1e12, "TFLOP/s") if not peaks or max(peaks) >= 1e12 else (1e9, "GFLOP/s")


def bandwidth_text(bw: float) -> str:
    """A roof's bandwidth in the unit that reads: a CPU's 73 GB/s, not 0.073 TB/s."""
    return f"{sig(bw / 1e12)} TB/s" if bw >= 1e12 else f"{sig(bw / 1e9)} GB/s"
