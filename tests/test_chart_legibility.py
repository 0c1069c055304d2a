"""Charts that read true at a glance: a limit far above the bars is named, not drawn; a cut bar says
how tall it is; coinciding roofs stay visible; reads of a batch that does not fit are marked; a word
delta gets no arrow; counts take their plural; a measured roof that kernels beat is named."""

from __future__ import annotations

import numpy as np
import pytest

from dashboard.share import _is_change
from roofline.engine import Ceilings
from roofline.format import count_of
from roofline.measure.readings import above_roof_line, latency_label
from roofline.measure.schema import Results
from roofline.plots.capacity import crossover_figure
from roofline.plots.roofline import _roof_widths
from roofline.plots.training import loading_figure, training_memory_figure
from tests.page_helpers import ROOT


def test_a_device_limit_far_above_the_bars_is_named_not_drawn():
    # Bars of at most 48 GB; a 191.5 GB device would squash them to the floor: the axis stops at
    # 1.35 x 48 = 64.8 GB and the device's figure is named in a note. A 60 GB host RAM (within 2x
    # the tallest bar) stays a line, and the axis reaches 1.1 x 60 = 66 GB to show it.
    fig = loading_figure(["naive", "meta"], [48e9, 16e9], [16e9, 16e9], 191.5e9, 60e9, "device memory")
    assert fig.layout.yaxis.range == pytest.approx((0, 66.0))
    lines = [s.y0 for s in fig.layout.shapes]
    assert lines == [60.0]
    notes = [a.text for a in fig.layout.annotations]
    assert any(t == "<b>above the chart</b><br>191.5 GB: device memory" for t in notes)
    assert not any("host RAM" in t and "above" in t for t in notes)


def test_a_cut_bar_says_how_tall_it_is_at_its_own_position():
    # One device of 80 GB: the axis stops at 1.6 x 80 = 128 GB; the bars of 60 and 300 GB: only the
    # second is cut, and its label sits on its category (position 1), not on a number read as x.
    terms = {"weights": np.array([20e9, 20e9]), "activations": np.array([40e9, 280e9])}
    fig = training_memory_figure([16, 32], terms, {"dev": 80e9}, "micro-batch", "t")
    assert fig.layout.yaxis.range == pytest.approx((0, 128.0))
    labels = [a for a in fig.layout.annotations if a.text.startswith("↑")]
    assert [(a.x, a.text) for a in labels] == [(1, "↑ 300 GB")]


def test_coinciding_memory_roofs_are_drawn_as_stripes():
    def roof(bw_tbps: float) -> tuple[Ceilings, str]:
        return Ceilings("d", {"bf16": 1e15}, bw_tbps * 1e12), "bf16"

    # 8.0, 8.1 and 8.0 TB/s coincide (within 3%); 3.35 does not: the first is drawn under two
    # later ones (2.5 + 2 x 2 px), the second under one.
    assert _roof_widths([roof(8.0), roof(8.1), roof(3.35), roof(8.0)]) == [6.5, 4.5, 2.5, 2.5]


def test_the_kv_read_of_a_batch_that_does_not_fit_is_dotted():
    contexts = np.array([1, 10, 100, 1000, 10000])
    fig = crossover_figure(contexts, np.full(5, 16e9), contexts * 1e6, 5000, 4, fits_up_to=1000, device="X")
    weights, fits, beyond = fig.data
    assert list(fits.x) == [1, 10, 100, 1000]
    assert list(beyond.x) == [1000, 10000] and beyond.line.dash == "dash"  # the two lines meet
    assert "does not fit on X" in beyond.name
    whole = crossover_figure(contexts, np.full(5, 16e9), contexts * 1e6, 5000, 4)
    assert len(whole.data) == 2 and list(whole.data[1].x) == list(contexts)


@pytest.mark.parametrize(
    ("delta", "change"),
    [("+12%", True), ("-3 ms", True), ("−3 ms", True), ("1.93×", True), ("fits", False), ("before: memory", False)],
)
def test_only_a_numeric_delta_is_a_change_with_an_arrow(delta, change):
    assert _is_change(delta) is change


def test_counts_take_their_plural():
    assert count_of(1, "layer") == "1 layer" and count_of(32, "layer") == "32 layers"
    assert count_of(1_024, "sequence") == "1,024 sequences" and count_of(0, "sequence") == "0 sequences"


def test_a_fitted_floor_under_one_percent_of_the_fastest_point_is_not_resolved():
    # 3.6 ns against a 25.4 us fastest point (0.014%): not resolved; 7.02 us against 20 us: a floor.
    assert latency_label(3.6e-9, 25.4e-6) == "not resolved"
    assert latency_label(7.02e-6, 20e-6) == "7.02 µs"
    assert latency_label(0.0, None) == "0 ns"


def test_sweep_kernels_faster_than_the_measured_roofs_are_named():
    results = Results.model_validate_json((ROOT / "examples" / "h200-sxm-quick-run.json").read_text())
    line = above_roof_line(results)
    # Decode attention at batch 16 and 8,192 tokens: its bytes over its 125.4 us; the copy roof 4,146 GB/s.
    best = max((p for p in results.sweeps if p.name == "decode attention"), key=lambda p: p.bytes / p.time_s)
    assert best.bytes / best.time_s / 1e9 == pytest.approx(4283, abs=1)
    assert "3 of 39 sweep kernels" in line and "4,283 GB/s against 4,146 GB/s" in line
    raised = results.model_copy(update={"ceilings": results.ceilings.model_copy(update={"memory_bandwidth_tbps": 5.0})})
    assert above_roof_line(raised) == ""
