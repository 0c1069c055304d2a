"""The Serving page's "Under load (simulated)" section: its charts, its inputs in the URL, and
the figures it draws."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from roofline.plots.serving_load import distribution_figure, latency_rate_figure, series_figure
from roofline.serving.simulation.sweep import decode_context, moments

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "views/serving_page.py")
LOAD_CHARTS = ["load_rate_chart", "load_ttft_chart", "load_tpot_chart", "load_series_chart"]


def serving(**params) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["hw"] = params.pop("hw", ["h100-sxm", "a100-sxm-80gb"])
    at.query_params["view"] = params.pop("view", "Under load")
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def chart(at: AppTest, key: str) -> dict:
    return json.loads(next(c for c in at.get("plotly_chart") if c.key == key).proto.spec)


def values(array) -> np.ndarray:
    """Plotly sends numpy arrays as base64 typed arrays; plain lists stay lists."""
    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
    return np.asarray(array)


def test_the_section_shows_its_charts_table_and_a_step_link():
    at = serving()
    assert not at.exception and not at.error, [e.message for e in at.exception]
    keys = [c.key for c in at.get("plotly_chart")]
    assert keys[-4:] == LOAD_CHARTS
    assert any(s.value == "Under load (simulated)" for s in at.subheader)

    rate = chart(at, "load_rate_chart")
    names = [t.get("name") for t in rate["data"]]
    assert {"TTFT p50", "TTFT p90–p99", "TPOT p50", "TPOT p90–p99", "steady state at each run's mean batch"} <= set(
        names
    )
    # The knee: a vertical line at the saturation rate, its label in log10 coordinates.
    knee = next(a for a in rate["layout"]["annotations"] if "saturation" in a["text"])
    saturation = float(knee["text"].split("saturation")[1].split("req/s")[0])
    line = next(s for s in rate["layout"]["shapes"] if s.get("yref") == "paper" and s["line"].get("dash") == "solid")
    assert line["x0"] == pytest.approx(saturation, rel=1e-2)
    assert knee["x"] == pytest.approx(math.log10(line["x0"]))
    # The targets (2 s and 50 ms, the page's defaults) as lines in data values.
    assert {s["y0"] for s in rate["layout"]["shapes"] if s.get("xref") == "x domain"} == {2000.0, 50.0}  # ms
    # The run rests on vLLM's kernels on the H100 (engine "auto") and on vLLM's host work per step.
    said = " ".join(m.value for m in at.markdown)
    assert "engine-measured roofs" in said and "vLLM 0.24.0 kernels" in said and "vLLM host work" in said
    # Beside it, how far off vLLM's expected figure has been on the H100's test runs (roofline.known_error).
    said = " ".join(c.value for c in at.caption)
    assert "How far off to expect it: published error of vLLM's expected figure on NVIDIA H100" in said
    assert "(/accuracy?metric=TTFT%2C+simulated+under+load&engines=vllm&devices=h100-sxm)" in said

    capacity = next(d.value for d in at.dataframe if "max requests/s" in d.value.columns)
    assert set(capacity["device"]) == {"h100-sxm", "a100-sxm-80gb"}
    assert capacity["$ per M output (all-in)"].notna().all()
    # What the ranking groups by beside the device, and what the rows are ranked by beside the rate (a 1440-px
    # page shows about seven columns).
    assert list(capacity.columns[:5]) == ["device", "rests on", "TP", "max requests/s", "$ per M output (all-in)"]
    assert capacity["published bias"].str.startswith("TTFT ").all()
    # Headed as the bias under load: the Frontier's sentence gives the steady state's, another figure.
    table = next(d for d in at.dataframe if "max requests/s" in d.value.columns)
    assert json.loads(table.proto.columns)["published bias"]["label"] == "published bias (under load)"

    link = next(m.value for m in at.markdown if "Open this step on the roofline" in m.value)
    assert "/roofline?hw=h100-sxm&llm=llama-3.1-8b&llm_phase=decode&llm_batch=" in link and "&llm_seq=" in link


def test_a_changed_input_reruns_the_section():
    at = serving()
    before = chart(at, "load_ttft_chart")["data"][0]
    at.number_input(key="load_n").set_value(200).run()
    assert not at.exception
    after = chart(at, "load_ttft_chart")["data"][0]
    assert values(after["x"]).size == 200 != values(before["x"]).size
    at.radio(key="load_kind").set_value("concurrency").run()
    assert not at.exception
    at.number_input(key="load_conc").set_value(8).run()
    assert not at.exception
    series = chart(at, "load_series_chart")
    assert values(series["data"][0]["y"]).max() <= 8  # never more running than clients
    at.selectbox(key="load_pct").set_value(99).run()
    assert not at.exception
    assert any("p99 TTFT" in d.value.columns for d in at.dataframe)


def test_a_bad_url_parameter_falls_back_with_a_warning():
    at = serving(load_n="999999", load_kind="bogus", load_rate="-3", load_at="x")
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    for key in ("load_n", "load_kind", "load_rate", "load_at"):
        assert f"`{key}`" in warnings
    assert at.number_input(key="load_n").value == 500
    assert at.radio(key="load_kind").value == "rate"
    assert at.number_input(key="load_rate").value == 10.0
    assert [c.key for c in at.get("plotly_chart")][-4:] == LOAD_CHARTS


def test_the_url_sets_the_load():
    at = serving(load_kind="concurrency", load_conc="16", load_n="300", load_seed="7", load_pct="50")
    assert not at.exception and not at.warning
    assert at.number_input(key="load_conc").value == 16
    assert values(chart(at, "load_tpot_chart")["data"][0]["x"]).size == 300
    placed = [t for t in chart(at, "load_rate_chart")["data"] if t.get("name", "").startswith("this run")]
    assert len(placed) == 6  # p50, p90 and p99 of TTFT and of TPOT


def test_decode_context_is_the_prompt_plus_the_outputs_so_far():
    # One request: prompt 100, 11 outputs, first token at 1 s, last at 3 s: at 2 s it has
    # made 1 + 10 x 0.5 = 6 tokens. Another decodes from 2.5 s only.
    run = SimpleNamespace(
        first_token_s=np.array([1.0, 2.5]),
        finish_s=np.array([3.0, 4.0]),
        prompt_tokens=np.array([100, 50]),
        output_tokens=np.array([11, 3]),
    )
    got = decode_context(run, np.array([0.5, 2.0, 2.5]))
    assert np.isnan(got[0])
    assert got[1] == pytest.approx(106.0)
    assert got[2] == pytest.approx((100 + 1 + 10 * 0.75 + 50 + 1) / 2)


def test_a_moment_of_a_run_is_the_step_under_way_then():
    # A decodes from 0.5 s to 1 s; the server is empty from 1 s until B arrives at 2.5 s; B's first
    # token at 3 s, its last at 4 s. Steps end at 0.5, 1, 3 and 4 s, one request running in each.
    run = SimpleNamespace(
        arrival_s=np.array([0.0, 2.5]),
        first_token_s=np.array([0.5, 3.0]),
        finish_s=np.array([1.0, 4.0]),
        prompt_tokens=np.array([10, 20]),
        output_tokens=np.array([3, 5]),
        step_end_s=np.array([0.5, 1.0, 3.0, 4.0]),
        step_running=np.array([1, 1, 1, 1]),
        step_waiting=np.array([0, 0, 0, 0]),
    )
    got = moments(run, 5)  # at 0, 1, 2, 3 and 4 s
    assert got["time_s"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert got["running"] == [1, 1, 0, 1, 1]  # at 2 s the server is idle: nothing runs
    assert got["decoding"] == [0, 0, 0, 1, 0]  # A is done at 1 s; B decodes from its first token
    assert np.isnan(got["context"][0]) and got["context"][3] == pytest.approx(21.0)  # B's prompt and one token


def test_the_server_series_holds_each_value_over_its_step():
    fig = series_figure(np.array([1.0, 2.0]), np.array([4, 2]), np.array([0, 0]), np.array([0.1, 0.2]))
    # Stamped at its step's end, a value is drawn from the step before's end: vertical first.
    assert {t.line.shape for t in fig.data} == {"vh"}
    # Nothing queued: the queue's panel says so rather than showing an empty axis; a queue has no such note.
    (note,) = [a for a in fig.layout.annotations if a.xref == "x2 domain"]
    assert note.text.startswith("the queue stayed empty")
    # Short lines, so a phone's plot (about 260 px) holds the note.
    assert max(len(line) for line in note.text.split("<br>")) <= 32
    queued = series_figure(np.array([1.0, 2.0]), np.array([4, 2]), np.array([3, 0]), np.array([0.1, 0.2]))
    assert not [a for a in queued.layout.annotations if a.xref == "x2 domain"]


def test_the_rate_figure_marks_the_knee_on_log_axes():
    rates = np.geomspace(1, 60, 5)
    p = {m: {q: np.linspace(0.01, 1, 5) * q / 50 for q in (50, 90, 99)} for m in ("ttft_s", "tpot_s")}
    fig = latency_rate_figure(rates, p, 30.0, {"ttft_s": 2.0, "tpot_s": None}, chosen_rate_per_s=10.0)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log" and fig.layout.yaxis2.type == "log"
    labels = {a.text.strip(): a for a in fig.layout.annotations}
    assert labels["saturation 30 req/s"].x == pytest.approx(math.log10(30))
    assert labels["this run 10 req/s"].x == pytest.approx(1.0)
    assert labels["saturation 30 req/s"].xanchor == "right"  # in the right half: its label to its left
    assert labels["TTFT target 2 s"].y == pytest.approx(math.log10(2000.0))  # drawn in ms
    assert fig.layout.yaxis.title.text == "TTFT (ms)" and fig.layout.yaxis2.title.text == "TPOT (ms)"
    assert not any("TPOT target" in t for t in labels)
    band = next(t for t in fig.data if t.name == "TTFT p90–p99")
    assert band.fill == "tonexty" and list(band.y) == pytest.approx(list(p["ttft_s"][90] * 1e3))
    assert fig.layout.xaxis.range[1] < math.log10(60) + 0.1  # no stretch to 1e297 from a label


def test_the_distribution_marks_percentiles_target_and_reference():
    values = np.array([0.01, 0.02, 0.03, 0.04, np.nan])
    fig = distribution_figure(values, "TPOT", "#009E73", 0.05, 0.015, "steady state, batch 4")
    ecdf, marks = fig.data
    # Drawn in milliseconds, as the page's metrics beside it read.
    assert list(ecdf.x) == pytest.approx([10, 20, 30, 40]) and list(ecdf.y) == [0.25, 0.5, 0.75, 1.0]
    assert list(marks.x) == pytest.approx(list(np.percentile([10, 20, 30, 40], [50, 90, 99])))
    assert list(marks.text) == ["p50 25 ms", "p90 37 ms", "p99 39.7 ms"]
    xs = sorted(s.x0 for s in fig.layout.shapes)
    assert xs == pytest.approx([15, 50])
    lo, hi = fig.layout.xaxis.range
    assert lo < math.log10(10) and hi > math.log10(50)
    assert fig.layout.xaxis.title.text.startswith("TPOT (ms)")
    # The reference is named under the axis, not beside its line at the curve's foot.
    assert "dotted: steady state, batch 4 (15 ms)" in fig.layout.xaxis.title.text
    assert not any("steady state" in a.text for a in fig.layout.annotations)


def test_the_series_shows_the_batch_cap_only_when_reached():
    t = np.linspace(0, 10, 11)
    fig = series_figure(t, np.full(11, 200), np.zeros(11), np.full(11, 0.5), 256, 5.0)
    assert fig.layout.yaxis.range[1] >= 256
    assert any("max_num_seqs 256" in a.text for a in fig.layout.annotations)
    assert list(fig.data[2].y) == pytest.approx([50.0] * 11)  # KV use in percent


@pytest.mark.parametrize("raw", ["inf", "nan", "1e400", "9" * 500, ""])
def test_hostile_url_values_fall_back_without_a_traceback(raw):
    keys = ("load_kind", "load_rate", "load_conc", "load_n", "load_seed", "load_pct", "load_at", "load_ramp")
    at = serving(**{key: raw for key in keys})
    assert not at.exception, [e.message for e in at.exception]
    assert [c.key for c in at.get("plotly_chart")][-4:] == LOAD_CHARTS


def test_measured_results_go_on_the_rate_curves_with_their_gap():
    """A vllm bench serve result uploaded on the page: its points on the latency-rate chart and a
    table of measured beside simulated at each point's own load."""
    from dashboard.serving_measured import measured_gaps
    from roofline.hardware import get_hardware
    from roofline.models import get_model
    from roofline.plots.serving_load import latency_rate_figure
    from roofline.plots.serving_points import add_measured_points
    from roofline.serving.measured import read_measured
    from roofline.settings import Settings
    from roofline.workload import Precision

    runs = read_measured(Path(__file__).parent / "data" / "serving_results" / "vllm_bench_serve.json")
    rate = np.array([1.0, 10.0])
    pct = {m: {p: np.array([0.1, 0.2]) for p in (50, 90, 99)} for m in ("ttft_s", "tpot_s")}
    fig = latency_rate_figure(rate, pct, 20.0, {"ttft_s": 2.0, "tpot_s": 0.05})
    before = len(fig.data)
    add_measured_points(fig, [r.to_json() for r in runs])
    added = [t for t in fig.data[before:]]
    assert {t.name for t in added} >= {"measured TTFT p50", "measured TPOT p50"}
    assert all(t.marker.symbol in ("diamond", "diamond-open") for t in added)
    gaps = measured_gaps(runs, get_model("llama-3.1-8b"), get_hardware("h100-sxm"), Precision(), 1, Settings(), True)
    assert {"TTFT p50", "TPOT p50"} <= set(gaps["metric"]) and (gaps["simulated / measured"].dropna() > 0).all()


