"""The ranking's bars on a log axis where they span more than tenfold: on a linear one a 52 ms
device beside 2.19 ms leaders had left the leaders as slivers no one could tell apart (the Which
hardware? page at 390 px)."""

from __future__ import annotations

import pytest

from roofline.plots.ranking import LOG_SPAN, ranking_figure


def _rows(n: int) -> list[dict]:
    row = {"bound": "memory", "fits": True, "why_not": "", "time_s": 1e-3, "name": "", "bound_label": "memory-bound"}
    return [dict(row, name=f"d{i}") for i in range(n)]


@pytest.mark.parametrize(
    "values, log",
    [
        ([2.19e-3, 3.37e-3, 52e-3], True),  # 23.7x: the page's own spread
        ([2.19e-3, 2.19e-3 * LOG_SPAN], False),  # exactly tenfold: still linear
        ([2e-3, 4e-3, 6e-3], False),
        ([0.0, 2e-3, 50e-3], False),  # a bar of no length has no place on a log axis
        ([50e-3], False),
    ],
)
def test_the_axis_turns_logarithmic_past_a_tenfold_span_and_says_so(values, log):
    fig = ranking_figure(_rows(len(values)), [f"d{i}" for i in range(len(values))], values, True, "", False, "t")
    assert (fig.layout.xaxis.type == "log") is log
    assert fig.layout.xaxis.title.text == ("time (ms)<br>log scale" if log else "time (ms)")
    assert list(fig.data[0].x) == pytest.approx([v * 1e3 for v in values])  # the values, not their logs


def test_a_rates_axis_says_so_too():
    fig = ranking_figure(_rows(2), ["a", "b"], [10.0, 500.0], False, "tokens/s", True, "t")
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis.title.text == "ideal bound: tokens/s<br>log scale"
    per_device = ranking_figure(_rows(2), ["a", "b"], [1.0, 2.0], False, "tokens/s per device", True, "t")
    assert per_device.layout.xaxis.title.text == "ideal bound:<br>tokens/s per device"  # 32 characters: two lines
