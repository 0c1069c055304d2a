"""The Accuracy page and its chart: the test set shown, its inputs followed, runs below their ideal
bound drawn apart, a bad link warned about, and one legend entry per engine."""

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from roofline.accuracy import load_report
from roofline.plots.accuracy import ENGINE_NAMES, accuracy_figure
from roofline.plots.style import GL_THRESHOLD
from roofline.validate import _errors

ROOT = Path(__file__).resolve().parents[1]


def test_the_accuracy_page_shows_the_test_set_and_follows_its_inputs():
    at = AppTest.from_file(str(ROOT / "views/accuracy_page.py"), default_timeout=60).run()
    assert not at.exception and not at.error
    tiles = {m.label: m for m in at.metric}
    assert tiles["Runs"].proto.delta == "test set"
    assert tiles["Median |error|, expected"].proto.delta.startswith("ideal bound")
    # Biases print a minus sign (the shipped report's TPOT bias is negative), never a hyphen.
    bias = tiles["Bias, expected"]
    assert bias.value[0] in "+−" and "-" not in bias.value + bias.proto.delta
    chart = json.loads(next(c for c in at.get("plotly_chart") if c.key == "accuracy_chart").proto.spec)
    assert chart["layout"]["xaxis"]["type"] == "log" and chart["layout"]["yaxis"]["type"] == "log"
    names = [t["name"] for t in chart["data"]]
    assert "predicted = measured" in names and any(n.startswith("vLLM (") for n in names)
    runs = int(tiles["Runs"].value.replace(",", ""))
    at.multiselect(key="engines").set_value(["sglang"]).run()
    fewer = int({m.label: m for m in at.metric}["Runs"].value.replace(",", ""))
    assert 0 < fewer < runs
    at.multiselect(key="engines").set_value([]).run()
    assert any("choose at least one engine" in i.value for i in at.info)


ENGINES = set(ENGINE_NAMES)