def test_the_engines_own_settings_that_hold_requests_back_are_in_the_url():
    """SGLang's intake interval on the page with SGLang, TensorRT-LLM's batch waiting with it, and
    neither with vLLM; a longer hold raises the TTFT the section draws."""
    at = serving(engine="sglang", load_rate="5", load_n="80", load_recv="30")
    assert not at.exception and not at.warning, [e.message for e in at.exception]
    assert at.number_input(key="load_recv").value == 30
    held = values(chart(at, "load_ttft_chart")["data"][0]["x"]).mean()
    every = serving(engine="sglang", load_rate="5", load_n="80")
    assert held > values(chart(every, "load_ttft_chart")["data"][0]["x"]).mean()
    trt = serving(engine="trtllm", load_wait="20", load_wait_ratio="0.9")
    assert not trt.exception and trt.number_input(key="load_wait").value == 20
    assert "either alone holds nothing" not in " ".join(c.value for c in trt.caption)
    alone = serving(engine="trtllm", load_wait="20")
    assert "either alone holds nothing" in " ".join(c.value for c in alone.caption)
    assert not [n for n in serving(engine="vllm").number_input if n.key in ("load_recv", "load_wait")]
    bad = serving(engine="sglang", load_recv="5000")
    assert not bad.exception and "`load_recv`" in " ".join(w.value for w in bad.warning)


