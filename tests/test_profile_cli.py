"""``python -m roofline profile``: a trace imported, a model profiled here from a Hugging Face
config, text and ``--json``, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.cli import main
from tests.test_profile_trace import gpu_trace

CONFIGS = Path(__file__).parent / "data" / "hf_configs"


@pytest.fixture()
def trace_file(tmp_path):
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(gpu_trace()))
    return path


def test_a_trace_on_the_h100_roofs_as_json(trace_file, capsys):
    assert main(["profile", "--trace", str(trace_file), "--hardware", "h100-sxm", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["roofs"]["source"] == "datasheet"
    assert report["wall_s"] == pytest.approx(100e-6)
    assert report["regime_split_s"]["communication"] == pytest.approx(20e-6)
    assert report["top_ops"][0]["name"] == "aten::linear"
    assert report["what_would_move_it"]


def test_the_profiled_gpu_names_its_roofs(trace_file, capsys):
    assert main(["profile", "--trace", str(trace_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["roofs"]["name"] == "NVIDIA H100 SXM5 80GB"


def test_a_trace_as_text_with_kernels(trace_file, capsys):
    assert main(["profile", "--trace", str(trace_file), "--hardware", "h100-sxm", "--level", "kernel"]) == 0
    out = capsys.readouterr().out
    assert "nvjet_tst_128x64" in out and "what would move it" in out


def test_a_gpu_the_database_does_not_name_needs_hardware(trace_file, capsys):
    data = gpu_trace()
    data["deviceProperties"] = [{"name": "Some Future GPU"}]
    trace_file.write_text(json.dumps(data))
    assert main(["profile", "--trace", str(trace_file)]) == 2
    assert "--hardware" in capsys.readouterr().err


def test_a_bad_trace_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    assert main(["profile", "--trace", str(bad)]) == 2
    assert "not JSON" in capsys.readouterr().err


def test_a_model_from_a_hf_config_profiled_here(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "profile.json"
    argv = ["profile", "--hf-config", str(CONFIGS / "smollm2-135m.json"), "--builder", "project"]
    argv += ["--batch", "1", "--seq", "16", "--layers", "1", "--steps", "1", "--train", "--out", str(out), "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["source"] == "profiler" and report["activity"] == "cpu"
    assert report["roofs"]["source"] == "measured"
    assert report["flops"] > report["flop_counter_flops"] > 0  # elementwise math besides the matmuls
    assert any(op["name"] == "aten::mm" for op in report["ops"])  # the backward's matmuls
    saved = json.loads(out.read_text())
    assert saved["schema"] == "roofline.profile"


def test_a_hf_config_through_transformers(capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    argv = ["profile", "--hf-config", str(CONFIGS / "smollm2-135m.json"), "--builder", "transformers"]
    argv += ["--seq", "8", "--layers", "1", "--steps", "1", "--level", "module", "--top", "50", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert "transformers" in report["label"]
    modules = {op["name"] for op in report["ops"]}
    assert "model.layers.0.mlp" in modules
    assert report["flop_counter_flops"] > 0


def test_a_model_this_machine_cannot_hold_is_refused_before_it_is_built(capsys):
    """Llama 3.1 405B's fp32 training step needs terabytes: refused with the figure, nothing built."""
    pytest.importorskip("torch")
    from roofline.cli import main

    assert main(["profile", "--model", "llama-3.1-405b", "--train"]) == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "GB is free" in err and "not even one layer fits" in err


def test_a_device_that_is_not_one_is_a_clear_error(capsys):
    from roofline.cli import main

    assert main(["profile", "--json", "--model", "deepseek-v3", "--device", "h100-sxm=nan"]) == 2
    assert "--device: expected cpu, cuda or cuda:N (profiling here), got 'h100-sxm=nan'" in capsys.readouterr().err


def test_cuda_on_a_machine_without_it_is_a_clear_error(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    from roofline.cli import main

    assert main(["profile", "--json", "--model", "smollm2-135m", "--device", "cuda"]) == 2
    assert "--device cuda: PyTorch sees 0 CUDA device(s) here" in capsys.readouterr().err


def test_a_trace_given_twice_is_refused_not_counted_as_two_ranks(trace_file, capsys):
    """The same file twice, or by another spelling, is named as given twice (a trace without its
    rank recorded had been read as two ranks, every op doubled)."""
    bare = {k: v for k, v in gpu_trace().items() if k != "distributedInfo"}
    trace_file.write_text(json.dumps(bare))
    again = f"{trace_file.parent}/./{trace_file.name}"
    for twice in ([str(trace_file), str(trace_file)], [str(trace_file), again]):
        assert main(["profile", "--trace", *twice, "--hardware", "h100-sxm"]) == 2
        err = capsys.readouterr().err
        assert err == f"error: --trace: {twice[1]} is given twice; give each rank's trace once\n"
    other = trace_file.parent / "rank1.json"
    trace_file.write_text(json.dumps(gpu_trace(0)))
    other.write_text(json.dumps(gpu_trace(1)))  # each rank's own file: two ranks
    assert main(["profile", "--trace", str(trace_file), str(other), "--hardware", "h100-sxm", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["ranks"]) == 2


def test_a_bad_hardware_or_results_file_is_refused_before_profiling(tmp_path, capsys, monkeypatch):
    """They had been refused after the model was built and profiled (7 s on this machine)."""
    from roofline.cli import main, profile_cmd

    monkeypatch.setattr(profile_cmd, "_profile_here", lambda args: pytest.fail("profiled before checking"))
    assert main(["profile", "--model", "smollm2-135m", "--layers", "1", "--hardware", "nosuch"]) == 2
    assert "unknown hardware 'nosuch'" in capsys.readouterr().err
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\xff\xfe not json")
    assert main(["profile", "--model", "smollm2-135m", "--layers", "1", "--results", str(garbage)]) == 2
    assert "garbage.json" in capsys.readouterr().err
