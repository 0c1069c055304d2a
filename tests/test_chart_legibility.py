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
from tests.page_helpers import ROOT, page
from tests.test_serving_frontier_page import _frontier


def test_a_device_limit_far_above_the_bars_is_named_not_drawn():
    # Bars of at most 48 GB; a 191.5 GB device would squash them to the floor: the axis stops at
    # 1.35 x 48 = 64.8 GB and the device's figure is named in the legend. A 60 GB host RAM (within 2x
    # the tallest bar) stays a line, and the axis reaches 1.1 x 60 = 66 GB to show it.
    fig = loading_figure(["naive", "meta"], [48e9, 16e9], [16e9, 16e9], 191.5e9, 60e9, "device memory")
    assert fig.layout.yaxis.range == pytest.approx((0, 66.0))
    lines = [s.y0 for s in fig.layout.shapes]
    assert lines == [60.0]
    named = [t.name for t in fig.data if t.type == "scatter"]  # a legend entry of its own, its line's style
    assert named == ["device memory:<br>191.5 GB, above the chart"]


def test_a_cut_bar_says_how_tall_it_is_at_its_own_position():
    # Micro-batches 1 to 64 on one 80 GB device: the axis stops at 1.6 x 80 = 128 GB; the bars at
    # 16, 32 and 64 (300, 580 and 1,100 GB) are cut, and each label sits at its bar's position (4, 5,
    # 6): numbers on a category axis are positions, and a label "16" written as x was drawn at 16.
    x = [1, 2, 4, 8, 16, 32, 64]
    activations = np.array([10, 20, 40, 80, 280, 560, 1080]) * 1e9
    terms = {"weights": np.full(7, 20e9), "activations": activations}
    fig = training_memory_figure(x, terms, {"dev": 80e9}, "micro-batch", "t")
    assert fig.layout.yaxis.range == pytest.approx((0, 128.0))
    labels = [a for a in fig.layout.annotations if a.text.startswith("↑")]
    assert [(a.x, a.text) for a in labels] == [(4, "↑ 300 GB"), (5, "↑ 580 GB"), (6, "↑ 1,100 GB")]
    assert list(fig.data[0].x) == ["1", "2", "4", "8", "16", "32", "64"]


def test_coinciding_memory_roofs_are_drawn_as_stripes():
    def roof(name: str, bw_tbps: float) -> tuple[Ceilings, str]:
        return Ceilings(name, {"bf16": 1e15}, bw_tbps * 1e12), "bf16"

    # 8.0, 8.1 and 8.0 TB/s coincide (within 3%); 3.35 does not: the first is drawn under two
    # later devices (2.5 + 2 x 2 px), the second under one.
    roofs = [roof("a", 8.0), roof("b", 8.1), roof("c", 3.35), roof("d", 8.0)]
    assert _roof_widths(roofs) == [6.5, 4.5, 2.5, 2.5]


def test_the_kv_read_of_a_batch_that_does_not_fit_is_dashed():
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


def test_serving_frontier_gives_the_regime_as_the_marker_shape():
    # The H100's frontier runs from memory-bound small batches to compute-bound large ones: each
    # point's shape says which (its colour stays the device's), with a key for each shape.
    fig, _ = _frontier()
    device = fig["data"][0]
    assert {"circle", "diamond"} <= set(device["marker"]["symbol"])
    assert len(set(device["marker"]["color"])) == 1
    keys = [t.get("name") for t in fig["data"] if t.get("x") == [None]]
    assert "memory-bandwidth-bound" in keys and "compute-bound" in keys


def test_same_device_roofs_per_dtype_are_not_stripes_and_stripes_are_capped():
    def roof(name: str, bw_tbps: float, dtype: str = "bf16") -> tuple[Ceilings, str]:
        return Ceilings(name, {"bf16": 1e15, "fp8": 2e15}, bw_tbps * 1e12), dtype

    # GB200 bf16 and fp8 share a colour: they are not a stripe of two; GB300 and MI350X are two
    # other devices at 8 TB/s, capped at +4 px; the last roof has no one after it.
    roofs = [roof("gb200", 8.0), roof("gb200", 8.0, "fp8"), roof("gb300", 8.0), roof("mi350x", 8.0), roof("x", 8.0)]
    assert _roof_widths(roofs) == [6.5, 6.5, 6.5, 4.5, 2.5]


def test_the_step_chart_shades_the_regions_of_the_roof_its_points_rest_on():
    from roofline.plots.roofline import roofline_figure

    sheet = Ceilings("sheet", {"bf16": 1000e12}, 4e12)  # ridge 250 FLOP/B
    measured = Ceilings("measured", {"bf16": 800e12}, 4e12)  # ridge 200 FLOP/B
    edges = lambda fig: sorted({s.x1 for s in fig.layout.shapes if s.type == "rect"})  # noqa: E731
    assert edges(roofline_figure([(sheet, "bf16"), (measured, "bf16")]))[0] == pytest.approx(250)
    assert edges(roofline_figure([(sheet, "bf16"), (measured, "bf16")], shade_from=1))[0] == pytest.approx(200)