def test_the_engines_cuda_graph_limit_for_prompt_steps_is_in_the_url():
    """Each engine's own default (vLLM 512 tokens, SGLang none), kept in the URL per engine; the
    caption says which steps replay a graph, and graphing every prompt step never raises the TTFT
    the section draws; a bad value falls back with a warning."""
    sglang = serving(engine="sglang", load_rate="5", load_n="80")
    assert not sglang.exception, [e.message for e in sglang.exception]
    assert sglang.number_input(key="load_graph_sglang").value == 0
    assert "steps with prompt tokens dispatched kernel by kernel" in " ".join(c.value for c in sglang.caption)
    assert serving(engine="vllm").number_input(key="load_graph_vllm").value == 512
    graphed = serving(engine="sglang", load_rate="5", load_n="80", load_graph_sglang="100000")
    assert "steps of up to 100,000 tokens replayed" in " ".join(c.value for c in graphed.caption)
    ttft = {
        n: values(chart(at, "load_ttft_chart")["data"][0]["x"]).mean()
        for n, at in (("eager", sglang), ("graph", graphed))
    }
    assert ttft["graph"] <= ttft["eager"]
    bad = serving(engine="sglang", load_graph_sglang="-3")
    assert not bad.exception and "`load_graph_sglang`" in " ".join(w.value for w in bad.warning)


