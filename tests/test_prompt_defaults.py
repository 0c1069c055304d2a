"""Each engine's own way of running prompts, and Chunked prefill's "auto" (the default of the
command line and the Serving page) following it: vLLM mixes prompt tokens into the decodes' steps
and splits a long prompt over steps; SGLang splits prompts but runs them in steps of their own
(its --enable-mixed-chunk is off); TensorRT-LLM batches prompts with the decodes but keeps each
whole (its enable_chunked_prefill is off)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from roofline.engines import load_engines, prompt_defaults, prompt_modes
from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving import Traffic, serving_sweep
from roofline.serving.simulation.api import knobs_from
from roofline.settings import Settings

H100 = get_hardware("h100-sxm")
BASE = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--prompt-len", "1024", "--output-len", "128"]


def test_each_engine_runs_prompts_its_own_way_and_says_where_that_comes_from():
    assert prompt_defaults("vllm") == (True, True)
    assert prompt_defaults("sglang") == (False, True)
    assert prompt_defaults("trtllm") == (True, False)
    assert prompt_defaults("ideal") == prompt_defaults("auto") == prompt_defaults("vllm")  # vLLM's scheduler
    for profile in load_engines().values():
        assert profile.mixed_steps_source and profile.chunked_prefill_source
    assert "enable_mixed_chunk" in load_engines()["sglang"].mixed_steps_source
    # A setting of on or off holds for both; None leaves both to the engine.
    assert prompt_modes(True, "sglang") == (True, True) and prompt_modes(False, "vllm") == (False, False)
    assert prompt_modes(None, "trtllm") == (True, False)


def test_the_frontier_and_the_simulation_follow_the_engine_unless_told():
    model, traffic, batches = get_model("llama-3.1-8b"), Traffic(1024, 128), np.array([8, 64])

    def tpot(engine: str, chunked: bool | None):
        return serving_sweep(model, [H100], traffic, settings=Settings(engine=engine), batches=batches, chunked=chunked)

    # SGLang's default is its prompts in steps of their own: the same frontier as chunked prefill off.
    assert tpot("sglang", None).tpot_s == pytest.approx(tpot("sglang", False).tpot_s, rel=1e-12)
    assert not np.allclose(tpot("sglang", None).tpot_s, tpot("sglang", True).tpot_s)
    assert tpot("trtllm", None).tpot_s == pytest.approx(tpot("trtllm", True).tpot_s, rel=1e-12)
    # The simulation: TensorRT-LLM keeps a prompt whole unless told to split it.
    assert not knobs_from(Settings(engine="trtllm"), hw=H100).chunked_prefill
    assert knobs_from(Settings(engine="trtllm"), True, H100).chunked_prefill
    assert knobs_from(Settings(engine="sglang"), hw=H100).chunked_prefill


def _json(argv, capsys) -> dict:
    from roofline.cli import main

    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_command_line_runs_each_engine_as_it_runs_by_default(capsys):
    sglang = _json([*BASE, "--engine", "sglang"], capsys)
    assert (sglang["chunked_prefill"], sglang["mixed_steps"], sglang["chunked_prefill_default"]) == (True, False, True)
    assert "prompts in prefill steps of their own" in sglang["searched"]
    told = _json([*BASE, "--engine", "sglang", "--chunked-prefill", "on"], capsys)
    assert (told["chunked_prefill"], told["mixed_steps"], told["chunked_prefill_default"]) == (True, True, False)
    assert told["searched"].endswith("prompts in the decodes' steps, a long one split over steps.")
    whole = _json([*BASE, "--engine", "trtllm"], capsys)
    assert whole["searched"].endswith("prompts in the decodes' steps, each whole.")
    assert (whole["chunked_prefill"], whole["mixed_steps"]) == (False, True)  # TensorRT-LLM's: whole, beside decodes
    assert "max_batched_tokens - prompt" in whole["searched"]
    run = _json([*BASE, "--engine", "trtllm", "--concurrency", "4", "--requests", "20"], capsys)
    assert run["engine"]["chunked_prefill"] is False and run["engine"]["engine_chunked_prefill"] is False


def test_contradicting_chunked_prefill_flags_are_refused_by_name(capsys):
    from roofline.cli import main

    assert main([*BASE, "--no-chunked-prefill", "--chunked-prefill", "on"]) != 0
    said = capsys.readouterr().err
    assert "--no-chunked-prefill and --chunked-prefill on contradict each other" in said and "Traceback" not in said
    with pytest.raises(SystemExit) as exc:  # argparse's own refusal, naming the choices
        main([*BASE, "--chunked-prefill", "sometimes"])
    assert exc.value.code == 2 and "choose from 'auto', 'on', 'off'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "engine, said",
    [
        ("sglang", "Auto: prompts in prefill steps of their own, a long one split over steps (SGLang's default)."),
        ("trtllm", "Auto: prompts in the decodes' steps, each whole (TensorRT-LLM's default)."),
        ("auto", "Auto: prompts in the decodes' steps, a long one split over steps (vLLM's default)."),
    ],
)
def test_the_serving_page_says_what_its_default_runs(engine, said):
    at = AppTest.from_file(
        str(Path(__file__).resolve().parent.parent / "views" / "serving_page.py"), default_timeout=120
    )
    at.query_params["engine"] = engine
    at.run()
    assert not at.exception and at.selectbox(key="chunked").value == "auto"
    assert said in [c.value for c in at.sidebar.caption]


def test_a_whole_prompt_engine_refuses_a_prompt_past_its_budget_on_the_frontier_too(capsys):
    """TensorRT-LLM keeps prompts whole by default: a 20,000-token prompt on an 8,192-token budget
    cannot run, which its simulation said and its frontier did not (it split the prompt)."""
    model, traffic = get_model("llama-3.1-8b"), Traffic(20_000, 128)
    whole = serving_sweep(model, [H100], traffic, settings=Settings(engine="trtllm"), batches=np.array([1]))
    assert "8,192 is below the prompt (20,000 tokens)" in whole.why_not["h100-sxm"]
    assert "TensorRT-LLM's default" in whole.why_not["h100-sxm"]
    split = serving_sweep(
        model, [H100], traffic, settings=Settings(engine="trtllm"), batches=np.array([1]), chunked=True
    )
    assert "h100-sxm" not in split.why_not
    plan = _json([*BASE[:5], "--engine", "trtllm", "--prompt-len", "20000", "--output-len", "128"], capsys)
    assert not plan["best"][0]["meets_targets"]


@pytest.mark.parametrize("old, now", [("False", "off"), ("TRUE", "on")])
def test_an_older_link_opens_as_it_asked_whatever_its_case(old, now):
    at = AppTest.from_file(
        str(Path(__file__).resolve().parent.parent / "views" / "serving_page.py"), default_timeout=120
    )
    at.query_params["chunked"] = old
    at.run()
    assert not at.exception and not at.warning and at.selectbox(key="chunked").value == now


def test_a_whole_prompt_engine_decodes_no_more_sequences_than_leave_room_for_the_next_prompt():
    """TensorRT-LLM takes a prompt in whole and only beside its step's decodes: with a budget of
    8,192 tokens and 8,000-token prompts, a step that takes one in holds at most 8,192 - 8,000 = 192
    decodes. The frontier forms no larger batch, as the simulation never runs one."""
    from roofline.serving.simulation.api import simulate_serving
    from roofline.serving.simulation.load import Lengths, Load, make_requests
    from roofline.workload import Precision

    model, b200 = get_model("llama-3.1-8b"), get_hardware("b200")
    traffic, batches, fp8_kv = Traffic(8000, 256), np.array([64, 192, 193, 256]), Precision(kv_dtype="fp8")
    trt = Settings(engine="trtllm", max_batched_tokens=8192)

    def sweep(settings, chunked=None):
        return serving_sweep(model, [b200], traffic, fp8_kv, settings=settings, batches=batches, chunked=chunked)

    whole = sweep(trt)
    assert whole.seq_cap.tolist() == [192]
    assert whole.fits.all() and whole.runs[0].tolist() == [True, True, False, False]
    assert whole.row(0, 2)["within_sequence_cap"] is False
    # Prompts split (chunked prefill on, or vLLM's default) or in steps of their own (SGLang's): no such cap.
    assert sweep(trt, True).runs.all()
    assert sweep(Settings(engine="vllm", max_batched_tokens=8192)).runs.all()
    assert sweep(Settings(engine="sglang", max_batched_tokens=8192)).runs.all()
    # The simulation of 320 clients: 192 decode beside the one prompt taken in, never more.
    load = Load("concurrency", 640, Lengths(8000), Lengths(256), concurrency=320)
    run = simulate_serving(model, b200, make_requests(load), fp8_kv, settings=trt)
    assert run.run.step_running.max() == 193


def test_the_chunked_prefill_lever_is_the_other_setting_of_the_engines_own(capsys):
    """TensorRT-LLM keeps prompts whole by default: its lever is chunked prefill on, which at a
    batch that leaves room for a whole prompt changes nothing. It had been "without chunked
    prefill" timed as prompts in steps of their own, which TensorRT-LLM never runs."""
    args = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--prompt-len", "4096", "--output-len", "256"]
    levers = {e: _json(["serve", *args, "--engine", e], capsys) for e in ("trtllm", "vllm", "sglang")}
    trt = levers["trtllm"]
    assert set(trt["levers"]) >= {"chunked_prefill"} and "without_chunked_prefill" not in trt["levers"]
    best = trt["best"][0]
    assert best["batch"] + 4096 <= 8192  # the prompt fits whole beside the batch: splitting it changes nothing
    assert trt["levers"]["chunked_prefill"]["tpot_s"] == pytest.approx(best["tpot_s"], rel=1e-9)
    assert "without_chunked_prefill" in levers["vllm"]["levers"]  # vLLM chunks by default: the lever is off
    assert "chunked_prefill" in levers["sglang"]["levers"]  # SGLang's prompts in steps of their own: on mixes them
