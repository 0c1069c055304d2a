"""Points laid on the latency-against-rate chart (``serving_load.latency_rate_figure``): measured
benchmark results, and one simulated run at the rate it achieved."""

from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go

from roofline.format import fmt_seconds
from roofline.plots.serving_load import MEASURED_COLOR, MS, REFERENCE_COLOR, TPOT_COLOR, TTFT_COLOR


def add_measured_points(fig: go.Figure, points: list[dict]) -> None:
    """Measured benchmark points (``roofline.serving.measured``'s records as JSON, open loop at a
    rate) on ``latency_rate_figure``: each point's p50 as a filled diamond and its p90 and p99 as
    open ones, at its request rate, TTFT on the top panel and TPOT on the bottom one."""
    at_rate = [p for p in points if p.get("rate_per_s")]
    for row, (metric, label, color) in enumerate((("ttft_s", "TTFT", TTFT_COLOR), ("tpot_s", "TPOT", TPOT_COLOR)), 1):
        for stat, symbol in (("p50", "diamond"), ("p90", "diamond-open"), ("p99", "diamond-open")):
            shown = [p for p in at_rate if p["latency"][metric][stat] is not None]
            if not shown:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[p["rate_per_s"] for p in shown],
                    y=[p["latency"][metric][stat] * MS for p in shown],
                    mode="markers",
                    marker=dict(size=10, symbol=symbol, color=MEASURED_COLOR, line=dict(width=1.5, color=color)),
                    name=f"measured {label} {stat}",
                    legendgroup=f"measured-{stat}",
                    showlegend=row == 1,
                    text=[
                        f"<b>measured {label} {stat}</b> {fmt_seconds(p['latency'][metric][stat])}<br>"
                        f"{p['label']} at {p['rate_per_s']:.3g} requests/s"
                        for p in shown
                    ],
                    hovertemplate="%{text}<extra></extra>",
                ),
                row=row,
                col=1,
            )


def add_run_points(fig: go.Figure, rate_per_s: float, run: Mapping, label: str) -> None:
    """One simulated run's latencies (``summary``'s ``ttft_s`` and ``tpot_s`` percentiles) on
    ``latency_rate_figure`` at the rate it achieved: p50 a filled square, p90 and p99 open ones."""
    for row, (metric, name, color) in enumerate((("ttft_s", "TTFT", TTFT_COLOR), ("tpot_s", "TPOT", TPOT_COLOR)), 1):
        for stat, symbol in (("p50", "square"), ("p90", "square-open"), ("p99", "square-open")):
            value = run[metric].get(stat)
            if value is None:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[rate_per_s],
                    y=[value * MS],
                    mode="markers",
                    marker=dict(size=10, symbol=symbol, color=color, line=dict(width=2, color=REFERENCE_COLOR)),
                    name=f"{label} {stat}",
                    legendgroup=f"run-{stat}",
                    showlegend=row == 1,
                    hovertemplate=f"<b>{label}: {name} {stat}</b> {fmt_seconds(value)}<br>at {rate_per_s:.3g} "
                    "requests/s<extra></extra>",
                ),
                row=row,
                col=1,
            )