def test_attention_data_parallel_ranks_are_in_the_url():
    """Attention data parallel ranks on the page for each engine, read from the URL; ranks that do
    not divide the TP degree say so instead of simulating."""
    at = serving(engine="sglang", tp="2", load_rate="5", load_n="80", load_adp="2", hw=["h100-sxm"])
    assert not at.exception and not at.warning, [e.message for e in at.exception]
    assert at.number_input(key="load_adp").value == 2
    assert chart(at, "load_ttft_chart")["data"]
    assert [n for n in serving(engine="vllm").number_input if n.key == "load_adp"]
    odd = serving(engine="trtllm", tp="1", load_rate="5", load_n="80", load_adp="2", hw=["h100-sxm"])
    assert not odd.exception
    assert any("(attention_dp=2) must divide the TP degree (tp=1)" in i.value for i in odd.info)
    bad = serving(engine="sglang", load_adp="500")
    assert not bad.exception and "`load_adp`" in " ".join(w.value for w in bad.warning)


def test_the_capacity_table_runs_the_pages_chunked_prefill_choice():
    """It ran chunked prefill whatever the page's checkbox said, and its caption said so. A link of
    the checkbox's days (chunked=false) still opens with it off."""
    at = serving(hw=["h100-sxm"], chunked="false")
    assert not at.exception and not at.warning and at.selectbox(key="chunked").value == "off"
    said = " ".join(c.value for c in at.caption)
    command = next(c.value for c in at.code if c.value.startswith("python -m roofline serve"))  # under the caption
    assert "chunked prefill off" in said and command.endswith("--chunked-prefill off")
    at = serving(hw=["h100-sxm"], engine="trtllm")  # the engine's default: TensorRT-LLM keeps prompts whole
    said = " ".join(c.value for c in at.caption)
    command = next(c.value for c in at.code if c.value.startswith("python -m roofline serve"))
    assert "chunked prefill off (the engine's default)" in said and "--chunked-prefill" not in said + command


