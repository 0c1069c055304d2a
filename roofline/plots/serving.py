"""Serving figures: the latency-throughput frontier of each device against TTFT and TPOT targets."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from roofline.engine import REGIME_LABELS
from roofline.format import fmt_bytes, fmt_seconds
from roofline.plots.style import DEVICE_COLORS, REGIME_COLORS, legend_key, log_axes, style_figure

if TYPE_CHECKING:
    from roofline.serving import ServingPoints

MISSED_TTFT_COLOR = "#9E9E9E"
TARGET_COLOR = "#555555"
# Mantissas labelled per decade, by how many decades the axis spans: a narrow axis gets more
# labels so it reads at least three numbers where it can, a wide one only the powers of ten.
_MANTISSAS = ((3.0, (1,)), (1.2, (1, 3)), (0.5, (1, 2, 5)), (0.0, (1, 1.5, 2, 3, 4, 5, 7)))


REGIME_SYMBOLS = {"memory": "circle", "compute": "diamond", "communication": "square", "overhead": "triangle-up"}


def _short(value: float) -> str:
    """1, 20, 300, 4k, 50k, 2M: a tick label that fits beside its neighbours."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Tick values and labels for a log axis from ``lo`` to ``hi`` (data values): every power of
    ten inside, and 2 and 5 (or more) between them where the axis spans few decades."""
    if not (0 < lo < hi and math.isfinite(hi)):
        return [], []
    span = math.log10(hi / lo)
    first = next(i for i, (least, _) in enumerate(_MANTISSAS) if span >= least)
    for _, mantissas in _MANTISSAS[first:]:
        values = [
            m * 10.0**e
            for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
            for m in mantissas
            if lo <= m * 10.0**e <= hi
        ]
        if len(values) >= 3:
            break
    else:  # well inside one decade: four points spread evenly, at two significant figures
        values = sorted({float(f"{v:.2g}") for v in np.geomspace(lo, hi, 6)[1:-1]})
    return values, [_short(v) for v in values]


def _padded_range(values: np.ndarray) -> tuple[float, float] | None:
    """The log10 range that holds every positive finite value with a margin."""
    values = values[np.isfinite(values) & (values > 0)]
    if not values.size:
        return None
    return float(np.log10(values.min())) - 0.15, float(np.log10(values.max())) + 0.15


def frontier_figure(
    points: ServingPoints,
    names: dict[str, str],
    roofs: dict[str, str],
    ttft_target_s: float,
    tpot_target_s: float,
    per_dollar: bool,
    title: str,
    height: int = 520,
) -> go.Figure:
    """Output tokens/s per user against throughput (per device, or per dollar), one line per
    device as the decode batch grows. A marker's shape is the step's regime; a point that misses the
    TTFT target is drawn hollow and grey; the TPOT target is a dotted line, labelled. ``roofs``
    names what each device's times rest on (datasheet: an ideal bound; calibrated)."""
    cost = points.usd_per_million()["output_all_in"]  # every device-hour over the output tokens
    # Devices on measured kernels beside devices on the datasheet: the latter's lines are bounds.
    mixed = len({roofs.get(hid, "datasheet") == "datasheet" for hid in points.devices}) > 1
    fig = go.Figure()
    xs, ys = [], [np.array([1.0 / tpot_target_s])]
    missed_any = False
    regimes_seen: set[str] = set()
    for d, hid in enumerate(points.devices):
        if hid in points.why_not:
            continue
        fit = points.runs[d]  # in memory, at a batch the engine forms
        x = np.where(fit, 1e6 / cost[d] if per_dollar else points.per_device[d], np.nan)
        y = np.where(fit, points.per_user[d], np.nan)
        meets_ttft = points.ttft_s[d] <= ttft_target_s
        missed_any |= bool(np.any(fit & ~meets_ttft))
        basis = roofs.get(hid, "datasheet")
        basis = "datasheet roofs (an ideal bound)" if basis == "datasheet" else f"{basis} roofs"
        hover = [
            f"<b>{names[hid]}</b>, TP={points.tp}, batch {int(b)}<br>"
            f"TTFT {fmt_seconds(points.ttft_s[d, j])} "
            f"({'meets' if meets_ttft[j] else 'misses'} the {fmt_seconds(ttft_target_s)} target) · "
            f"TPOT {fmt_seconds(points.tpot_s[d, j])}<br>{points.per_device[d, j]:,.0f} tok/s per device · "
            f"{points.per_user[d, j]:,.1f} per user<br>memory {fmt_bytes(points.memory_bytes[d, j])}<br>"
            f"{REGIME_LABELS.get(points.bound[d, j], '')} · MBU {points.mbu[d, j]:.0%} · MFU {points.mfu[d, j]:.0%}"
            + (f"<br>${cost[d, j]:,.3f} per M output tokens (all-in)" if np.isfinite(cost[d, j]) else "")
            + f"<br>on {basis}"
            for j, b in enumerate(points.batch)
        ]
        color = DEVICE_COLORS[d % len(DEVICE_COLORS)]
        # Beside devices on measured kernels, a device on the datasheet alone is drawn dashed: its line
        # is a bound the engine does not reach, not an expectation to compare like for like.
        bound_only = mixed and roofs.get(hid, "datasheet") == "datasheet"
        # The regime is the marker's shape (a colour would clash with the devices' line colours).
        shapes = [REGIME_SYMBOLS.get(b, "circle") for b in points.bound[d]]
        regimes_seen.update(str(b) for b, f in zip(points.bound[d], fit, strict=True) if f)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines+markers",
                name=names[hid]
                + (" · ideal bound (dashed)" if bound_only else "")
                + (" (no price: not drawn)" if per_dollar and not np.isfinite(cost[d]).any() else ""),
                line=dict(color=color, width=1.5, dash="dash") if bound_only else dict(color=color, width=2),
                opacity=0.75 if bound_only else 1.0,
                marker=dict(
                    size=[8 if ok else 9 for ok in meets_ttft],
                    symbol=[sym if ok else f"{sym}-open" for sym, ok in zip(shapes, meets_ttft, strict=True)],
                    color=[color if ok else MISSED_TTFT_COLOR for ok in meets_ttft],
                    line=dict(color=["#FFFFFF" if ok else MISSED_TTFT_COLOR for ok in meets_ttft], width=1),
                ),
                text=hover,
                hovertemplate="%{text}<extra></extra>",
            )
        )
        xs.append(x)
        ys.append(y)
    if per_dollar and not any(np.isfinite(x).any() for x in xs):  # an empty chart says why
        fig.add_annotation(
            xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False, text="no device here has a price to draw per USD"
        )
    if len(regimes_seen) > 1:  # one shape needs no key
        for regime, symbol in REGIME_SYMBOLS.items():
            if regime in regimes_seen:
                fig.add_trace(legend_key(REGIME_LABELS[regime], dict(symbol=symbol, size=9, color="#666666")))
    if missed_any:
        missed = dict(symbol="circle-open", size=9, color=MISSED_TTFT_COLOR, line=dict(width=1.5))
        fig.add_trace(legend_key(f"misses TTFT ≤ {fmt_seconds(ttft_target_s)}", missed))
    x_title = "output tokens per USD" if per_dollar else "output tokens/s per device"
    log_axes(fig, x_title, "output tokens/s per user (1 / TPOT)")
    tpot_y = 1.0 / tpot_target_s
    # A line takes data values on a log axis; its label is an annotation, which takes log10.
    fig.add_shape(
        type="line", xref="paper", x0=0, x1=1, yref="y", y0=tpot_y, y1=tpot_y, line=dict(color=TARGET_COLOR, dash="dot")
    )
    # At the left end and under the line: small batches are fast per user, so the devices' lines run
    # high there (one that crosses the target early, on a narrow plot, ran through a label above it);
    # at the right end they come down through the target and the label would cover them.
    fig.add_annotation(
        xref="paper",
        x=0,
        xanchor="left",
        yref="y",
        y=math.log10(tpot_y),
        yanchor="top",
        showarrow=False,
        text=f"TPOT target {fmt_seconds(tpot_target_s)} (above: meets)",
        font=dict(size=11, color=TARGET_COLOR),
        bgcolor="rgba(255,255,255,0.8)",
    )
    for update, values in ((fig.update_xaxes, xs), (fig.update_yaxes, ys)):
        span = _padded_range(np.concatenate(values)) if values else None
        if span is None:
            continue
        ticks, labels = log_ticks(10 ** span[0], 10 ** span[1])
        update(range=list(span), tickvals=ticks, ticktext=labels, minor=dict(showgrid=False, ticks=""))
    style_figure(fig, height, "frontier", title)
    return fig