def test_a_narrow_region_takes_its_label_on_two_lines():
    from roofline.plots import PointSeries
    from roofline.plots.roofline import roofline_figure

    sheet = Ceilings("sheet", {"bf16": 1000e12}, 4e12)  # ridge 250 FLOP/B
    labels = lambda fig: sorted(a.text for a in fig.layout.annotations if "bound" in a.text)  # noqa: E731
    # Alone, the axis runs 0.1 to 8 x 250 FLOP/B: the compute region is log(8) / log(20,000) = 21% of it.
    assert labels(roofline_figure([(sheet, "bf16")])) == ["compute-<br>bound", "memory-bound"]
    # An op at 1e6 FLOP/B widens it to log(2e6 / 250) / log(2e7) = 53%.
    far = PointSeries("op", np.array([1e6]), np.array([1e14]), ["compute"], ["op"])
    assert labels(roofline_figure([(sheet, "bf16")], [far])) == ["compute-bound", "memory-bound"]


def test_the_kv_memory_bars_keep_true_sizes_and_mark_the_usable_memory():
    """70B on one H100: the weights' bar stopped at the 75 GB usable and the rest was one red block,
    since the excess was taken out of the KV term and drove it negative."""
    import json

    def caption(at) -> str:
        return next(c.value for c in at.caption if c.value.startswith("Per sequence"))

    fits = page("views/kv_page.py", view="Memory")
    assert "black mark" not in caption(fits)
    over = page("views/kv_page.py", view="Memory", model="llama-3.1-70b", hw=["h100-sxm"])
    assert not over.exception
    assert "The black mark is each device's usable memory: what stacks past it does not fit" in caption(over)
    spec = json.loads(next(c for c in over.get("plotly_chart") if c.key == "memory_bar").proto.spec)
    traces = {t["name"]: t for t in spec["data"]}
    assert traces["weights"]["x"][0] == pytest.approx(141.1, abs=0.1)  # 70.55 B parameters x 2 bytes
    assert all(x >= 0 for t in spec["data"] if t["type"] == "bar" for x in t["x"])
    assert traces["usable memory"]["x"][0] < traces["weights"]["x"][0]


def test_the_what_if_tiles_name_the_regime_before_and_after_in_the_chart_regions_words():
    at = page("views/advisor_page.py", view="What-if", x_memory="4.0")
    tiles = {m.label: m for m in at.metric}
    assert tiles["Regime"].value in ("memory-bound", "compute-bound", "overhead-bound", "communication-bound")
    assert tiles["Regime"].proto.delta.startswith("before: ") and "bandwidth" not in tiles["Regime"].proto.delta
    assert tiles["Memory"].proto.delta in ("before: fits", "before: does not fit")


def test_the_offline_report_shows_a_percent_column_as_the_page_does():
    from roofline.lazy import pandas as pd
    from roofline.report import display_frame

    shown = display_frame(pd.DataFrame({"median": [0.1563, 35.69]}), {"median": "percent"})
    assert list(shown["median"]) == ["16%", "3,569%"]


def test_the_levers_table_says_its_ratio_is_a_multiple_of_now(capsys):
    from roofline.cli import main

    main(["train", "--model", "llama-3.2-1b", "--hardware", "h100-sxm"])
    assert "time per token (× now)" in capsys.readouterr().out


def test_a_roofline_under_one_tflops_reads_in_gflops_and_its_points_on_the_same_scale():
    from roofline.plots import PointSeries
    from roofline.plots.roofline import roofline_figure
    from roofline.plots.style import flops_unit

    # A CPU: 0.8 TFLOP/s of fp32, 0.1 TB/s; its ridge sits at 8 FLOP/B. On a TFLOP/s axis its roof
    # would read 0.8 and an op at 2 GFLOP/s 0.002; in GFLOP/s they read 800 and 2.
    cpu = Ceilings(name="CPU", peak_flops_per_s={"fp32": 0.8e12}, memory_bandwidth_bytes_per_s=0.1e12)
    op = PointSeries("op", np.array([1.0]), np.array([2e9]), ["memory"], ["op"])
    fig = roofline_figure([(cpu, "fp32")], [op])
    assert fig.layout.yaxis.title.text == "performance (GFLOP/s)"
    roof = next(t for t in fig.data if t.name and t.name.startswith("CPU · fp32"))
    assert "800 GFLOP/s, 100 GB/s" in roof.name and max(roof.y) == pytest.approx(800)
    point = next(t for t in fig.data if t.name == "op")
    assert list(point.y) == pytest.approx([2.0])
    # An H100's bf16 roof (989.4 TFLOP/s) keeps TFLOP/s, and a figure with no peak too.
    h100 = Ceilings(name="H100", peak_flops_per_s={"bf16": 989.4e12}, memory_bandwidth_bytes_per_s=3.35e12)
    assert flops_unit([(h100, "bf16")]) == (1e12, "TFLOP/s")
    assert flops_unit([(cpu, "fp32"), (h100, "bf16")]) == (1e12, "TFLOP/s")
    assert flops_unit([]) == (1e12, "TFLOP/s")