def test_the_capacity_tables_command_reproduces_the_table(capsys):
    """The caption's command was "roofline serve --capacity --requests 300 --percentile 90": no
    model, devices, lengths, targets or precision, so it ranked something else."""
    import shlex

    from roofline.cli import main

    at = serving(hw=["h100-sxm", "b200"], wdtype="fp8", kvdtype="fp8", load_pct="50")
    assert not at.exception
    said = " ".join(c.value for c in at.caption)
    assert "The command line runs the same search:" in said
    # In a code block under the caption, which wraps whole (inline, it broke inside its flags).
    command = next(c.value for c in at.code if c.value.startswith("python -m roofline serve"))
    # Shown as short lines, each flag whole with its value (a phone's width had broken a flag in two).
    lines = command.split(" \\\n    ")
    assert len(lines) > 5 and all(len(line) <= 40 for line in lines) and lines[1].startswith("--model ")
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[:3] == ["python", "-m", "roofline"] and "--weight-dtype" in argv and "--percentile" in argv
    assert main([*argv[3:], "--json"]) == 0
    ranked = {r["hardware"]: r["max_rate_per_s"] for r in json.loads(capsys.readouterr().out)["ranking"]}
    table = next(d.value for d in at.dataframe if "max requests/s" in d.value.columns)
    assert ranked == pytest.approx(dict(zip(table["device"], table["max requests/s"])))


def test_a_run_that_splits_prompts_otherwise_than_its_engine_says_so():
    """TensorRT-LLM keeps prompts whole by default: with the page's Chunked prefill on, the section
    says so and how to run it as it runs; at the engine's default (the page's own) or off, it says
    nothing, nor for vLLM at its default."""
    said = " ".join(c.value for c in serving(engine="trtllm", load_rate="5", load_n="40", chunked="on").caption)
    assert "Prompts split over steps (chunked prefill on), where TensorRT-LLM keeps them whole" in said
    for chunked in ("auto", "off"):
        whole = serving(engine="trtllm", load_rate="5", load_n="40", chunked=chunked)
        assert not whole.exception and "Prompts" not in " ".join(c.value for c in whole.caption)
    assert "Prompts" not in " ".join(c.value for c in serving(engine="vllm", load_rate="5", load_n="40").caption)
