"""The published accuracy: the report validate --report writes (both scores, the split apart from
the test set), read back strictly, and the Accuracy page that shows it."""

from __future__ import annotations

import base64
import csv
import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from roofline.accuracy import REPORT_PATH, below_ideal, build_report, by_field, headline, load_report, write_report
from roofline.plots.accuracy import ENGINE_NAMES, accuracy_figure
from roofline.plots.style import GL_THRESHOLD
from roofline.validate import _errors
from roofline.validate_load import render_load
from tests.test_validate import FIELDS, _row

ROOT = Path(__file__).resolve().parents[1]


def _sample(tmp_path: Path) -> Path:
    path = tmp_path / "sample.csv.gz"
    rows = [
        _row(id="a", batch_size=8, silicon_tpot_ms=8.0, silicon_ttft_ms=120.0),
        _row(id="b", batch_size=16, silicon_tpot_ms=9.0, silicon_ttft_ms=200.0, osl="64"),
        _row(id="c", model_path="Qwen/Qwen3-32B", tp_size=2, batch_size=8, silicon_tpot_ms=14.0, silicon_ttft_ms=150.0),
    ]
    with gzip.open(path, "wt", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*FIELDS, "silicon_ttft_ms"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_a_report_scores_both_ways_and_keeps_the_fit_split_apart(tmp_path):
    report = build_report(_sample(tmp_path))
    assert report["schema"] == "roofline.accuracy" and report["command"].startswith("python -m roofline validate")
    # Qwen3-32B on H100 is the host-work fit split; the two Llama runs are the test set.
    assert report["steady"]["host_fit_split"]["runs"] == 1 and report["steady"]["test_set"]["runs"] == 2
    assert report["load"]["host_fit_split"]["runs"] == 1 and report["load"]["test_set"]["runs"] == 2
    head = headline(report)
    assert set(head) == {"tpot_steady", "tpot_load", "ttft_load"}
    assert head["tpot_load"]["expected"]["median_abs_error"] >= 0
    out = tmp_path / "report.json"
    write_report(out, report)
    assert load_report(out)["load"]["results"][0]["id"] in {"a", "b", "c"}


def test_below_the_ideal_bound_means_more_than_ten_percent_under_it():
    # 89 ms against a 100 ms bound is 11% under it; 91 ms is 9% under, within the margin; no figure, no flag.
    flags = below_ideal([89.0, 91.0, 100.0, np.nan, 50.0], [100.0, 100.0, 100.0, 100.0, np.nan])
    assert flags.tolist() == [True, False, False, False, False]


def test_a_run_measured_below_its_ideal_bound_is_counted_and_scored_apart(tmp_path):
    """A TTFT of 1 ms for 1,024-token prompts on an 8B model is faster than any H100 can prefill
    them: the run is flagged, counted, and left out of the second test-set score only."""
    path = tmp_path / "sample.csv.gz"
    rows = [
        _row(id="fast", batch_size=8, silicon_tpot_ms=8.0, silicon_ttft_ms=1.0),
        _row(id="b", batch_size=16, silicon_tpot_ms=9.0, silicon_ttft_ms=200.0, osl="64"),
    ]
    with gzip.open(path, "wt", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*FIELDS, "silicon_ttft_ms"])
        writer.writeheader()
        writer.writerows(rows)
    load = build_report(path)["load"]
    flagged = {r["id"]: r["below_ideal_ttft"] for r in load["results"]}
    assert flagged == {"fast": True, "b": False}
    fast = next(r for r in load["results"] if r["id"] == "fast")
    assert fast["measured_ttft_ms"] < 0.9 * fast["datasheet_ttft_ms"]
    assert load["below_ideal"]["ttft"] == {"runs": 1, "test_set_runs": 1}
    # Both TPOTs (8 and 9 ms) are above their ideal bounds (5.1 and 7.6 ms): no run leaves the TPOT score.
    assert [r["below_ideal_tpot"] for r in load["results"]] == [False, False]
    assert load["below_ideal"]["tpot"] == {"runs": 0, "test_set_runs": 0}
    within = load["test_set_within_ideal"]
    assert load["test_set"]["runs"] == 2 and within["ttft_runs"] == 1 and within["tpot_runs"] == 2
    assert within["tables_tpot"] == load["test_set"]["tables_tpot"]
    # Without the flagged run, the TTFT score is run b's alone.
    b = next(r for r in load["results"] if r["id"] == "b")
    alone = abs(b["tables_ttft_ms"] / b["measured_ttft_ms"] - 1)
    assert load["test_set_within_ideal"]["tables_ttft"]["median_abs_error"] == pytest.approx(alone)
    # The command line prints both scores and says why the run was left out.
    text = render_load(load)
    assert "test set within bound (1/2)" in text and "left out: TTFT 1 and TPOT 0 test runs" in text
    assert "KV cache: each run's own: as its benchmark script set it where the source documents it" in text
    assert (
        "lengths as each run's client drew them (InferenceX (vLLM benchmark_serving.py): uniform in [0.8×, 1×]" in text
    )
    assert [r["client"] for r in load["results"]] == ["as recorded (fixed lengths)"] * 2
    # No InferenceX run: no warm-up group, only where the warm-up dates come from.
    assert [r["client_warmup"] for r in load["results"]] == [None, None]
    assert list(load["test_set_by_warmup"]) == ["source"] and "d053ae24e" in load["test_set_by_warmup"]["source"]
    assert "InferenceX, warmed up" not in text


