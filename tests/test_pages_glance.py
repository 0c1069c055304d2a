"""Pages that must not mislead at a glance: every figure reads as what it is, on a desktop and a phone."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent


def page(path: str, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / path), default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def figures(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


@pytest.mark.parametrize(
    "view",
    ["views/roofline_page.py", "views/kv_page.py", "views/hardware_page.py", "views/llm_page.py"],
)
def test_every_log_axis_labels_its_ticks_with_full_values(view):
    # Without a tick format Plotly labels the ticks between decades with a bare digit ("5" for 0.5).
    at = page(view)
    assert not at.exception
    log_axes = [
        axis
        for fig in figures(at)
        for name, axis in fig["layout"].items()
        if name.startswith(("xaxis", "yaxis")) and axis.get("type") == "log"
    ]
    assert log_axes
    assert all(axis.get("tickformat") for axis in log_axes)


def test_log_ticks_are_labelled_on_an_axis_made_log_after_styling():
    import plotly.graph_objects as go

    from roofline.plots.style import label_log_ticks, style_figure

    fig = go.Figure(go.Scatter(x=[1, 2], y=[0.3, 0.7]))
    style_figure(fig, 300, "t")
    fig.update_yaxes(type="log")
    assert label_log_ticks(fig).layout.yaxis.tickformat == ",~r"
    assert fig.layout.yaxis.dtick == "D2"  # a short span: 0.2, 0.5, 1, with full values
    assert fig.layout.xaxis.tickformat is None  # linear axes keep Plotly's own labels
    wide = go.Figure(go.Scatter(x=[1, 2], y=[1e-3, 1e4]))
    wide.update_yaxes(type="log")
    assert label_log_ticks(wide).layout.yaxis.dtick == 1  # seven decades: decades only


def test_kv_page_headline_describes_a_device_that_fits_and_the_shade_spares_its_curve():

    import numpy as np

    from tests.page_helpers import decode

    at = page("views/kv_page.py", model="llama-3.1-70b", hw=["h100-sxm", "mi300x"])
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert "KV budget (mi300x)" in metrics and metrics["KV budget (mi300x)"] != "0 B"
    assert metrics["Max batch at 8,192 tokens"] != "0 sequences"
    fig = figures(at)[0]
    names = [t["name"] for t in fig["data"]]
    assert names[0].startswith("NVIDIA H100") and "not one sequence fits" in names[0]
    mi300x = decode(fig["data"][1]["y"])
    assert np.isfinite(mi300x).any()
    # No shade lies over the contexts where the MI300X holds a sequence: it starts where its curve ends.
    last_fit = float(decode(fig["data"][1]["x"])[np.isfinite(mi300x)].max())
    assert all(s["x0"] >= last_fit for s in fig["layout"]["shapes"] if s["type"] == "rect")
    # The axis ends a little past the model's 131,072-token maximum, not at 1.4M.
    lo, hi = fig["layout"]["xaxis"]["range"]
    assert 131_072 < 10**hi < 1.5 * 131_072


def test_roofline_page_calls_its_predictions_ideal_bounds_never_achieved():
    at = page("views/roofline_page.py")
    assert not at.exception
    columns = list(at.dataframe[0].value.columns)
    assert "attainable (ideal bound) TFLOP/s" in columns
    assert not any("achieved" in c for c in columns)
    # The device's peak and ridge stay in the CSV: on the page they pushed the rates off the table at 1440 px.
    assert "peak TFLOP/s" not in columns and "ridge FLOP/B" not in columns
    assert columns[-2:] == ["roof at this intensity TFLOP/s", "rests on"]
    # Shown under short headings (the CSV keeps the long names), each with its meaning in its help.
    config = json.loads(at.dataframe[0].proto.columns)
    shown = {k: config[k]["label"] for k in ("attainable (ideal bound) TFLOP/s", "roof at this intensity TFLOP/s")}
    assert shown == {
        "attainable (ideal bound) TFLOP/s": "ideal TFLOP/s",
        "roof at this intensity TFLOP/s": "roof TFLOP/s",
    }
    assert "ideal bound" in config["attainable (ideal bound) TFLOP/s"]["help"]
    hovers = " ".join(
        str(t.get("text", "")) + str(t.get("hovertext", "")) + str(t.get("customdata", ""))
        for fig in figures(at)
        for t in fig["data"]
    )
    assert "attainable (ideal bound)" in hovers and "achieved" not in hovers


def test_op_table_columns_are_as_wide_as_their_values_after_a_widget_changes():
    # The browser keeps a table's column widths across reruns unless the page sets them: a value
    # that grew a digit was shown without its leading digits ("92,581.21" for 492,581.21).
    from dashboard.share import CELL_PAD_PX, CHAR_PX

    def gflop_width(at: AppTest) -> int:
        return json.loads(at.dataframe[-1].proto.columns)["GFLOP"]["width"]

    at = page("views/llm_page.py", view="Op table")
    small = gflop_width(at)
    at.number_input(key="batch").set_value(1000).run()
    assert not at.exception
    widest = f"{at.dataframe[-1].value['GFLOP'].max():,.2f}"
    assert len(widest) > 8 and gflop_width(at) >= CHAR_PX * len(widest) + CELL_PAD_PX > small


def test_column_widths_follow_the_format_as_shown():
    import pandas as pd

    from dashboard.share import CELL_PAD_PX, CHAR_PX, HEADER_CHAR_PX, column_widths

    frame = pd.DataFrame(
        {
            "GFLOP": [1.5, 492_581.21],
            "share": [5.0, 95.0],
            "odd": [1.0, 2.0],
            "saturation requests/s": [7.86, 44.04],
            "cost": [0.212, 0.31],
        }
    )
    formats = {"GFLOP": "%,.2f", "share": "%.1f%%", "odd": "compact", "saturation requests/s": "%.2f", "cost": "$%.3f"}
    widths = column_widths(frame, formats)
    assert (CHAR_PX, HEADER_CHAR_PX, CELL_PAD_PX) == (8, 6.5, 26)
    assert widths["GFLOP"] == 8 * len("492,581.21") + 26  # 106: the value is wider than the header
    assert widths["share"] == 8 * len("95.0%") + 26  # 66: "95.0%" against 6.5 x 5 for "share"
    assert widths["saturation requests/s"] == 137 + 26  # 6.5 x 21 = 136.5 for the header; "44.04" is 40
    assert widths["cost"] == 8 * len("$0.310") + 26  # the format's "$" is drawn too
    assert "odd" not in widths
    signed = column_widths(pd.DataFrame({"bias": [2.0, -1234.0]}), {"bias": "%+,.0f%%"})
    assert signed["bias"] == 8 * len("-1,234%") + 26
    assert "absent" not in column_widths(frame, {"absent": "%d"})
    # A column shown under a short label is as wide as the label, not as its long name: the long
    # name's width had left "ideal TFLOP/s" on the Roofline table with its number past the right edge.
    long = "attainable (ideal bound) TFLOP/s"
    short = column_widths(pd.DataFrame({long: [827.87]}), {long: "%,.2f"}, {long: "ideal TFLOP/s"})
    assert (
        short[long]
        == math.ceil(6.5 * len("ideal TFLOP/s")) + 26
        < column_widths(pd.DataFrame({long: [827.87]}), {long: "%,.2f"})[long]
    )


@pytest.mark.parametrize(("objective", "key_figure"), [("latency", "ideal bound"), ("throughput", "ideal tokens/s")])
def test_advisor_table_leads_with_the_device_and_its_key_figure(objective, key_figure):
    # A phone shows about two columns: they must be the device and what it is ranked by (the
    # default devices mix engine-measured and datasheet roofs, so the ranking is on the ideal bound).
    at = page("views/advisor_page.py", objective=objective)
    assert not at.exception
    table = at.dataframe[0]
    assert list(table.value.columns[:2]) == ["device", key_figure]
    config = json.loads(table.proto.columns)["device"]
    assert config["pinned"] is True
    assert config["width"] >= 8 * max(len(d) for d in table.value["device"])


def test_hardware_page_use_this_device_adds_it_to_the_comparison():
    at = page("views/hardware_page.py")
    at.text_input[0].set_value("my-fast-h100")
    at.number_input(key="cd_bf16").set_value(1500.0)
    at.button[0].click().run()  # the form's "Use this device"
    assert not at.exception and not at.error
    assert "my-fast-h100" in at.multiselect(key="compare").value
    assert any(t["name"].startswith("My NVIDIA H100") for t in figures(at)[0]["data"])


def test_hardware_page_memory_chart_gives_each_unit_its_own_axis():
    at = page("views/hardware_page.py")
    layout = figures(at)[1]["layout"]
    titles = {layout[a]["title"]["text"] for a in ("yaxis", "yaxis2")}
    assert titles == {"bandwidth (TB/s)", "capacity (GB, nominal)"}
    peak_categories = [str(t["x"]) for t in figures(at)[0]["data"]]
    assert "int8 (TOPS)" in peak_categories[0]


def test_with_device_replaces_the_superseded_custom_device_and_keeps_the_cap():
    from dashboard.hardware_view import with_device
    from roofline.plots.style import MAX_COMPARED

    assert with_device(["h100-sxm", "my-old"], "my-new", "my-old") == ["h100-sxm", "my-new"]
    full = [f"d{i}" for i in range(MAX_COMPARED)]
    assert with_device(full, "mine")[-1] == "mine" and len(with_device(full, "mine")) == MAX_COMPARED


def test_a_wide_tables_narrow_first_column_stays_in_view_on_a_phone():
    # The KV page's capacity table: its context column (the rows' names) is pinned, so a phone
    # scrolling to the fourth device still sees which context a row is; the Measure page's per-op
    # table names its ops in up to 26 characters, too wide to pin beside anything on a phone.
    import pandas as pd

    from dashboard.share import PIN_MAX_PX, _narrow_first

    at = page("views/kv_page.py", model="llama-3.1-8b", hw=["h100-sxm", "a100-sxm-80gb", "l40s", "mi300x"])
    assert not at.exception
    table = at.dataframe[0]
    assert list(table.value.columns)[0] == "context" and len(table.value.columns) == 5
    assert json.loads(table.proto.columns)["context"]["pinned"] is True
    assert PIN_MAX_PX == 170 and _narrow_first(pd.DataFrame({"x" * 18: [1]}))  # 8 x 18 + 26 = 170
    assert not _narrow_first(pd.DataFrame({"op": ["MLP activation (SiLU/GELU)"]}))
    # A page that pinned its own row names keeps just those: the LLM page's op table pins "op", not "phase".
    ops = page("views/llm_page.py", view="Op table").dataframe[0]
    assert [k for k, v in json.loads(ops.proto.columns).items() if v.get("pinned")] == ["op"]


def test_the_op_tables_share_of_roof_is_left_out_where_the_op_rests_on_the_datasheet():
    """Elementwise ops, which no kernel table times, had read "100%" of their roof: their expected
    time is their ideal bound, not a reading. "—" there; the ops the tables time keep theirs."""
    at = page("views/llm_page.py", view="Op table")
    assert not at.exception
    table = at.dataframe[0].value.set_index("op")
    datasheet = table["rests on"].str.startswith("datasheet")
    assert datasheet.any() and (~datasheet).any()
    assert table.loc[datasheet, "% of its roof"].isna().all()
    measured = table.loc[~datasheet, "% of its roof"]
    assert measured.notna().all() and (measured <= 100 + 1e-9).all() and (measured < 100).any()
    assert "— where the op rests on the datasheet" in json.loads(at.dataframe[0].proto.columns)["% of its roof"]["help"]
    ideal = page("views/llm_page.py", view="Op table", engine="ideal").dataframe[0].value
    assert ideal["% of its roof"].isna().all()  # every op on the datasheet: nothing read
