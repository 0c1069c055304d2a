"""The published error shown beside a simulated TTFT and TPOT (``roofline.known_error``): which
report column scores which prediction, on which runs, worked by hand on a small report; and the
shipped report read the way the validate command scores it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from roofline.accuracy import SCHEMA, load_report, write_report
from roofline.hardware import get_hardware
from roofline.known_error import MIN_RUNS, for_settings, known_error, score
from roofline.settings import Settings
from roofline.validate import _errors


def _run(engine, device, measured, tables, datasheet, split=False):
    return {
        "engine": engine,
        "device": device,
        "host_fit_split": split,
        "measured_ttft_ms": measured,
        "tables_ttft_ms": tables,
        "datasheet_ttft_ms": datasheet,
        "measured_tpot_ms": measured,
        "tables_tpot_ms": tables,
        "datasheet_tpot_ms": datasheet,
    }


@pytest.fixture
def small_report(tmp_path):
    """20 vLLM test runs on h100-sxm, half predicted at 0.5x and half at 1.2x the measured 10 ms;
    one vLLM run on l40s at 1.0x; one SGLang run on h100-sxm at 3x; two runs of the host-work split
    (100x, never counted); the datasheet column 0.25x everywhere. The steady state: the first ten
    (0.5x), TPOT only."""
    runs = [_run("vllm", "h100-sxm", 10.0, 5.0, 2.5) for _ in range(10)]
    runs += [_run("vllm", "h100-sxm", 10.0, 12.0, 2.5) for _ in range(10)]
    runs += [_run("vllm", "l40s", 10.0, 10.0, 2.5), _run("sglang", "h100-sxm", 10.0, 30.0, 2.5)]
    runs += [_run("vllm", "h100-sxm", 10.0, 1000.0, 1000.0, split=True) for _ in range(2)]
    path = tmp_path / "accuracy.json"
    write_report(
        path,
        {"schema": SCHEMA, "generated": "2026-01-02T03:04:05+00:00", "commit": "abc1234",
         "steady": {"results": [{k: v for k, v in r.items() if "ttft" not in k} for r in runs[:10]]},
         "load": {"results": runs}},
    )  # fmt: skip
    return path


def test_the_engines_expected_figure_on_its_device_worked_by_hand(small_report):
    k = known_error("vllm", "engine-measured", "h100-sxm", "H100", path=small_report)
    ttft = k.scores["ttft"]
    # |errors|: ten 0.5 and ten 0.2 -> median (0.2 + 0.5) / 2; p90 at rank 0.9 x 19 = 17.1 -> 0.5;
    # signed: ten -0.5 and ten +0.2 -> median (-0.5 + 0.2) / 2. The split's runs are left out.
    assert ttft.runs == 20 and ttft.median_abs_error == pytest.approx(0.35)
    assert ttft.p90_abs_error == pytest.approx(0.5) and ttft.bias == pytest.approx(-0.15)
    assert k.whose == "vLLM's expected figure" and k.where == "on H100"
    assert "TTFT median 35% off (p90 50%), 15% too fast" in k.words()
    assert "20 test runs" in k.words() and "2026-01-02, commit abc1234" in k.words()
    assert k.short() == "TTFT −15%, TPOT −15%" and k.on_device
    assert (k.engine, k.device) == ("vllm", "h100-sxm")  # which runs, for a link to the Accuracy page


def test_too_few_runs_on_the_device_falls_back_to_every_device(small_report):
    assert MIN_RUNS == 20
    k = known_error("vllm", "engine-measured", "l40s", "L40S", path=small_report)
    # The 21 vLLM test runs: |errors| ten 0.5, ten 0.2 and one 0 -> median 0.2.
    assert k.scores["tpot"].runs == 21 and k.scores["tpot"].median_abs_error == pytest.approx(0.2)
    assert k.where == "on every device (fewer than 20 test runs on L40S)"
    # The 21 signed errors: ten -0.5, one 0 and ten +0.2 -> median 0.
    assert k.short() == "TTFT 0%, TPOT 0%*" and not k.on_device and (k.engine, k.device) == ("vllm", "")
    assert "TTFT median 20% off (p90 50%), no lean either way" in k.words()
    assert (k.to_json()["engine"], k.to_json()["device"]) == ("vllm", None)
    sglang = known_error("sglang", "engine-measured", "h100-sxm", path=small_report)
    assert sglang.scores["ttft"].runs == 1 and sglang.scores["ttft"].bias == pytest.approx(2.0)
    assert "200% too slow" in sglang.words()


def test_the_ideal_engine_is_scored_by_the_ideal_bound_of_every_engine(small_report):
    k = known_error("ideal", "datasheet", "h100-sxm", path=small_report)
    assert k.whose == "the ideal bound (each run's own engine scheduler)" and (k.engine, k.device) == ("", "h100-sxm")
    assert k.scores["ttft"].runs == 21 and k.scores["ttft"].bias == pytest.approx(-0.75)


@pytest.mark.parametrize(
    "engine, source, why",
    [
        ("vllm", "calibrated", "a calibration of your own"),
        ("sglang", "datasheet", "datasheet roofs with SGLang's host work are not scored"),
    ],
)
def test_a_prediction_the_report_does_not_score_says_so(small_report, engine, source, why):
    k = known_error(engine, source, "h100-sxm", path=small_report)
    assert not k.scores and why in k.words() and k.to_json()["ttft"] is None and k.short() == "not scored"


def test_a_reports_odd_values_are_left_out_not_raised(tmp_path):
    """Times as text, nested, negative, zero or boolean, a missing stamp: left out of the scores, never a
    traceback (an infinite one is not JSON: the report is refused whole, as below)."""
    runs = [_run("vllm", "h100-sxm", 10.0, 5.0, 2.5) for _ in range(20)]
    runs += [_run("vllm", "h100-sxm", bad, 5.0, 2.5) for bad in ("ten", {"x": 1}, -10.0, 0, True, None)]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"schema": SCHEMA, "steady": {"results": []}, "load": {"results": runs}}))
    k = known_error("vllm", "engine-measured", "h100-sxm", path=path)
    assert k.scores["ttft"].runs == 20 and k.scores["ttft"].bias == pytest.approx(-0.5)
    assert "accuracy report of an unknown date, commit unknown" in k.words()
    weird = known_error("tgi", "engine-measured", "h100-sxm", path=path)
    assert not weird.scores and "no engine-measured prediction of engine 'tgi'" in weird.words()


def test_a_missing_or_foreign_report_is_a_sentence_not_a_traceback(tmp_path):
    k = known_error("vllm", "engine-measured", "h100-sxm", path=tmp_path / "nope.json")
    assert not k.scores and "python -m roofline validate --report" in k.words()
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"schema": "something else"}))
    assert "not an accuracy report" in known_error("vllm", "engine-measured", "b200", path=foreign).words()
    assert score([1.0, np.nan], [np.nan, 2.0]) is None


def test_the_shipped_report_reads_as_validate_scores_it():
    """vLLM's expected figure on the H100 against the same runs scored by validate's own function."""
    runs = [
        r
        for r in load_report()["load"]["results"]
        if r["engine"] == "vllm" and r["device"] == "h100-sxm" and not r["host_fit_split"]
    ]
    assert len(runs) >= MIN_RUNS
    k = for_settings(Settings(engine="auto"), get_hardware("h100-sxm"))
    for m in ("ttft", "tpot"):
        want = _errors([r[f"tables_{m}_ms"] for r in runs], [r[f"measured_{m}_ms"] for r in runs])
        got = k.scores[m]
        assert got.runs == len(runs)
        assert (got.median_abs_error, got.p90_abs_error, got.bias) == pytest.approx(
            (want["median_abs_error"], want["p90_abs_error"], want["bias"])
        )


def test_serve_prints_and_returns_the_published_error():
    base = [sys.executable, "-m", "roofline", "serve", "--model", "llama-3.1-8b", "--rate", "2", "--requests", "50"]
    out = subprocess.run([*base, "--hardware", "h100-sxm", "--json"], capture_output=True, text=True, check=True)
    known = json.loads(out.stdout)["known_error"]
    assert known["whose"] == "vLLM's expected figure" and known["ttft"]["runs"] >= MIN_RUNS
    assert known["words"].startswith("published error of vLLM's expected figure on NVIDIA H100")
    text = subprocess.run([*base, "--hardware", "l40s", "--engine", "sglang"], capture_output=True, text=True)
    assert text.returncode == 0 and "published error: none for this prediction" in text.stdout


def test_the_capacity_ranking_carries_each_devices_published_bias():
    cmd = [sys.executable, "-m", "roofline", "serve", "--model", "llama-3.1-8b", "--capacity", "--requests", "100"]
    cmd += ["--hardware", "h100-sxm", "--hardware", "l40s"]
    data = json.loads(subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=True).stdout)
    known = {row["hardware"]: row["known_error"] for row in data["ranking"]}
    assert known["h100-sxm"]["whose"] == "vLLM's expected figure" and known["h100-sxm"]["on_device"]
    # No vLLM tables for the L40S: the ideal engine, scored by the ideal bound of every engine's test runs.
    assert known["l40s"]["whose"].startswith("the ideal bound") and known["l40s"]["short"].endswith("*")
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "published bias" in text and "*: pooled over every device's test runs" in text


def test_the_steady_state_is_scored_by_the_reports_steady_part(small_report):
    k = known_error("vllm", "engine-measured", "h100-sxm", "H100", path=small_report, part="steady")
    # Ten runs at 0.5x, fewer than 20 on the device: every device's (the same ten); no TTFT there.
    assert list(k.scores) == ["tpot"] and k.scores["tpot"].runs == 10 and k.scores["tpot"].bias == pytest.approx(-0.5)
    assert k.whose == "vLLM's expected figure in steady state" and k.short() == "TPOT −50%*"
    assert "each run's steady state, no queueing" in k.words()
    with pytest.raises(ValueError, match="part must be one of"):
        known_error("vllm", "engine-measured", "h100-sxm", path=small_report, part="training")


def test_serve_in_steady_state_gives_each_devices_published_bias():
    cmd = [sys.executable, "-m", "roofline", "serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"]
    data = json.loads(subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=True).stdout)
    assert data["known_error"]["h100-sxm"]["whose"] == "vLLM's expected figure in steady state"
    assert data["known_error"]["h100-sxm"]["ttft"] is None and data["known_error"]["h100-sxm"]["tpot"]["runs"] >= 20
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "published bias of the steady-state TPOT" in text and "h100-sxm TPOT " in text


def test_the_steady_bias_sentence_shows_names_and_stars_as_written():
    from dashboard.serving_view import steady_bias_sentence

    hw = get_hardware("l40s")
    odd = hw.model_copy(update={"name": "*My* [card](x)"})
    said = steady_bias_sentence(Settings(engine="auto"), [odd])
    # The L40S has no tables: the ideal bound of every device's runs, starred; nothing read as Markdown.
    assert r"\*My\* \[card\]\(x\) TPOT −" in said and r"%\*" in said and r"(\*\: pooled over every device" in said


def test_an_unscored_prediction_on_the_serving_page_links_to_no_runs():
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).parents[1] / "views/serving_page.py"), default_timeout=120)
    for key, value in (("hw", "l40s"), ("engine", "sglang"), ("view", "Under load")):
        at.query_params[key] = value
    at.run()
    assert not at.exception
    said = next(c.value for c in at.caption if c.value.startswith("How far off to expect it"))
    assert "none for this prediction" in said and "/accuracy" not in said


def test_the_test_runs_faster_a_token_than_a_host_work_worked_by_hand(small_report):
    """vLLM's test runs all measured 10 ms (the split's two are never counted): under 12 ms, all 21;
    under 10 ms, none; SGLang's one run; an engine the report has no run of: None."""
    from roofline.known_error import faster_than_host

    found = faster_than_host("vllm", 12e-3, path=small_report)
    assert (found.under, found.runs, found.fastest_ms) == (21, 21, 10.0)
    assert "2026-01-02, commit abc1234" == found.report
    assert faster_than_host("vllm", 10e-3, path=small_report).under == 0
    assert faster_than_host("sglang", 12e-3, path=small_report).runs == 1
    assert faster_than_host("trtllm", 12e-3, path=small_report) is None
    assert faster_than_host("vllm", 12e-3, path=small_report.parent / "missing.json") is None


