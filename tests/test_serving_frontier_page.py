"""The Serving page's frontier chart: log axes with several labels, the TPOT target drawn, points
that miss the TTFT target hollow, what each figure rests on, and a device without a price."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model

ROOT = Path(__file__).resolve().parent.parent
H100 = get_hardware("h100-sxm")
LLAMA = get_model("llama-3.1-8b")


def _view(view: str, **params):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "views/serving_page.py"), default_timeout=60)
    for key, value in {**params, "view": view}.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception and not at.error
    return at


def _frontier(**params) -> dict:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "views/serving_page.py"), default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception and not at.error
    chart = next(c for c in at.get("plotly_chart") if c.key == "frontier_chart")
    return json.loads(chart.proto.spec), at


def test_serving_frontier_log_axes_read_several_labels_and_draw_the_tpot_target():
    fig, _ = _frontier()
    layout = fig["layout"]
    for axis in ("xaxis", "yaxis"):
        assert layout[axis]["type"] == "log"
        lo, hi = layout[axis]["range"]
        shown = [v for v in layout[axis]["tickvals"] if lo <= np.log10(v) <= hi]
        assert len(shown) >= 3, (axis, layout[axis]["tickvals"], (lo, hi))
        assert len(layout[axis]["ticktext"]) == len(layout[axis]["tickvals"])
    assert "tokens/s" in layout["xaxis"]["title"]["text"] and "tokens/s" in layout["yaxis"]["title"]["text"]
    # The TPOT target's label sits at log10 of 1 / TPOT, inside the y range (a linear value is
    # drawn off the chart on a log axis).
    label = next(a for a in layout["annotations"] if "TPOT target" in a["text"])
    assert label["y"] == pytest.approx(np.log10(1e3 / 50.0))
    lo, hi = layout["yaxis"]["range"]
    assert lo <= label["y"] <= hi


def test_serving_frontier_shows_points_that_miss_the_ttft_target_hollow():
    loose, _ = _frontier()
    tight, _ = _frontier(ttft_ms="50.0")
    assert not any("misses TTFT" in (t.get("name") or "") for t in loose["data"])
    assert any("misses TTFT" in (t.get("name") or "") for t in tight["data"])
    device = tight["data"][0]
    symbols = device["marker"]["symbol"]
    assert any(sym.endswith("-open") for sym in symbols) and any(not sym.endswith("-open") for sym in symbols)
    assert any("misses the 50 ms target" in h for h in device["text"])
    assert any("meets the 2 s target" in h for h in loose["data"][0]["text"])


def test_serving_figures_say_what_they_rest_on():
    # With engine "auto" the H100 rests on vLLM's measured kernels, and says so...
    fig, at = _frontier()
    assert all("engine-measured roofs" in h for h in fig["data"][0]["text"])
    captions = " ".join(c.value for c in at.caption)
    assert "H100 SXM5 80GB\\: engine-measured roofs, vLLM" in captions
    assert "MI300X\\: ideal roofs \\(datasheet\\); no engine-measured kernel tables" in captions
    # ...and on the datasheet alone every figure is an ideal bound.
    fig, at = _frontier(engine="ideal")
    assert all("datasheet roofs (an ideal bound)" in h for h in fig["data"][0]["text"])
    assert any("ideal bounds on datasheet roofs" in c.value for c in at.caption)
    at = _view("One point", engine="ideal")
    assert next(m for m in at.metric if m.label == "TTFT").proto.delta == "ideal bound"
    at = _view("Techniques", engine="ideal")
    assert any("Times rest on the ideal bound (datasheet roofs)" in c.value for c in at.caption)
    assert any("Both TPOTs rest on the ideal bound" in c.value for c in at.caption)


def test_log_ticks_label_a_narrow_axis_between_decades_and_a_wide_one_by_decade():
    from roofline.plots.serving import log_ticks

    values, labels = log_ticks(60.0, 400.0)
    assert labels == ["70", "100", "150", "200", "300", "400"]
    assert log_ticks(120.0, 180.0)[1] == ["130", "140", "150", "170"]
    values, labels = log_ticks(3.0, 2e5)
    assert labels == ["10", "100", "1k", "10k", "100k"]
    assert log_ticks(0.0, 1.0) == ([], [])


def test_serving_frontier_per_dollar_names_a_device_without_a_price():
    fig, _ = _frontier(xaxis="tokens per dollar")
    names = [t.get("name") or "" for t in fig["data"]]
    # The MI300X has no kernel tables: beside engine-measured devices its line is an ideal bound.
    assert "AMD Instinct MI300X · ideal bound (dashed) (no price: not drawn)" in names
    assert not any(n.startswith("NVIDIA H100") and "ideal bound" in n for n in names)
    # Drawn apart from the engine-measured lines: a bound is not compared like for like.
    line = {t.get("name"): t["line"] for t in fig["data"] if t.get("mode") == "lines+markers"}
    assert line["AMD Instinct MI300X · ideal bound (dashed) (no price: not drawn)"]["dash"] == "dash"
    assert not any(v.get("dash") for k, v in line.items() if k.startswith("NVIDIA H100"))
    assert fig["layout"]["xaxis"]["title"]["text"] == "output tokens per USD"
    # With no price at all the chart is empty, and says why (only the legend had).
    fig, _ = _frontier(**{"xaxis": "tokens per dollar", "hw": ["h100-sxm"], "price_h100-sxm": "0"})
    assert any("no device here has a price" in a["text"] for a in fig["layout"]["annotations"])


def test_the_cheapest_setup_says_how_each_engine_took_its_prompts_in():
    """TensorRT-LLM's default keeps a prompt whole beside the decodes, and so caps the batch at what
    its token budget leaves beside one prompt; the caption said its prompts were chunked."""
    said = {
        e: " ".join(c.value for c in _view("Cheapest setup", engine=e, hw="h100-sxm").caption)
        for e in ("trtllm", "vllm")
    }
    assert (
        "prompts in the decodes' steps, each whole." in said["trtllm"]
        and "max_batched_tokens - prompt" in said["trtllm"]
    )
    assert "prompts in the decodes' steps, a long one split over steps." in said["vllm"]
    # A TTFT equal to the TPOT (every step carries a prompt that fits it) is said to be no slip.
    assert all("Where the TTFT equals the TPOT, every step carries a new prompt" in said[e] for e in said)
    apart = " ".join(c.value for c in _view("Cheapest setup", engine="sglang", hw="h100-sxm").caption)
    assert "Where the TTFT equals the TPOT" not in apart  # SGLang's prompts run in steps of their own


def test_the_point_a_link_opens_is_its_device_and_batch():
    """The One point tab's device and each device's decode batch are in the link: it opened the
    first device at its middle batch whatever the link said. A link's device not on the page, or a
    batch that does not fit, is named and the default taken."""
    at = _view("One point", hw=["h100-sxm", "h200-sxm"], pick_hw="h200-sxm", **{"pick_batch_h200-sxm": "392"})
    assert (at.selectbox(key="pick_hw").value, at.select_slider(key="pick_batch_h200-sxm").value) == ("h200-sxm", 392)
    assert "NVIDIA H200" in " ".join(c.value for c in at.caption) and not at.warning
    bad = _view("One point", hw=["h100-sxm", "h200-sxm"], pick_hw="mi300x", **{"pick_batch_h100-sxm": "7"})
    warned = " ".join(w.value for w in bad.warning)
    assert "`pick_hw`" in warned and "mi300x" in warned and "`pick_batch_h100-sxm`" not in warned
    assert bad.selectbox(key="pick_hw").value == "h100-sxm"
    assert bad.select_slider(key="pick_batch_h100-sxm").value == 7
    odd = _view("Techniques", hw="h100-sxm", **{"pick_batch_h100-sxm": "64"})
    assert "`pick_batch_h100-sxm`: '64' is not allowed" in " ".join(w.value for w in odd.warning)
    assert odd.select_slider(key="pick_batch_h100-sxm").value == 30  # the middle of the H100's 1..601
    at.selectbox(key="pick_hw").set_value("h100-sxm").run()  # each device its own batch: the H100 at its default
    assert not at.exception and not at.warning
    assert at.select_slider(key="pick_batch_h100-sxm").value == 30
