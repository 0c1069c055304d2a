"""The KV page's capacity chart where the weights leave no room: it shaded the whole axis and
said "past 512 tokens not one sequence fits", as if a shorter context would fit."""

from __future__ import annotations

from roofline.plots.capacity import capacity_figure


def _labels(curves, no_fit):
    fig = capacity_figure([512, 1024, 4096], curves, 131072, no_fit_from=no_fit)
    return [a.text for a in fig.layout.annotations if "sequence" in a.text]


def test_a_device_whose_weights_leave_no_room_says_no_context_fits():
    assert _labels({"H100": [0, 0, 0]}, {"H100": 1}) == [
        " not one sequence fits at any context (the weights leave no room)"
    ]
    assert _labels({"H100": [0, 0, 0], "L4": [0, 0, 0]}, {"H100": 1, "L4": 1}) == [
        " not one sequence fits at any context on any device (the weights leave no room)"
    ]


def test_where_a_sequence_fits_somewhere_the_shade_starts_where_the_last_one_stops():
    assert _labels({"H100": [5, 2, 0], "L4": [0, 0, 0]}, {"H100": 3000, "L4": 1}) == [
        " past 3,000 tokens not one sequence fits on any device"
    ]