def speculative_figure(spec: dict[str, np.ndarray], title: str) -> go.Figure:
    """Speculative decoding's speed-up of decode against batch (``roofline.serving.speculative``),
    each marker coloured by the verify step's regime: it pays while that step is memory-bound."""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=spec["batch"],
            y=spec["speedup"],
            mode="lines+markers",
            name="speed-up of decode",
            line=dict(color="#222222", width=2),
            marker=dict(color=[REGIME_COLORS.get(b, "#999") for b in spec["verify_bound"]], size=9),
            text=[
                f"batch {int(b)}: plain TPOT {fmt_seconds(p)}, speculative {fmt_seconds(q)}; verify step "
                f"{REGIME_LABELS.get(v, v)}, intensity {i:,.0f} FLOP/B"
                for b, p, q, v, i in zip(
                    spec["batch"],
                    spec["plain_tpot_s"],
                    spec["spec_tpot_s"],
                    spec["verify_bound"],
                    spec["verify_intensity"],
                    strict=True,
                )
            ],
            hovertemplate="%{text}<extra></extra>",
        )
    )
    for bound in dict.fromkeys(spec["verify_bound"]):  # the markers' colours: the verify step's regime
        fig.add_trace(
            legend_key(
                f"verify step {REGIME_LABELS.get(bound, bound)}", dict(color=REGIME_COLORS.get(bound, "#999"), size=9)
            )
        )
    # A horizontal line on a linear y axis: its label can ride on add_hline here, at the left, on the
    # side of the line the curve is not on there (the curve crosses it towards the right, where a
    # label at the end sat on its last markers).
    below = float(spec["speedup"][int(np.argmin(spec["batch"]))]) >= 1.0
    fig.add_hline(
        y=1.0,
        line=dict(color="#D62728", dash="dash"),
        annotation_text="no gain",
        annotation_position="bottom left" if below else "top left",
        annotation_font=dict(color="#D62728"),
    )
    ticks, labels = log_ticks(float(np.min(spec["batch"])), float(np.max(spec["batch"])))
    fig.update_xaxes(type="log", title="decode batch (sequences)", gridcolor="#E5E5E5", tickvals=ticks, ticktext=labels)
    fig.update_yaxes(title="speed-up (below 1: slower)", gridcolor="#E5E5E5", rangemode="tozero")
    style_figure(fig, 380, "spec", title)
    return fig
