"""A measured serving result set beside another model's prediction says so: a hostile run had
compared a Llama 3.1 70B result with Llama 3.1 8B's simulation without a word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.models import get_model, load_models

RESULT = Path(__file__).parent / "data" / "serving_results" / "vllm_bench_serve.json"


@pytest.mark.parametrize(
    "model_id, recorded",
    [
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"),
        ("llama-3.1-8b", "llama3.1:8b"),  # an Ollama-style tag: the same letters and digits
        ("llama-3.1-8b", "/data/models/Llama-3.1-8B-Instruct/"),  # a local path's last part
        ("deepseek-r1", "deepseek-ai/DeepSeek-R1-0528"),
        ("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"),
    ],
)
def test_a_name_that_holds_the_models_is_the_model(model_id, recorded):
    from roofline.serving.measured.naming import model_mismatch

    assert model_mismatch(get_model(model_id), [recorded], load_models().values()) is None
    assert model_mismatch(get_model(model_id), [None, ""], load_models().values()) is None  # none recorded


@pytest.mark.parametrize(
    "model_id, recorded, reads_as",
    [
        ("llama-3.1-8b", "meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b"),
        ("gpt-oss-20b", "openai/gpt-oss-120b", "gpt-oss-120b"),  # 120b holds no "20b" after "gptoss"
        ("llama-3.1-8b", "Qwen/Qwen3-32B", "qwen3-32b"),
        ("llama-3.1-8b", "/models/llama", None),  # too little to be any one model
        ("llama-3.1-8b", "default", None),
    ],
)
def test_a_name_that_does_not_is_said_with_the_model_it_reads_as(model_id, recorded, reads_as):
    from roofline.serving.measured.naming import model_mismatch

    model = get_model(model_id)
    said = model_mismatch(model, ["meta-llama/Llama-3.1-8B-Instruct", recorded], load_models().values())
    if model_id == "llama-3.1-8b":  # the first name is the model: the second is still looked at
        assert said is not None
    said = model_mismatch(model, [recorded], load_models().values())
    assert said.startswith(f"the file was measured on {recorded!r}")
    assert f"not recognizably {model.name} ({model.id})" in said and "each ratio compares two models" in said
    assert (f"pick {reads_as} with --model" in said) if reads_as else ("reads as" not in said)


def test_serve_measured_warns_in_its_text_and_json(tmp_path, capsys):
    from roofline.cli import main

    other = json.loads(RESULT.read_text()) | {"model_id": "meta-llama/Llama-3.1-70B-Instruct"}
    path = tmp_path / "seventy.json"
    path.write_text(json.dumps(other))
    argv = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--requests", "50"]
    assert main([*argv, "--measured", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  warning: the file was measured on 'meta-llama/Llama-3.1-70B-Instruct', which reads as Llama 3.1 70B" in (
        out
    )
    assert main([*argv, "--measured", str(path), "--json"]) == 0
    assert "pick llama-3.1-70b with --model" in json.loads(capsys.readouterr().out)["model_check"]
    assert main([*argv, "--measured", str(RESULT), "--json"]) == 0  # the file's own model: no warning
    assert json.loads(capsys.readouterr().out)["model_check"] is None


def test_the_serving_page_warns_above_the_gaps(monkeypatch):
    import streamlit as st

    from dashboard.serving_measured import measured_gaps
    from roofline.hardware import get_hardware
    from roofline.serving.measured import parse_measured
    from roofline.settings import Settings
    from roofline.workload import Precision

    said = []
    monkeypatch.setattr(st, "warning", lambda text, **_: said.append(text))
    other = json.loads(RESULT.read_text()) | {"model_id": "meta-llama/Llama-3.1-70B-Instruct"}
    runs = parse_measured(json.dumps(other).encode(), "seventy.json")
    setup = (get_hardware("h100-sxm"), Precision(), 1, Settings(), True)
    gaps = measured_gaps(runs, get_model("llama-3.1-8b"), *setup)
    assert not gaps.empty and len(said) == 1 and "pick llama-3.1-70b with the Model picker" in said[0]
    said.clear()
    measured_gaps(parse_measured(RESULT.read_bytes(), RESULT.name), get_model("llama-3.1-8b"), *setup)
    assert said == []
