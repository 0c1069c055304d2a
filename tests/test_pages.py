"""Streamlit AppTest for every page: defaults, a changed widget, bad URL parameters."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.page_helpers import ROOT, TIMEOUT, chart_titles, decode, figure, page, trace_names


def test_app_navigation_keeps_widgets_across_reruns():
    # Page widgets must survive reruns of the navigation entry point (the multipage trap).
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    at.number_input(key="m").set_value(2).run()
    at.number_input(key="n").set_value(3).run()
    assert at.number_input(key="m").value == 2 and at.number_input(key="n").value == 3
    assert any("GEMM 2×3×4096" in n for n in trace_names(at))
    at.switch_page("views/hardware_page.py").run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 2
    # A page with several views draws the open one (the first, by default).
    for view, charts in (("views/llm_page.py", ["llm_roofline"]), ("views/kv_page.py", ["capacity_chart"])):
        at.switch_page(view).run()
        assert not at.exception and [c.key for c in at.get("plotly_chart")] == charts


def test_roofline_defaults():
    at = page("views/roofline_page.py")
    assert not at.exception and not at.warning
    names = trace_names(at)
    assert any("NVIDIA H100 SXM5 80GB · bf16" in n for n in names)
    assert any("GEMM 4096×4096×4096" in n for n in names)
    fig = figure(at)
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"
    assert len(fig["layout"]["shapes"]) == 2  # memory- and compute-bound regions


def test_roofline_widget_change_moves_the_point():
    at = page("views/roofline_page.py")
    before = figure(at)
    at.number_input(key="m").set_value(1).run()
    after = figure(at)
    star = [t for t in after["data"] if t.get("name", "").startswith("GEMM 1×")]
    assert star, "the GEMM point should be renamed and moved"
    # 1x4096x4096 bf16: 33,554,432 FLOPs / 33,570,816 B = 0.9995 FLOP/B, memory-bound.
    assert decode(star[0]["x"])[0] == pytest.approx(33_554_432 / 33_570_816)
    assert before != after
    assert "memory-bandwidth-bound" in " ".join(md.value for md in at.markdown)


def test_roofline_adding_a_device_adds_its_roof():
    at = page("views/roofline_page.py")
    at.multiselect(key="hw").set_value(["h100-sxm", "mi300x"]).run()
    assert any("AMD Instinct MI300X · bf16" in n for n in trace_names(at))
    # An fp8 GEMM gets its own roof beside the bf16 picked, on each device: its point sits under it.
    at.selectbox(key="gemm_dtype").set_value("fp8").run()
    names = trace_names(at)
    assert all(
        any(f"{d} · {dtype}" in n for n in names) for d in ("MI300X", "H100 SXM5 80GB") for dtype in ("bf16", "fp8")
    )


def test_roofline_missing_dtype_is_explained_not_drawn():
    at = page("views/roofline_page.py", hw=["a100-sxm-80gb"], dtypes=["fp8", "bf16"])
    assert not at.exception
    assert any("has no fp8" in i.value for i in at.info)
    assert not any("· fp8" in n for n in trace_names(at))
    # The GEMM's own dtype missing: said once, in the warning, not again among the roofs not drawn.
    at = page("views/roofline_page.py", hw=["a6000", "h100-sxm"])
    assert not at.info and [w.value for w in at.warning] == [
        "NVIDIA RTX A6000 has no bf16 peak; neither its bf16 roof nor its GEMM point is drawn. It has: fp32, fp16."
    ]
    # An LLM step past the model's context is cut to it and said, as the LLM page does (it had said
    # "LLM step not drawn: seq_len + 1: 131073 tokens exceed llama-3.1-8b's maximum context").
    at = page("views/roofline_page.py", llm="llama-3.1-8b", llm_phase="decode", llm_seq="131072")
    assert not at.exception and not at.warning
    assert any("Context 131,072 with the token a decode step adds exceeds" in i.value for i in at.info)
    # A device with no compute peak at all says so (its list had been empty: "It has: .").
    at = page("views/roofline_page.py", hw=["m4-max"])
    assert not at.exception and any("gives no compute peak at all" in w.value for w in at.warning)


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"m": "-5"}, "`m`: '-5' is out of range"),
        ({"n": "abc"}, "`n`: 'abc' is not a number"),
        ({"k": "1.5"}, "`k`: '1.5' is not a whole number"),
        ({"k": "nan"}, "`k`: 'nan' is not a number"),  # had read "not a whole number", as had inf
        ({"m": "inf"}, "`m`: 'inf' is out of range"),
        ({"launch_us": "nan"}, "`launch_us`: 'nan' is not a number"),
        ({"hw": ["", "h100-sxm"]}, "`hw`: an empty value ignored"),  # had read "unknown '' ignored"
        ({"hw": ["nope"]}, "`hw`: unknown 'nope' ignored"),
        ({"gemm_dtype": "fp7"}, "`gemm_dtype`: 'fp7' is not allowed"),
        ({"launch_us": "-1"}, "`launch_us`: '-1' is out of range"),
        ({"sweep": "maybe"}, "`sweep`: 'maybe' is not allowed"),
    ],
)
def test_roofline_bad_url_parameter_warns_and_falls_back(params, expected):
    at = page("views/roofline_page.py", **params)
    assert not at.exception
    assert any(expected in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.get("plotly_chart"), "the page still draws with the default"


def test_roofline_good_url_parameters_apply():
    at = page("views/roofline_page.py", m="8", hw=["h200-sxm"], gemm_dtype="fp8", dtypes=["fp8"])
    assert not at.warning
    names = trace_names(at)
    assert any("GEMM 8×4096×4096 · NVIDIA H200 SXM 141GB" in n for n in names)
    assert any("NVIDIA H200 SXM 141GB · fp8" in n for n in names)


def test_hardware_page_defaults():
    at = page("views/hardware_page.py")
    assert not at.exception and not at.warning
    table = at.dataframe[0].value
    assert len(table) >= 24
    assert table.set_index("id").loc["h100-sxm", "bf16 TFLOPS"] == 989.4
    # Unknown figures stay empty, not zero.
    assert table.set_index("id")["bf16 TFLOPS"].isna().loc["v100-sxm2-32gb"]
    assert len(at.get("plotly_chart")) == 2


def test_hardware_page_compare_changes_the_chart():
    at = page("views/hardware_page.py")
    before = [t["name"] for t in figure(at, 0)["data"]]
    at.multiselect(key="compare").set_value(["l4", "a10"]).run()
    after = [t["name"] for t in figure(at, 0)["data"]]
    assert before != after and after == ["NVIDIA L4 24GB", "NVIDIA A10 24GB"]
    # On its log axis each peak is a dot, grouped by dtype: a bar's length there starts at an arbitrary floor.
    peaks = figure(at, 0)
    assert peaks["layout"]["yaxis"]["type"] == "log" and peaks["layout"]["scattermode"] == "group"
    assert {t["type"] for t in peaks["data"]} == {"scatter"} and {t["mode"] for t in peaks["data"]} == {"markers"}


def test_grouped_bars_stay_bars_on_a_linear_axis_and_skip_an_unknown_value():
    from roofline.plots import grouped_bar_figure

    fig = grouped_bar_figure(["bf16", "fp8"], {"A": [1.0, None], "B": [2.0, 4.0]}, "TFLOPS")
    assert [t.type for t in fig.data] == ["bar", "bar"] and fig.data[0].y == (1.0, None)
    assert "fp8: unknown TFLOPS" in fig.data[0].text[1]
    dots = grouped_bar_figure(["bf16", "fp8"], {"A": [1.0, None]}, "TFLOPS", log_y=True)
    assert dots.data[0].type == "scatter" and dots.data[0].y == (1.0, None)


def test_hardware_page_vendor_filter_and_bad_param():
    at = page("views/hardware_page.py", vendor=["AMD", "Acme"])
    assert any("`vendor`: unknown 'Acme' ignored" in w.value for w in at.warning)
    assert set(at.dataframe[0].value["vendor"]) == {"AMD"}


def test_roofline_page_overlays_an_llm_step():
    at = page("views/roofline_page.py", llm="llama-3.1-8b", llm_phase="decode", llm_batch="4", llm_seq="2048")
    assert not at.exception and not at.warning
    assert "llama-3.1-8b decode ops" in trace_names(at)


def test_roofline_page_llm_step_error_is_a_warning():
    at = page("views/roofline_page.py", llm="llama-2-7b", hw=["a100-sxm-80gb"], wdtype="fp8", adtype="fp8")
    assert not at.exception
    assert any(w.value.startswith("LLM step not drawn: ") and "fp8" in w.value for w in at.warning)
    # A context past the model's is cut to it, with a note, and drawn.
    at = page("views/roofline_page.py", llm="llama-2-7b", llm_seq="100000")
    assert not at.exception and not at.warning
    assert any("exceeds Llama 2 7B's maximum context of 4,096; showing 4,096." in i.value for i in at.info)


def test_llm_page_defaults():
    at = page("views/llm_page.py")
    assert not at.exception and not at.warning and not at.error
    labels = {m.label: m.value for m in at.metric}
    assert {"TTFT", "TPOT", "End to end", "Output tokens/s", "MFU", "Memory / device"} <= set(labels)
    assert [c.key for c in at.get("plotly_chart")] == ["llm_roofline"]
    names = trace_names(at, 0)
    assert "prefill ops" in names and "decode ops" in names
    assert "memory-bandwidth-bound" in at.markdown[0].value  # decode, from a CUDA graph


def test_llm_page_batch_change_changes_the_charts():
    at = page("views/llm_page.py")
    before = figure(at, 0)
    tpot_before = {m.label: m.value for m in at.metric}["TPOT"]
    at.number_input(key="batch").set_value(64).run()
    assert figure(at, 0) != before
    assert {m.label: m.value for m in at.metric}["TPOT"] != tpot_before


def test_llm_page_cuda_graphs_and_quantization_move_decode():
    # On the datasheet roofs (with vLLM's host work the 1B's small steps all wait on the host).
    at = page("views/llm_page.py", model="llama-3.2-1b", engine="ideal")
    graphs = {m.label: m.value for m in at.metric}["TPOT"]
    at.selectbox(key="wdtype").set_value("int4").run()
    int4 = {m.label: m.value for m in at.metric}["TPOT"]  # fewer weight bytes: faster
    at.checkbox(key="graphs").uncheck().run()
    eager = {m.label: m.value for m in at.metric}["TPOT"]
    assert "overhead-bound" in at.markdown[0].value  # eager, the 1B decode waits on the host
    assert len({eager, graphs, int4}) == 3


def test_llm_page_does_not_fit_is_explained():
    at = page("views/llm_page.py", model="llama-3.1-405b")
    assert not at.exception
    assert any("does not fit" in w.value for w in at.warning)
    # Said before the figures, and by each time and rate: times it cannot reach.
    kinds = [type(e).__name__ for e in at.main]
    assert kinds.index("Warning") < kinds.index("Metric")
    labels = [m.label for m in at.metric]
    assert labels[:4] == [f"{k} (if it fit)" for k in ("TTFT", "TPOT", "End to end", "Output tokens/s")]
    assert {m.label: m.delta for m in at.metric}["TTFT (if it fit)"].startswith("ideal bound ")  # still beside it
    # A second device it does not fit, the first fitting: warned about too, and "fits" beside its name.
    at = page("views/llm_page.py", model="llama-3.1-70b", hw=["b200", "h100-sxm"])
    (warning,) = [w.value for w in at.warning if "does not fit" in w.value]
    assert "NVIDIA H100 SXM5 80GB" in warning and "It fits at TP=2" in warning and "assume it would" in warning
    devices = at.dataframe[0].value
    assert list(devices.columns[:2]) == ["device", "fits"] and devices["fits"].tolist() == [True, False]
    assert not any("if it fit" in m.label for m in at.metric)  # the device in detail, the B200, holds it


def test_llm_page_invalid_combination_is_an_error_not_a_traceback():
    at = page("views/llm_page.py", model="falcon-7b", tp="2")
    assert not at.exception
    assert any("does not divide falcon-7b's 71 attention heads" in e.value for e in at.error)
    at = page("views/llm_page.py", adtype="fp8", hw=["a100-sxm-80gb"])
    assert any("a100-sxm-80gb has no kernels for fp8 math" in e.value for e in at.error)


def test_advisor_page_device_without_a_published_peak_is_diagnosed():
    at = page("views/advisor_page.py", device="m4-max")
    assert not at.exception and not at.error
    assert at.get("plotly_chart")


def test_llm_page_device_without_a_published_peak_shows_lower_bounds():
    at = page("views/llm_page.py", hw=["m4-max"])
    assert not at.exception and not at.error
    assert any("Times are lower bounds" in w.value for w in at.warning)
    assert {m.label: m.value for m in at.metric}["MFU"] == "n/a"
    for view in ("Ops on the roofline", "Where the time goes", "Batch and context"):
        at = page("views/llm_page.py", hw=["m4-max"], view=view)
        assert not at.exception and not at.error and len(at.get("plotly_chart")) == 1
    # No compute roof to draw: its memory slope, the bound its ops are timed on, is drawn alone.
    slope = figure(page("views/llm_page.py", hw=["m4-max"]))["data"][0]
    assert slope["name"].endswith("546 GB/s; no published compute peak") and slope["line"]["dash"] == "dot"
    assert decode(slope["y"])[1] / decode(slope["x"])[1] == pytest.approx(0.546, rel=1e-3)  # TFLOP/s per FLOP/B


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"model": "gpt-5"}, "`model`: 'gpt-5' is not allowed"),
        ({"batch": "0"}, "`batch`: '0' is out of range"),
        ({"tp": "3"}, "`tp`: '3' is not allowed"),
        ({"kvdtype": "int3"}, "`kvdtype`: 'int3' is not allowed"),
        ({"mem_util": "1.5"}, "`mem_util`: '1.5' is out of range"),
    ],
)
def test_llm_page_bad_url_parameters(params, expected):
    at = page("views/llm_page.py", **params)
    assert not at.exception
    assert any(expected in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.get("plotly_chart")


def test_llm_page_good_url_parameters_apply():
    at = page("views/llm_page.py", model="mixtral-8x7b", hw=["h100-sxm", "mi300x"], batch="16", tp="2", kvdtype="fp8")
    assert not at.warning and not at.error
    assert "Mixtral 8x7B" in chart_titles(at)[0]
    assert len(at.dataframe) == 1  # the device comparison, above the views
    at = page("views/llm_page.py", model="mixtral-8x7b", hw=["h100-sxm", "mi300x"], view="Op table")
    assert len(at.dataframe) == 2 and not at.get("plotly_chart")  # and the op table


def test_kv_page_defaults():
    at = page("views/kv_page.py")
    assert not at.exception and not at.warning and not at.error
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["KV per token"] == "131 KB"
    # tests/test_kvcache.py works it: vLLM's defaults on an H100 (8,192 tokens, 1,024 sequences).
    assert metrics["Max batch at 8,192 tokens"] == "54 sequences"
    assert [c.key for c in at.get("plotly_chart")] == ["capacity_chart"]
    names = trace_names(at, 0)
    assert names == ["NVIDIA H100 SXM5 80GB", "NVIDIA H200 SXM 141GB", "AMD Instinct MI300X"]
    # The H200 and MI300X hold more short sequences than vLLM's 1,024 there: the cap is drawn and named.
    assert any("Memory only: above a dotted line" in c.value for c in at.caption)
    l4 = page("views/kv_page.py", hw=["l4"])
    assert not l4.exception and l4.get("plotly_chart") and not any("Memory only" in c.value for c in l4.caption)


def test_kv_page_fp8_doubles_capacity_and_shows_variants():
    at = page("views/kv_page.py", view="KV dtype and GQA")
    at.selectbox(key="kvdtype").set_value("fp8").run()
    assert {m.label: m.value for m in at.metric}["Max batch at 8,192 tokens"] == "108 sequences"
    variants = trace_names(at, 0)
    assert "KV fp8" in variants and "KV bf16" in variants
    assert any(n.startswith("same model as MHA") for n in variants)


def test_kv_page_model_that_does_not_fit():
    at = page("views/kv_page.py", model="llama-3.1-405b", hw=["h100-sxm"])
    assert not at.exception
    assert any("at TP >= 16" in w.value for w in at.warning)


def test_kv_page_context_above_the_maximum_is_clamped():
    at = page("views/kv_page.py", model="llama-2-7b", context="100000")
    assert not at.exception
    assert any("exceeds Llama 2 7B's maximum of 4,096" in w.value for w in at.warning)


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"model": "nope"}, "`model`: 'nope' is not allowed"),
        ({"mem_util": "0"}, "`mem_util`: '0' is out of range"),
        ({"block": "7"}, "`block`: '7' is not allowed"),
        ({"batch": "-1"}, "`batch`: '-1' is out of range"),
        ({"hw": ["zz"]}, "`hw`: unknown 'zz' ignored"),
    ],
)
def test_kv_page_bad_url_parameters(params, expected):
    at = page("views/kv_page.py", **params)
    assert not at.exception
    assert any(expected in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.get("plotly_chart")


def test_advisor_page_defaults():
    at = page("views/advisor_page.py")
    assert not at.exception and not at.warning and not at.error
    assert [c.key for c in at.get("plotly_chart")] == ["ranking_chart"]
    assert "ranked by latency" in chart_titles(at)[0]
    at = page("views/advisor_page.py", view="Diagnosis")
    assert any("memory-bandwidth-bound" in md.value for md in at.markdown)
    at = page("views/advisor_page.py", view="Top roofs")  # GB200, GB300 and MI350X: 8 TB/s each
    assert not at.exception and [c.key for c in at.get("plotly_chart")] == ["top_roofs_chart"]
    assert any("lie on each other (8 TB/s)" in c.value for c in at.caption)


def test_advisor_page_names_the_engine_its_expected_times_read():
    """With an engine, a caption names its kernels on the diagnosed device (and the routing where
    one is set); the ideal engine has none."""
    at = page("views/advisor_page.py", engine="sglang", device="h100-sxm", moerouting="balanced")
    words = " ".join(c.value for c in at.caption)
    assert not at.exception and "SGLang" in words and "kernels, h100-sxm" in words and "balanced routing" in words
    ideal = page("views/advisor_page.py", engine="ideal", device="h100-sxm")
    assert not any("engine-measured roofs" in c.value for c in ideal.caption)


def test_advisor_page_what_if_slider_changes_the_time():
    at = page("views/advisor_page.py", graphs="true", view="What-if")
    before = {m.label: m.value for m in at.metric}["Time"]
    at.select_slider(key="x_memory").set_value(2.0).run()
    after = {m.label: m.value for m in at.metric}["Time"]
    assert before != after


def test_advisor_page_fits_nowhere():
    at = page("views/advisor_page.py", model="llama-3.1-405b")
    assert not at.exception
    assert any("fits on no device" in w.value for w in at.warning)


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"objective": "cheap"}, "`objective`: 'cheap' is not allowed"),
        ({"x_memory": "3"}, "`x_memory`: '3' is not allowed"),
        ({"device": "h1000"}, "`device`: 'h1000' is not allowed"),
    ],
)
def test_advisor_page_bad_url_parameters(params, expected):
    at = page("views/advisor_page.py", **params)
    assert not at.exception
    assert any(expected in w.value for w in at.warning), [w.value for w in at.warning]


# Every page opened from a URL with non-default values applies all of them.
def test_llm_headline_on_a_device_without_a_published_peak_is_a_bound():
    """The L20 publishes no compute peak: the headline times are lower bounds and say so."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "views" / "llm_page.py"), default_timeout=60)
    at.query_params["hw"] = "l20"
    at.run()
    assert not at.exception
    values = {m.label: m.value for m in at.metric}
    assert values["TTFT"].startswith("≥ ") and values["TPOT"].startswith("≥ ")
    assert values["Output tokens/s"].startswith("≤ ")
