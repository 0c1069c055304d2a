"""The latency-against-rate chart shades the rates past saturation, where a finite run sees only
the start of a queue that grows without bound, and its hovers there say so."""

from __future__ import annotations

import numpy as np

from roofline.plots.serving_load import PAST_SATURATION, latency_rate_figure
from roofline.plots.serving_points import add_run_points


def _figure(saturation_per_s: float):
    rate = np.array([1.0, 2.0, 4.0, 8.0])
    seconds = {p: rate * 0.01 * (1 + p / 100) for p in (50, 90, 99)}
    return latency_rate_figure(rate, {"ttft_s": seconds, "tpot_s": seconds}, saturation_per_s, {})


def test_the_rates_past_saturation_are_shaded_and_their_hovers_say_why():
    fig = _figure(3.0)
    shades = [s for s in fig.layout.shapes if s.type == "rect"]
    # One shade a panel, each over its own panel's height: a shade over the figure's had spilled into the gap.
    assert [s.yref for s in shades] == ["y domain", "y2 domain"]
    assert all(s.x0 == 3.0 and s.x1 > 8.0 and (s.y0, s.y1) == (0, 1) for s in shades)
    hovers = [t for trace in fig.data if trace.text is not None for t in trace.text]
    past = [t for t in hovers if PAST_SATURATION in t]
    assert len(past) == 4  # 4 and 8 requests/s, on TTFT and on TPOT
    assert all(" at 4 requests/s" in t or " at 8 requests/s" in t for t in past)


def test_nothing_is_shaded_where_every_rate_is_below_saturation():
    fig = _figure(20.0)
    assert not [s for s in fig.layout.shapes if s.type == "rect"]
    assert not any(PAST_SATURATION in t for trace in fig.data if trace.text is not None for t in trace.text)


def test_a_closed_loop_run_is_placed_at_the_rate_it_achieved():
    """Its p50 a filled square and its p90 and p99 open ones, TTFT on the top panel, TPOT below."""
    fig = _figure(20.0)
    run = {"ttft_s": {"p50": 0.5, "p90": 0.9, "p99": 1.2}, "tpot_s": {"p50": 0.0136, "p90": 0.02, "p99": None}}
    add_run_points(fig, 15.9, run, "this run (closed loop)")
    points = [t for t in fig.data if t.name and t.name.startswith("this run")]
    assert [(t.name, t.marker.symbol, t.yaxis, t.y[0]) for t in points] == [
        ("this run (closed loop) p50", "square", "y", 500.0),
        ("this run (closed loop) p90", "square-open", "y", 900.0),
        ("this run (closed loop) p99", "square-open", "y", 1200.0),
        ("this run (closed loop) p50", "square", "y2", 13.6),
        ("this run (closed loop) p90", "square-open", "y2", 20.0),
    ]  # a percentile the run does not have is left out
    assert all(t.x == (15.9,) for t in points) and [t.showlegend for t in points] == [True] * 3 + [False] * 2