@pytest.mark.parametrize(
    "content, why",
    [
        (b"not json", "JSON"),
        (b'{"schema": "other"}', "not an accuracy report"),
        (b'{"schema": "roofline.accuracy", "steady": {}, "load": {"results": []}}', "'steady' part has no results"),
        (b'{"schema": "roofline.accuracy", "steady": {"results": [NaN]}}', "NaN"),
    ],
)
def test_a_bad_report_is_refused_with_the_reason(tmp_path, content, why):
    path = tmp_path / "report.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=why):
        load_report(path)
    with pytest.raises(ValueError, match="no accuracy report"):
        load_report(tmp_path / "missing.json")


def test_the_shipped_report_is_the_full_sample():
    """Every run the sample holds once and roofline scores is in the report (1,979 under load,
    about 2,000 in steady state), each with its result or a reason."""
    from roofline.silicon_sample import load_silicon_sample, why_not_scored

    report = load_report(REPORT_PATH)
    assert report["load"]["every"] == 1
    rows = load_silicon_sample()
    scored = [r for r in rows if why_not_scored(r) is None]
    with_ttft = [r for r in scored if r["silicon_ttft_ms"] and np.isfinite(float(r["silicon_ttft_ms"]))]
    load, steady = report["load"], report["steady"]
    assert steady["overall"]["runs"] == len(steady["results"]) > 1900
    assert len(steady["results"]) + sum(steady["skipped"].values()) == len(rows)
    assert load["overall"]["runs"] == len(load["results"]) > 1900
    assert len(load["results"]) + sum(load["skipped"].values()) == len(with_ttft)
    assert sum(load["not_scored"].values()) == len(rows) - len(scored)


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


def test_the_runs_that_decoded_speculatively_are_left_out_of_both_parts_and_the_page_says_so():
    """Runs whose InferenceX configuration set MTP (or may have) are not scored: the report counts
    them by reason in both parts, none of its results is one, and the page says how many."""
    from roofline.inferencex_runs import run_decoding
    from roofline.silicon_sample import load_silicon_sample, why_not_scored

    rows = load_silicon_sample()
    why = {r["id"]: why_not_scored(r) for r in rows}
    expected = {}
    for reason in why.values():
        if reason and reason.startswith("speculative decoding"):
            expected[reason] = expected.get(reason, 0) + 1
    assert len(expected) == 3 and min(expected.values()) > 0  # MTP; both ran its shape; a multi-node run
    report = load_report(REPORT_PATH)
    for counts in (report["steady"]["skipped"], report["load"]["not_scored"]):
        assert {k: v for k, v in counts.items() if k.startswith("speculative decoding")} == expected
    decoded = {r["id"]: run_decoding(r) for r in rows}
    for part in ("steady", "load"):
        assert not any(decoded[r["id"]] and decoded[r["id"]].speculative is not False for r in report[part]["results"])
    at = AppTest.from_file(str(ROOT / "views/accuracy_page.py"), default_timeout=60).run()
    said = next(c.value for c in at.caption if c.value.startswith("Not scored: "))
    maybe = sum(n for k, n in expected.items() if k.startswith("speculative decoding or not"))
    assert f"Not scored: {sum(expected.values()) - maybe:,} runs that" in said and f"and {maybe:,} that may" in said


def test_a_run_exported_several_times_is_scored_once_and_the_page_says_so():
    from roofline.sample_twins import SAME_RUN_REASON
    from roofline.silicon_sample import load_silicon_sample

    rows = load_silicon_sample()
    repeats = {r["id"] for r in rows if r.get("same_as")}
    report = load_report(REPORT_PATH)
    for part, counts in (("steady", report["steady"]["skipped"]), ("load", report["load"]["not_scored"])):
        assert counts[SAME_RUN_REASON] == len(repeats) > 1000
        assert not repeats & {r["id"] for r in report[part]["results"]}
    at = AppTest.from_file(str(ROOT / "views/accuracy_page.py"), default_timeout=60).run()
    assert any(
        c.value.startswith(f"Each run counts once: {len(repeats):,} rows of the sample repeat a run")
        for c in at.caption
    )