def _values(array) -> np.ndarray:
    """A Plotly figure's array as its JSON carries it: a list, or a typed array in base64."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
    return np.asarray(array)


def test_the_accuracy_page_draws_and_can_leave_out_runs_below_their_ideal_bound():
    at = AppTest.from_file(str(ROOT / "views/accuracy_page.py"), default_timeout=60)
    at.query_params["metric"] = "TTFT, simulated under load"
    at.run()
    assert not at.exception
    runs = int({m.label: m for m in at.metric}["Runs"].value.replace(",", ""))
    chart = json.loads(next(c for c in at.get("plotly_chart") if c.key == "accuracy_chart").proto.spec)
    key = next(t for t in chart["data"] if t["name"].startswith("hollow: measured below the ideal bound"))
    below = int(key["name"].split("(")[-1].rstrip(")"))
    assert 0 < below < runs
    points = [t for t in chart["data"] if t.get("legendgroup") in ENGINES]
    hollow = sum(len(_values(t["x"])) for t in points if t["marker"]["symbol"] == "circle-open")
    assert hollow == below
    # An open marker is drawn by its line alone: without one the runs vanish.
    assert all(t["marker"]["line"]["width"] > 0 for t in points if t["marker"]["symbol"] == "circle-open")
    # One legend entry per engine, whether or not some of its runs are hollow.
    assert len([t for t in points if t.get("showlegend", True)]) == len({t["legendgroup"] for t in points})
    assert any(c.value.startswith(f"{below:,} of these runs were measured more than 10% below") for c in at.caption)
    # The expected figure again by the client that sent the requests, the runs of each adding up.
    split = next(c.value for c in at.caption if c.value.startswith("By the client that sent the requests"))
    counts = [int(n.replace(",", "")) for n in re.findall(r", ([\d,]+) runs, median", split)]
    assert len(counts) == 2 and sum(counts) == runs
    # InferenceX's runs again by whether its client warmed the server up: they add up to its runs.
    warm = next(c.value for c in at.caption if c.value.startswith("InferenceX's runs by whether its client warmed"))
    parts = [int(n.replace(",", "")) for n in re.findall(r"(?:first|warm-up), ([\d,]+) runs, median", warm)]
    # (the caption escapes Markdown: "InferenceX \(vLLM benchmark\_serving.py\)")
    inferencex = int(re.search(r"InferenceX \\?\(vLLM [^,]*, ([\d,]+) runs", split)[1].replace(",", ""))
    assert len(parts) == 2 and sum(parts) == inferencex and "warmed up first" in warm and "no warm-up" in warm
    at.toggle(key="within").set_value(True).run()
    assert int({m.label: m for m in at.metric}["Runs"].value.replace(",", "")) == runs - below
    # The steady state is one analytic step, not a simulated setup: nothing is flagged there.
    at.selectbox(key="metric").set_value("TPOT, steady state").run()
    assert not at.exception and at.toggle(key="within").proto.disabled
    chart = json.loads(next(c for c in at.get("plotly_chart") if c.key == "accuracy_chart").proto.spec)
    assert not any(t["name"].startswith("hollow") for t in chart["data"])


def test_the_accuracy_page_warns_on_a_bad_link():
    at = AppTest.from_file(str(ROOT / "views/accuracy_page.py"), default_timeout=60)
    at.query_params["metric"] = "speed"
    at.query_params["engines"] = ["tgi"]
    at.run()
    assert not at.exception
    warned = " ".join(w.value for w in at.warning)
    assert "`metric`" in warned and "`engines`" in warned
    # The metrics' names hold commas: each allowed one is quoted, so three read as three.
    assert "(allowed: 'TPOT, simulated under load', 'TTFT, simulated under load', " in warned.replace("\\", "")
    at = AppTest.from_file(str(ROOT / "views/accuracy_page.py"), default_timeout=60)
    at.query_params["devices"] = ["h100-sxm", "tpu-v9"]
    at.run()
    assert not at.exception and "`devices`" in " ".join(w.value for w in at.warning)
    assert at.multiselect(key="devices").value == ["h100-sxm"]


def test_the_serving_pages_published_error_opens_the_same_runs_here():
    """The Under-load caption's figures (roofline.known_error) and its link: the Accuracy page,
    opened by that link, counts the same runs and prints the same median error and bias."""
    from roofline.hardware import get_hardware
    from roofline.known_error import for_settings
    from roofline.settings import Settings

    known = for_settings(Settings(engine="auto"), get_hardware("h100-sxm"))
    assert (known.engine, known.device) == ("vllm", "h100-sxm")
    # The same runs scored by validate's own function, from the report's rows.
    rows = [
        r
        for r in load_report()["load"]["results"]
        if (r["engine"], r["device"], r["host_fit_split"]) == ("vllm", "h100-sxm", False)
    ]
    want = _errors([r["tables_ttft_ms"] for r in rows], [r["measured_ttft_ms"] for r in rows])
    at = AppTest.from_file(str(ROOT / "views/accuracy_page.py"), default_timeout=60)
    for key, value in (("metric", "TTFT, simulated under load"), ("engines", "vllm"), ("devices", "h100-sxm")):
        at.query_params[key] = value
    at.run()
    assert not at.exception and not at.warning
    tiles = {m.label: m for m in at.metric}
    ttft = known.scores["ttft"]
    assert int(tiles["Runs"].value.replace(",", "")) == ttft.runs == len(rows)
    median, bias = f"{want['median_abs_error']:.0%}", f"{want['bias']:+.0%}".replace("-", "−")
    assert tiles["Median |error|, expected"].value == median == f"{ttft.median_abs_error:.0%}"
    assert tiles["Bias, expected"].value == bias == f"{ttft.bias:+.0%}".replace("-", "−")
    at.multiselect(key="devices").set_value([]).run()  # every device: more runs
    assert int({m.label: m for m in at.metric}["Runs"].value.replace(",", "")) > ttft.runs


@pytest.mark.parametrize("runs", [40, GL_THRESHOLD + 1])
def test_the_accuracy_chart_draws_every_run_once_with_one_legend_entry_per_engine(runs):
    rng = np.random.default_rng(0)
    measured = 10 ** rng.uniform(0, 3, runs)
    engines = np.array(["vllm", "sglang", "trtllm"])[np.arange(runs) % 3]
    hollow = np.arange(runs) % 5 == 0
    fig = accuracy_figure(measured, measured * 1.1, engines, [str(i) for i in range(runs)], "t", "TPOT", hollow)
    points = [t for t in fig.data if t.legendgroup in ENGINES]
    # SVG up to the house threshold (a WebGL context costs a cold page more than the markers).
    assert {t.type for t in points} == {"scattergl" if runs > GL_THRESHOLD else "scatter"}
    assert sorted(int(s) for t in points for s in t.text) == list(range(runs))
    assert sum(len(t.x) for t in points if t.marker.symbol == "circle-open") == hollow.sum()
    assert all(t.marker.line.width > 0 for t in points if t.marker.symbol == "circle-open")
    assert sorted(t.name for t in points if t.showlegend is not False) == [
        f"{ENGINE_NAMES[e]} ({(engines == e).sum()})" for e in ("sglang", "trtllm", "vllm")
    ]


def test_an_engine_whose_runs_are_all_hollow_keeps_one_legend_entry():
    engines = np.array(["vllm"] * 3 + ["sglang"] * 2)
    hollow = np.array([False, True, False, True, True])
    fig = accuracy_figure([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], engines, list("abcde"), "t", "TPOT", hollow)
    points = [t for t in fig.data if t.legendgroup in ENGINES]
    shown = {t.name: t.marker.symbol for t in points if t.showlegend is not False}
    # SGLang's only trace is hollow: it names the engine in the legend; vLLM's filled one does.
    assert shown == {"vLLM (3)": "circle", "SGLang (2)": "circle-open"}


def test_the_accuracy_page_names_each_engines_host_floor_and_the_runs_faster_than_it():
    """TensorRT-LLM's predictions flatten at its host work a step (6.2 ms, fitted on one model on
    one GPU): the page says so with the count of its runs measured faster, counted from the report."""
    from roofline.engines import engine_profile

    at = AppTest.from_file(str(ROOT / "views/accuracy_page.py"), default_timeout=60)
    at.query_params["metric"] = "TPOT, steady state"
    at.run()
    said = next(c.value for c in at.caption if "host work a step" in c.value)
    steady = [r for r in load_report()["steady"]["results"] if not r.get("host_fit_split") and r["engine"] == "trtllm"]
    floor = engine_profile("trtllm").host_step_us / 1e3
    faster = sum(r["measured_tpot_ms"] < floor for r in steady)
    assert faster > 0 and f"TensorRT-LLM {floor:.1f} ms ({faster:,} of its {len(steady):,} runs" in said
    # Every prediction sits at or above its engine's floor: the sentence's premise.
    assert all(r["tables_tpot_ms"] >= floor * 0.999 for r in steady if r.get("tables_tpot_ms"))
    ttft = AppTest.from_file(str(ROOT / "views/accuracy_page.py"), default_timeout=60)
    ttft.query_params["metric"] = "TTFT, simulated under load"
    assert not any("host work a step" in c.value for c in ttft.run().caption)