def test_a_step_its_engines_fitted_host_work_sets_says_the_test_runs_ran_faster():
    """Llama 3.1 8B on one B200, 4 sequences, TensorRT-LLM: the device takes about 3 ms and the host
    work fitted on the split 6.1 ms, which sets the step; the shipped report holds TensorRT-LLM test
    runs measured faster a token than that, and the note says how many. A step the device sets
    (70B at 64 sequences) and an engine none of whose test runs were faster (vLLM) say nothing."""
    from roofline.engines import engine_profile
    from roofline.inference import analyze_request, analyze_step
    from roofline.known_error import faster_than_host
    from roofline.models import get_model
    from roofline.workload import Precision, Workload

    fp8 = Precision("fp8", "fp8", "fp8")
    b200, h100 = get_hardware("b200"), get_hardware("h100-sxm")
    trt = Settings(engine="trtllm")
    small = Workload(get_model("llama-3.1-8b"), "decode", 4, 1024, precision=fp8, cuda_graphs=True)
    step = analyze_step(small, b200, trt)
    assert float(step.table.step_time_s) > float(step.table.device_time_s) * 1.5
    found = faster_than_host("trtllm", engine_profile("trtllm").host_step_s)
    assert found.under > 0
    notes = [n for n in step.notes if n.startswith("This step is set by TensorRT-LLM's host work")]
    assert len(notes) == 1 and f"{found.under:,} of its {found.runs:,} test runs" in notes[0]
    big = Workload(get_model("llama-3.1-70b"), "decode", 64, 1024, precision=fp8, cuda_graphs=True)
    assert not any(n.startswith("This step is set") for n in analyze_step(big, h100, trt).notes)
    assert not any(n.startswith("This step is set") for n in analyze_step(small, b200, Settings(engine="vllm")).notes)
    # A request's decode steps carry it too, once.
    req = Workload(get_model("llama-3.1-8b"), "request", 4, 1024, output_len=64, precision=fp8, cuda_graphs=True)
    assert sum(n.startswith("The decode step is set") for n in analyze_request(req, b200, trt).notes) == 1


def test_the_llm_page_shows_the_host_work_note():
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).parents[1] / "views/llm_page.py"), default_timeout=120)
    at.query_params.update(hw="b200", engine="trtllm", batch="4", prompt="1024", output="64")
    at.run()
    assert not at.exception
    assert any("The decode step is set by TensorRT-LLM's host work" in i.value for i in at.info)
