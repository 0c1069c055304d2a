"""The dashboard as people use it: a choice one device cannot run never blanks a page, the offline
report carries the page's numbers as the page shows them, and the small things a reviewer notices."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from roofline.engine import REGIME_LABELS
from roofline.report import Chart, Metric, Table, display_frame, html_report, markdown_html

ROOT = Path(__file__).resolve().parent.parent


def page(path: str, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / path), default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def texts(elements) -> str:
    return " ".join(e.value for e in elements)


def share_link(at: AppTest) -> str:
    return at.code[-1].value


# ---- 1. one device that cannot run a choice gets its own row; the rest of the page stays ---------
def test_llm_page_with_a_v100_added_keeps_the_analysis_and_gives_the_v100_a_row():
    at = page("views/llm_page.py", hw=["h100-sxm", "v100-sxm2-32gb"])
    assert not at.exception and not at.error
    assert [m.label for m in at.metric][:2] == ["TTFT", "TPOT"]
    assert [c.key for c in at.get("plotly_chart")] == ["llm_roofline"]
    devices = at.dataframe[0].value
    assert list(devices["device"]) == ["NVIDIA H100 SXM5 80GB", "NVIDIA V100 SXM2 32GB"]
    assert "hw=v100-sxm2-32gb" in share_link(at)


def test_llm_page_fp8_on_an_a100_names_the_reason_and_keeps_table_and_link():
    at = page("views/llm_page.py", adtype="fp8", hw="a100-sxm-80gb")
    assert not at.exception
    assert "no kernels for fp8 math" in texts(at.error) and "A100" in texts(at.error)
    devices = at.dataframe[0].value
    assert "no kernels for fp8 math" in devices.loc[0, "notes"]
    assert "adtype=fp8" in share_link(at)


def test_llm_page_analyses_the_first_device_that_can_run_the_choice():
    at = page("views/llm_page.py", adtype="fp8", hw=["a100-sxm-80gb", "h100-sxm"])
    assert not at.exception and not at.error
    assert "A100" in texts(at.warning) and "no kernels for fp8 math" in texts(at.warning)
    assert "Analysed in detail: NVIDIA H100 SXM5 80GB" in texts(at.info)
    assert at.metric[0].label == "TTFT"
    devices = at.dataframe[0].value
    assert "no kernels for fp8 math" in devices.loc[0, "notes"] and devices.loc[1, "TTFT"].endswith("ms")


def test_advisor_page_a_what_if_device_without_the_peak_keeps_the_ranking():
    at = page("views/advisor_page.py", adtype="fp8", device="a100-sxm-80gb", view="Diagnosis")
    assert not at.exception and not at.error
    assert "NVIDIA A100 SXM4 80GB cannot run this workload" in texts(at.warning)
    at = page("views/advisor_page.py", adtype="fp8", device="a100-sxm-80gb")
    ranking = at.dataframe[0].value
    assert len(ranking) > 30 and ranking["fits"].any()
    assert at.get("plotly_chart") and "device=a100-sxm-80gb" in share_link(at)


def test_advisor_page_with_a_v100_what_if_device_runs_in_fp16():
    at = page("views/advisor_page.py", device="v100-sxm2-32gb", view="Diagnosis")
    assert not at.exception and not at.error
    assert "V100" in texts(at.markdown)  # the diagnosis is there
    at = page("views/advisor_page.py", device="v100-sxm2-32gb", view="What-if")
    assert not at.exception and not at.error and at.metric  # and the what-if
    assert [c.key for c in at.get("plotly_chart")] == ["what_if_chart"]


def test_llm_page_a_prompt_at_the_context_limit_says_what_it_shows():
    at = page("views/llm_page.py", model="gemma-2-9b", prompt="8192")
    assert not at.exception and not at.error
    assert "showing an output of 1 token." in texts(at.warning)
    assert at.metric[0].label == "TTFT"


def test_roofline_page_teaches_on_the_first_device_that_has_the_gemm_dtype():
    at = page("views/roofline_page.py", hw=["a100-sxm-80gb", "h100-sxm"], gemm_dtype="fp8", lesson="true")
    assert not at.exception
    assert "A100 SXM4 80GB has no fp8 peak" in texts(at.warning)
    lesson = texts(at.markdown)
    assert "NVIDIA H100 SXM5 80GB can do at most" in lesson and "A100 SXM4 80GB can do" not in lesson


# ---- 5. small things ---------------------------------------------------------------------------
def test_a_fractional_integer_parameter_is_named_as_such_and_the_default_used():
    at = page("views/llm_page.py", batch="2.5")
    assert "`batch`: '2.5' is not a whole number" in texts(at.warning)
    assert at.number_input(key="batch").value == 1


def test_more_devices_than_colours_are_capped_with_a_warning():
    from roofline.hardware import load_hardware
    from roofline.plots.style import DEVICE_COLORS, MAX_COMPARED

    ids = list(load_hardware())[:15]
    at = page("views/roofline_page.py", hw=ids)
    assert not at.exception
    assert f"at most {MAX_COMPARED} compared at once" in texts(at.warning)
    assert at.multiselect(key="hw").value == ids[:MAX_COMPARED] and MAX_COMPARED == len(DEVICE_COLORS)
    assert len(set(DEVICE_COLORS)) == len(DEVICE_COLORS)


def test_advisor_page_offers_downloads_and_names_what_its_chart_leaves_out():
    at = page("views/advisor_page.py", objective="per-watt")
    labels = [b.label for b in at.get("download_button")]
    assert "Download the ranking (CSV)" in labels and "Download the ranking (JSON)" in labels
    left_out = texts(at.caption)
    assert "Not in the chart" in left_out and "for want of a TDP" in left_out
    # Every device without a TDP is named.
    from roofline.hardware import load_hardware

    no_tdp = [h.name for h in load_hardware().values() if not h.tdp_w]
    assert no_tdp and all(name in left_out for name in no_tdp)


def test_the_ranking_chart_says_it_draws_ideal_bounds_and_explains_its_colours():
    # Devices on measured kernels beside devices on the datasheet are ranked on the ideal bound,
    # which the bars draw: the axis, the title and each hover say so, the hover with the expected time.
    import json

    from tests.page_helpers import chart_titles

    at = page("views/advisor_page.py")
    spec = json.loads(next(c for c in at.get("plotly_chart") if c.key == "ranking_chart").proto.spec)
    assert spec["layout"]["xaxis"]["title"]["text"].startswith("ideal bound: time (")
    assert any(t.endswith("ranked by latency at the ideal bound") for t in chart_titles(at))
    bars = spec["data"][0]
    assert all(h[2].startswith("ideal bound ") for h in bars["customdata"])
    # A device on the datasheet alone has no expected time beside the measured ones (its "expected"
    # would be its ideal bound again, and would read faster than theirs): the hover and table say so.
    hovers = dict(zip(bars["y"], (h[2] for h in bars["customdata"])))
    assert " · expected " in hovers["B200 (HGX, 1000 W)"]
    assert hovers["Instinct MI300X"].endswith(" · no expected time (datasheet roofs only)")
    table = at.dataframe[0].value.set_index("device")
    assert (
        table.loc["Instinct MI300X", "expected time"] == "n/a" and table.loc["Instinct MI300X", "roofs"] == "datasheet"
    )
    assert table.loc["Instinct MI300X", "expected tokens/s"] != table.loc["Instinct MI300X", "expected tokens/s"]  # NaN
    assert table.loc["B200 (HGX, 1000 W)", "expected time"].endswith("ms")
    legend = {t["name"] for t in spec["data"][1:]}
    assert legend and legend <= {*REGIME_LABELS.values(), "does not fit"}
    assert spec["layout"]["legend"]["title"]["text"].endswith("<br>colour: regime of the expected time")
    assert all(h[0].startswith("expected time ") for h in bars["customdata"])
    # One device on its datasheet alone: ranked on its expected time, which is what the axis says.
    alone = page("views/advisor_page.py", engine="ideal")
    spec = json.loads(next(c for c in alone.get("plotly_chart") if c.key == "ranking_chart").proto.spec)
    assert spec["layout"]["xaxis"]["title"]["text"].startswith("time (")
    assert not any(h[0].startswith("expected time ") for h in spec["data"][0]["customdata"])


def test_the_two_decode_sweeps_read_apart_in_the_legend():
    # Orange circles on an orange line against teal squares on a teal line: the legend's keys too.
    import json

    at = page("views/llm_page.py", view="Batch and context")
    spec = json.loads(next(c for c in at.get("plotly_chart") if "decode" in json.dumps(c.proto.spec)).proto.spec)
    keys = {
        t["name"].split(", ")[1].split(" ")[0]: t
        for t in spec["data"]
        if t.get("x") == [None] and t["name"].startswith("decode, ")
    }
    batch, context = keys["batch"], keys["context"]
    assert batch["marker"]["symbol"] == "circle" and context["marker"]["symbol"] == "square"
    assert batch["line"]["color"] != context["line"]["color"]
    assert batch["marker"]["line"]["color"] == batch["line"]["color"]


def test_times_read_in_one_format_across_the_advisor():
    at = page(
        "views/advisor_page.py",
        model="llama-3.1-405b",
        phase="request",
        batch="32",
        seq="8192",
        output="1024",
        tp="8",
        view="Diagnosis",
    )
    summary = texts(at.markdown)
    assert not re.search(r"\d,\d{3}\.\d+ ms", summary), summary  # "81,011.90 ms" beside "81 s"
    assert re.search(r"memory-bandwidth-bound \(\d+(\.\d+)? s;", summary)


def test_measure_page_says_its_link_does_not_carry_results():
    at = page("views/measure_page.py")
    at.button(key="example").click().run()
    assert "not the results" in texts(at.caption)


def test_the_attention_group_is_the_kernel_and_the_projections_are_their_own():
    from roofline.models import get_model
    from roofline.ops import PROJECTIONS, step_ops
    from roofline.workload import Workload

    ops = step_ops(Workload(get_model("llama-3.1-8b"), "decode", 8, 1024))
    group = {op.name: op.group for op in ops}
    assert group["QKV projection"] == group["output projection"] == PROJECTIONS
    assert group["attention (fused decode)"] == "attention"


def test_decode_hovers_give_the_achieved_rate_in_a_unit_that_reads():
    from roofline.plots import point_hover

    # A norm of a decode step: 1.2e6 FLOP in 4 µs is 0.3 TFLOP/s; 3e4 FLOP in 4 µs is 7.5 GFLOP/s.
    hover = point_hover("norm", 3e4, 1.6e5, 4e-6, "overhead", 2e12)
    assert "0.00 TFLOP/s" not in hover and "attainable (ideal bound): 7.5 GFLOP/s" in hover
    assert "roof here: 2 TFLOP/s" in hover


def test_the_gemm_star_is_drawn_last_and_no_sweep_point_sits_under_it():
    import json

    at = page("views/roofline_page.py", hw=["h100-sxm", "mi300x"])
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [t.get("name", "") for t in fig["data"]]
    # The drawn stars (a legend swatch of the series is a trace with no point).
    stars = [
        i for i, t in enumerate(fig["data"]) if t.get("marker", {}).get("symbol") == "star" and t.get("x") != [None]
    ]
    sweeps = [i for i, n in enumerate(names) if "sweep" in n and fig["data"][i].get("x") != [None]]
    assert len(stars) == 2 and len(sweeps) == 2 and max(sweeps) < min(stars)

    def xs(trace):
        x = trace["x"]
        if isinstance(x, dict):
            import base64

            return np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"])
        return np.asarray(x, float)

    star_x = xs(fig["data"][stars[0]])[0]
    assert np.min(np.abs(np.log2(xs(fig["data"][sweeps[0]]) / star_x))) > 0.05


# ---- 2. the offline report says what the page says ----------------------------------------------
def test_report_tables_read_as_the_page_shows_them():
    frame = pd.DataFrame(
        {
            "#": [1.0, 2.0],
            "tokens/s": [21476.1472, 9.87654],
            "speed-up": [1.0, 1.678],
            "fits": [True, False],
            "tp": [None, 4.0],
        }
    )
    shown = display_frame(frame, {"speed-up": "%.2f×", "tokens/s": "%,.1f"})
    assert list(shown["#"]) == ["1", "2"]  # rank 1, not 1.0
    assert list(shown["tokens/s"]) == ["21,476.1", "9.9"]  # not 21476.147200
    assert list(shown["speed-up"]) == ["1.00×", "1.68×"]  # not 1 and 1.68
    assert list(shown["fits"]) == ["yes", "no"]  # not True
    assert list(shown["tp"]) == ["—", "4"]
    # A sign always, as the Accuracy page shows a bias: "+2%" and "-19%", not "2" and "-19".
    signed = display_frame(pd.DataFrame({"bias": [2.0, -19.0, 1234.0]}), {"bias": "%+,.0f%%"})
    assert list(signed["bias"]) == ["+2%", "-19%", "+1,234%"]


def test_report_has_headline_numbers_headings_text_and_titled_charts():
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    out = html_report(
        "LLM inference",
        [
            ("", [Metric("TTFT", "16.9 ms", help="prefill is compute-bound"), Metric("MFU", "1.5%")]),
            ("", "**Prefill** is **compute-bound**, 16.9 ms."),
            ("Where the time goes", None),
            ("", Chart(fig, "Llama 3.1 8B on H100: ops")),
            ("", Table(pd.DataFrame({"fits": [True]}), {})),
        ],
    )
    assert "<div class='value'>16.9 ms</div>" in out and "prefill is compute-bound" in out
    assert "<strong>Prefill</strong> is <strong>compute-bound</strong>" in out
    assert "<h2>Where the time goes</h2>" in out and "<h3>Llama 3.1 8B on H100: ops</h3>" in out
    assert "<td>yes</td>" in out


@pytest.mark.parametrize(
    "text, want",
    [
        ("[H100 datasheet](https://nvidia.com/h100.pdf)", "<a href='https://nvidia.com/h100.pdf'>H100 datasheet</a>"),
        ("<script>alert(1)</script>", "&lt;script&gt;"),
        ("- one\n- two", "<ul><li>one</li><li>two</li></ul>"),
    ],
)
def test_report_markdown(text, want):
    assert want in markdown_html(text)


# ---- 4. results cached across reruns and sessions ------------------------------------------------
def test_cached_results_are_keyed_by_content_and_handed_out_as_copies():
    from dashboard.cache import cached, per_device

    calls = []

    def analyse(record, scale):
        calls.append(record)
        return {"values": [record["a"] * scale]}

    first = cached(analyse, {"a": 1}, 2)
    first["values"].append(99)  # a page changing its copy
    assert cached(analyse, {"a": 1}, 2) == {"values": [2]} and len(calls) == 1
    assert cached(analyse, {"a": 2}, 2) == {"values": [4]} and len(calls) == 2  # new content, new entry

    from types import SimpleNamespace as Device

    def run(workload, hw):
        if hw.id == "old":
            raise ValueError("old has no fp8 peak")
        return workload + hw.id

    results, why_not = per_device(run, "w-", [Device(id="new"), Device(id="old")])
    assert results == {"new": "w-new"} and why_not == {"old": "old has no fp8 peak"}


def test_the_lesson_names_the_regime_the_engine_gives():
    # A 64×64×64 GEMM sits left of the H100's ridge (intensity 2·64³ / (3·64²·2 B) = 21.3 FLOP/B <
    # 295), but a kernel floor of 1.2 µs is longer than its memory time (24.6 kB / 3.35 TB/s = 7 ns).
    at = page("views/roofline_page.py", m="64", n="64", k="64", lesson="true")
    lesson = texts(at.markdown)
    assert "sits left of the ridge (21.3" in lesson and "overhead-bound" in lesson
    assert "so it is **compute-bound**" not in lesson
    big = texts(page("views/roofline_page.py", lesson="true").markdown)  # 4096³: right of the ridge, the flat roof
    assert "sits right of the ridge (1,365.3" in big and "so it is **compute-bound**" in big


def test_the_lesson_places_the_gemm_where_the_chart_above_does():
    # On vLLM's measured kernels a 4096³ bf16 GEMM on an H100 takes 166 µs, the ideal 139 µs
    # (137.4 GFLOP at 989.4 TFLOP/s): the chart above draws it at 139/166 = 84% of its roof, and the
    # lesson says so instead of "large enough to sit on its roof".
    import json

    from tests.page_helpers import chart_titles, decode

    at = page("views/roofline_page.py", lesson="true", engine="vllm")
    lesson = texts(at.markdown)
    assert "sits at **84% of its roof**" in lesson and "sit on its roof" not in lesson
    main = json.loads(at.get("plotly_chart")[0].proto.spec)
    star = next(t for t in main["data"] if t.get("name", "").startswith("GEMM 4096"))
    assert decode(star["y"])[0] / 989.4 == pytest.approx(0.84, abs=0.005)  # TFLOP/s
    assert any(t.endswith("(ideal bound)") for t in chart_titles(at))
    # On datasheet roofs nothing says how far under the roof a real kernel runs: the lesson says that.
    ideal = texts(page("views/roofline_page.py", lesson="true", engine="ideal").markdown)
    assert "datasheet roofs do not know" in ideal and "min(989.4," in ideal and "= **989.4 TFLOP/s** here" in ideal
    # A 16×256×256 GEMM is held under by the 1.2 µs floor: on the datasheet that is all, and the lesson
    # does not blame the kernel; on vLLM's kernels 2.92 µs against the floor's 1.2 µs is the kernel's 41%.
    small = texts(page("views/roofline_page.py", m="16", n="256", k="256", lesson="true", engine="ideal").markdown)
    assert "sits where the ideal bound puts it" in small and "% of its" not in small
    vllm = texts(page("views/roofline_page.py", m="16", n="256", k="256", lesson="true", engine="vllm").markdown)
    assert re.search(r"sits at \*\*4[01]% of its ideal bound \(the floor's\)\*\*", vllm)


def test_llm_decode_trajectories_follow_the_memory_setting():
    """The cached sweeps take every input as an argument: a smaller usable fraction marks more
    batches as not fitting (a cache keyed on less would show the old marks)."""
    import json

    def not_fitting(at) -> int:
        fig = json.loads(at.get("plotly_chart")[0].proto.spec)
        return sum(str(t.get("text", "")).count("does NOT fit") for t in fig["data"])

    at = page("views/llm_page.py", model="llama-3.1-8b", mem_util="0.9", view="Batch and context")
    roomy = not_fitting(at)
    at.slider(key="mem_util").set_value(0.3).run()
    assert not_fitting(at) > roomy


def test_the_training_headline_says_whose_figures_it_shows():
    from dashboard.training_view import headline_device

    assert headline_device("H100", fits=True, devices=1) == ""
    assert headline_device("B200", fits=True, devices=3).startswith("On B200, the first picked device this setup fits")
    alone = headline_device("H100", fits=False, devices=1)
    assert "fits none of the picked devices" in alone and "compare" not in alone
    at = AppTest.from_file("../views/training_page.py", default_timeout=60).run()  # three devices; fits only B200
    assert any(c.value.startswith("On NVIDIA B200") for c in at.caption)