def test_the_test_set_is_scored_again_per_engine_and_per_device():
    """Both parts of the shipped report score the test set per engine and per device, each group's
    median error the one its own runs give, and the groups hold every test run once."""
    from roofline.validate import render

    report = load_report(REPORT_PATH)
    for part, metrics in (
        ("steady", [("tables", "tpot")]),
        ("load", [("tables_ttft", "ttft"), ("tables_tpot", "tpot")]),
    ):
        test = [r for r in report[part]["results"] if not r["host_fit_split"]]
        for field in ("engine", "device"):
            groups = report[part][f"test_set_by_{field}"]
            assert list(groups) == sorted({r[field] for r in test})
            assert sum(g["runs"] for g in groups.values()) == len(test)
            for name, g in groups.items():
                rows = [r for r in test if r[field] == name]
                for key, metric in metrics:
                    done = [r for r in rows if r.get(f"tables_{metric}_ms") is not None]
                    want = _errors([r[f"tables_{metric}_ms"] for r in done], [r[f"measured_{metric}_ms"] for r in done])
                    assert g[key] == want
    # A group of two runs worked by hand: errors -10% and +30% give median |error| 20%, bias +10%.
    two = [{"engine": "vllm", "tables_tpot_ms": 9.0, "measured_tpot_ms": 10.0}]
    two += [{"engine": "vllm", "tables_tpot_ms": 13.0, "measured_tpot_ms": 10.0}]
    g = by_field(two, "engine")
    assert list(g) == ["vllm"]
    e = _errors([r["tables_tpot_ms"] for r in g["vllm"]], [r["measured_tpot_ms"] for r in g["vllm"]])
    assert e["median_abs_error"] == pytest.approx(0.2) and e["bias"] == pytest.approx(0.1)
    # The command lines print them.
    steady_text = render(report["steady"])
    assert "  test set, sglang" in steady_text and "  test set, h100-sxm" in steady_text
    load_text = render_load(report["load"])
    runs = report["load"]["test_set_by_engine"]["vllm"]["runs"]
    assert f"test set, vllm ({runs:,})" in load_text


def test_the_accuracy_page_groups_its_table_by_engine_or_device():
    at = AppTest.from_file(str(ROOT / "views/accuracy_page.py"), default_timeout=60)
    at.query_params["group"] = "engine"
    at.run()
    assert not at.exception and at.selectbox(key="group").value == "engine"
    table = at.dataframe[-1].value
    assert list(table.columns[:2]) == ["engine", "expected median"]
    assert set(table["engine"]) == {"sglang", "trtllm", "vllm"}
    # The engines' rows hold every run of the headline once.
    runs = int({m.label: m for m in at.metric}["Runs"].value.replace(",", ""))
    assert table["runs"].sum() == runs
    at.selectbox(key="group").set_value("device").run()
    table = at.dataframe[-1].value
    assert table.columns[0] == "device" and table["runs"].sum() == runs
    assert any("rows are not scored because their batch is not the concurrency" in c.value for c in at.caption)
    at.selectbox(key="group").set_value("model").run()
    assert list(at.dataframe[-1].value.columns[:3]) == ["model", "device", "engine"]
    # One engine: its row prints the tiles' figures, whole percents rounded as they are (not cut).
    at.multiselect(key="engines").set_value(["trtllm"]).run()
    at.selectbox(key="group").set_value("engine").run()
    tiles = {m.label: m for m in at.metric}
    row = at.dataframe[-1].value.iloc[0]
    assert f"{row['expected median']:.0f}%" == tiles["Median |error|, expected"].value
    assert f"{row['expected p90']:.0f}%" == tiles["p90 |error|, expected"].value
    assert f"{row['expected bias']:+.0f}%".replace("-", "−") == tiles["Bias, expected"].value
    at = AppTest.from_file(str(ROOT / "views/accuracy_page.py"), default_timeout=60)
    at.query_params["group"] = "gpu"
    at.run()
    assert not at.exception and "`group`" in " ".join(w.value for w in at.warning)


def test_the_report_names_a_working_tree_that_differs_from_its_commit(tmp_path, monkeypatch):
    """The stamp is the commit, "-dirty" where a tracked file other than the report has changed."""
    import subprocess

    import roofline.accuracy as accuracy

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "accuracy.json").write_text("{}")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("-c", "user.email=a@b", "-c", "user.name=a", "add", ".")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "one")
    monkeypatch.setattr(accuracy, "REPORT_PATH", tmp_path / "docs" / "accuracy.json")
    clean = accuracy._commit()
    assert re.fullmatch(r"[0-9a-f]{7,}", clean)
    (tmp_path / "docs" / "accuracy.json").write_text('{"new": 1}')  # the report itself: still clean
    assert accuracy._commit() == clean
    (tmp_path / "code.py").write_text("x = 2\n")
    assert accuracy._commit() == clean + "-dirty"
