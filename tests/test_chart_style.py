"""The house chart style keeps Plotly's toolbar off the legend in pixels, whatever height the chart
is shown at (the browser check of every page is tests/test_browser_phone.py)."""

from __future__ import annotations

import plotly.graph_objects as go

from roofline.plots.bars import time_breakdown_figure
from roofline.plots.style import TOOLBAR_ROW_FONT_PX, style_figure


def _figure(**layout) -> go.Figure:
    fig = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name="a"), go.Scatter(x=[1, 2], y=[2, 1], name="b")])
    fig.update_layout(**layout)
    return fig


def test_the_legend_hangs_from_the_top_under_a_blank_row_as_tall_as_the_toolbar():
    fig = _figure()
    style_figure(fig, 400, "r")
    legend = fig.layout.legend
    # From the figure's top, not a fraction of the plot: a chart drawn taller or shorter (full
    # screen) keeps the same pixels above the entries.
    assert (legend.yref, legend.yanchor, legend.y) == ("container", "top", 1)
    assert (legend.title.text, legend.title.side, legend.title.font.size) == ("\u00a0", "top", TOOLBAR_ROW_FONT_PX)
    assert TOOLBAR_ROW_FONT_PX >= 18  # a line of it is about 1.3 x 18 = 23 px, with the legend's padding the toolbar's


def test_a_charts_own_legend_title_goes_under_the_toolbars_row_once():
    fig = _figure(legend_title=dict(text="colour: regime of the expected time", side="top"))
    style_figure(fig, 400, "r")
    style_figure(fig, 400, "r")  # styled twice: still one row
    assert fig.layout.legend.title.text == "\u00a0<br>\u00a0<br>colour: regime of the expected time"
    assert fig.layout.legend.title.font.size == 12


def test_the_breakdown_keeps_its_legend_above_the_panel_titles_with_the_row():
    rows = [{"group": "mlp", "time_s": 1e-3, "bound": "compute"}]
    fig = time_breakdown_figure({"prefill": rows})
    legend = fig.layout.legend
    assert (legend.yref, legend.yanchor) == ("paper", "bottom") and legend.y > 1
    assert legend.title.text == "\u00a0"


def test_the_breakdown_panels_carry_their_unit_in_their_titles():
    """The upper panel's axis title had sat on the lower panel's title at 390 px: the unit is in each
    panel's title and no x axis has a title of its own."""
    rows = [{"group": "mlp", "time_s": 1e-3, "bound": "compute"}]
    fig = time_breakdown_figure({"prefill": rows, "decode": rows})
    assert [a.text for a in fig.layout.annotations] == ["prefill step: time (ms)", "decode step: time (ms)"]
    assert not fig.layout.xaxis.title.text and not fig.layout.xaxis2.title.text


def test_a_legend_of_two_line_entries_gets_the_height_it_needs_and_no_scroll_box():
    """Eight roofs of two lines each (device and dtype, then peak and bandwidth) and two one-line
    entries: 18 lines, 15 past the first three, 20 px each on top of the chart's height; the legend
    may take what it needs (Plotly's default of half the figure had hidden a phone's last entries)."""
    from roofline.plots.style import LEGEND_ROW_PX, legend_entries

    roofs = [go.Scatter(x=[1], y=[1], name=f"device {i} · bf16<br>989.4 TFLOP/s, 3.35 TB/s") for i in range(8)]
    fig = go.Figure(roofs + [go.Scatter(x=[1], y=[1], name="M sweep"), go.Scatter(x=[1], y=[1], name="GEMM")])
    assert legend_entries(fig) == 18
    style_figure(fig, 400, "r")
    assert fig.layout.height == 400 + 15 * LEGEND_ROW_PX and fig.layout.legend.maxheight == 1
