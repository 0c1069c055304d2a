"""The latency-against-rate chart shades the rates past saturation, where a finite run sees only
the start of a queue that grows without bound, and its hovers there say so."""

from __future__ import annotations

import numpy as np

from roofline.plots.serving_load import PAST_SATURATION, latency_rate_figure


def _figure(saturation_per_s: float):
    rate = np.array([1.0, 2.0, 4.0, 8.0])
    seconds = {p: rate * 0.01 * (1 + p / 100) for p in (50, 90, 99)}
    return latency_rate_figure(rate, {"ttft_s": seconds, "tpot_s": seconds}, saturation_per_s, {})


def test_the_rates_past_saturation_are_shaded_and_their_hovers_say_why():
    fig = _figure(3.0)
    (shade,) = [s for s in fig.layout.shapes if s.type == "rect"]
    assert shade.x0 == 3.0 and shade.x1 > 8.0 and (shade.y0, shade.y1) == (0, 1)
    hovers = [t for trace in fig.data if trace.text is not None for t in trace.text]
    past = [t for t in hovers if PAST_SATURATION in t]
    assert len(past) == 4  # 4 and 8 requests/s, on TTFT and on TPOT
    assert all(" at 4 requests/s" in t or " at 8 requests/s" in t for t in past)


def test_nothing_is_shaded_where_every_rate_is_below_saturation():
    fig = _figure(20.0)
    assert not [s for s in fig.layout.shapes if s.type == "rect"]
    assert not any(PAST_SATURATION in t for trace in fig.data if trace.text is not None for t in trace.text)
