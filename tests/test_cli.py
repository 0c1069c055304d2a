"""``python -m roofline`` end to end: JSON keys and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "roofline", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )


def test_hardware_list_json():
    out = run("hardware", "list", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert len(data) >= 24 and {"id", "name", "peak_tflops"} <= set(data[0])


def test_hardware_show_json():
    out = run("hardware", "show", "h100-sxm", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["id"] == "h100-sxm"
    assert data["peak_tflops"]["bf16"] == 989.4
    assert data["memory_bandwidth_tbps"] == 3.35 and data["memory_gb"] == 80
    assert data["sources"][0]["url"].startswith("https://")


def test_matmul_json_matches_hand_values():
    out = run(
        "matmul", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "bf16", "--hardware", "h100-sxm", "--json"
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["flops"] == 137_438_953_472
    assert data["bytes"] == 100_663_296
    assert data["intensity"] == pytest.approx(1365.333, rel=1e-5)
    # The ideal bound: 2 x 4096^3 FLOPs at 989.4 TFLOP/s.
    assert data["ideal_time_s"] == pytest.approx(138.911e-6, rel=1e-5)
    assert data["bound"] == "compute"
    assert data["attainable_tflops"] == pytest.approx(989.4)
    # The H100 has vLLM's measured GEMMs: the expected time rests on them, and is slower.
    assert data["ceilings"] == "engine-measured" and "vLLM" in data["rests_on"]
    assert data["time_s"] > data["ideal_time_s"]
    ideal = json.loads(run("matmul", "--m", "4096", "--n", "4096", "--k", "4096", "--engine", "ideal", "--json").stdout)
    assert ideal["time_s"] == ideal["ideal_time_s"] == pytest.approx(138.911e-6, rel=1e-5)


def test_text_output_is_readable():
    out = run("matmul", "--m", "1", "--n", "4096", "--k", "4096")
    assert out.returncode == 0
    assert "memory-bandwidth-bound" in out.stdout


@pytest.mark.parametrize(
    "args, expected",
    [
        (["hardware", "show", "h1000"], "unknown hardware 'h1000'; allowed:"),
        (["matmul", "--m", "0", "--n", "1", "--k", "1"], "--m: expected a positive integer, got '0'"),
        (["matmul", "--m", "1", "--n", "-4", "--k", "1"], "--n: expected a positive integer, got '-4'"),
        (
            ["matmul", "--m", "1", "--n", "1", "--k", "1", "--dtype", "fp8", "--hardware", "a100-sxm-80gb"],
            "has no 'fp8' peak; allowed dtypes: fp64, fp32, tf32, bf16, fp16, int8",
        ),
        (["matmul", "--m", "1", "--n", "1", "--k", "1", "--dtype", "bf17"], "invalid choice: 'bf17'"),
    ],
)
def test_errors_are_one_clear_line(args, expected):
    out = run(*args)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert expected in lines[0]


def test_a_malformed_user_file_is_named_and_skipped(tmp_path):
    (tmp_path / "bad.toml").write_text('id = "bad"\nname = "x"\n')
    out = run("hardware", "list", "--hardware-dir", str(tmp_path))
    assert out.returncode == 0  # the shipped devices still list
    assert "h100-sxm" in out.stdout and "bad" not in out.stdout.split()
    assert out.stderr.count("\n") == 1
    assert out.stderr.startswith("warning: ") and "bad.toml" in out.stderr and "missing required field" in out.stderr


def test_hardware_dir_env_adds_a_device(tmp_path):
    import os

    text = (ROOT / "hardware_db" / "h100-sxm.toml").read_text().replace('id = "h100-sxm"', 'id = "my-gpu"')
    (tmp_path / "my-gpu.toml").write_text(text)
    out = run("hardware", "show", "my-gpu", "--json", env={**os.environ, "ROOFLINE_HARDWARE_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["id"] == "my-gpu"


def test_model_show_json():
    out = run("model", "show", "llama-3.1-8b", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["params"]["total"] == 8_030_261_248
    assert data["kv_bytes_per_token"]["bf16"] == 131_072
    # int4 KV with its scales, 4.25 bits an element (131,072 x 4.25 / 16), as the kv command counts it.
    assert data["kv_bytes_per_token"]["int4"] == 34_816
    kv = json.loads(
        run("kv", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--kv-dtype", "int4", "--json").stdout
    )
    assert kv["kv_bytes_per_token"] == data["kv_bytes_per_token"]["int4"]
    assert data["attention"] == "GQA"


def test_model_list_json():
    data = json.loads(run("model", "list", "--json").stdout)
    assert len(data) >= 16


def test_analyze_json():
    out = run(
        "analyze",
        "--model",
        "llama-3.1-8b",
        "--hardware",
        "h100-sxm",
        "--phase",
        "decode",
        "--batch",
        "1",
        "--seq-len",
        "1024",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"name", "count", "flops", "bytes", "intensity", "time_s", "bound"} <= set(data["ops"][0])
    assert {"flops", "bytes", "time_s", "bound"} <= set(data["total"])
    assert {"weights_bytes", "kv_cache_bytes", "fits"} <= set(data["memory"])
    # Replayed from a CUDA graph (the default) the step is memory-bound...
    assert data["total"]["bound"] == "memory" and data["cuda_graphs"]
    # ...eager on that host, 389 launches dispatched at 10.6-18.5 us outlast the device's 4.9 ms on the
    # datasheet roofs (vLLM's measured kernels take 6.4 ms: the host no longer sets it there).
    eager = run(
        "analyze",
        "--model",
        "llama-3.1-8b",
        "--phase",
        "decode",
        "--seq-len",
        "1024",
        "--eager",
        "--engine",
        "ideal",
        "--json",
    )
    data = json.loads(eager.stdout)
    assert data["total"]["bound"] == "overhead"
    total = data["total"]
    assert sum(op["time_s"] for op in data["ops"]) == pytest.approx(total["device_time_s"])
    assert sum(op["host_s"] for op in data["ops"]) == pytest.approx(total["host_time_s"])
    assert total["time_s"] == pytest.approx(max(total["device_time_s"], total["host_time_s"]))
    assert total["exposed_host_s"] == pytest.approx(total["host_time_s"] - total["device_time_s"])


def test_request_json_and_cuda_graphs():
    args = [
        "request",
        "--model",
        "llama-3.1-8b",
        "--hardware",
        "h100-sxm",
        "--batch",
        "4",
        "--prompt-len",
        "512",
        "--output-len",
        "64",
        "--engine",
        "ideal",
        "--json",
    ]
    eager = json.loads(run(*args, "--eager").stdout)
    graphs = json.loads(run(*args).stdout)
    assert {"ttft_s", "tpot_s", "e2e_s", "tokens_per_s"} <= set(eager)
    assert graphs["tpot_s"] < eager["tpot_s"]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["analyze", "--model", "nope", "--phase", "decode", "--seq-len", "1"], "unknown model 'nope'; allowed:"),
        (
            ["analyze", "--model", "llama-3.1-8b", "--phase", "decode", "--seq-len", "1", "--batch", "0"],
            "--batch: expected a positive integer, got '0'",
        ),
        (
            [
                "analyze",
                "--model",
                "llama-3.1-8b",
                "--phase",
                "decode",
                "--seq-len",
                "1",
                "--act-dtype",
                "fp8",
                "--hardware",
                "a100-sxm-80gb",
            ],
            "a100-sxm-80gb has no kernels for fp8 math (its formats record: weights fp32, bf16, fp16, fp8, "
            "int8, int4, mxfp4;",
        ),
        (
            ["analyze", "--model", "llama-3.1-8b", "--phase", "decode", "--seq-len", "1", "--tp", "3"],
            "tp=3 does not divide llama-3.1-8b's 32 attention heads",
        ),
        (
            ["request", "--model", "llama-2-7b", "--prompt-len", "4000", "--output-len", "200"],
            "exceed llama-2-7b's maximum context of 4096",
        ),
    ],
)
def test_llm_errors_are_one_line(args, expected):
    out = run(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], out.stderr


def test_kv_json():
    out = run("kv", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--context", "8192", "--batch", "32", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["kv_bytes_per_token"] == 131_072
    assert data["weights_bytes"] == 16_060_522_496
    # KV budget 59,347,925,401.6 B (tests/test_kvcache.py works it out): / 1,073,741,824 B per
    # 8192-token sequence = 55.27 -> 55; / 32 sequences = 1,854,622,668.8 B each = 14,149.7 tokens,
    # held in whole 16-token blocks -> 14,144.
    assert data["max_batch"] == 55
    assert data["max_context"] == 14144
    assert {"kv_budget_bytes", "curve", "memory"} <= set(data)
    # At 512 tokens so many sequences fit that their decode step's logits (b rows x 128,256 x 10 B,
    # plus the 2 x b x 4096 x 2 B stream) outgrow the workspace: b x (512 x 131,072 + 1,298,944)
    # <= 76,515,744,153.6 - 16,060,522,496 - 268,435,456 -> b <= 879.85 -> 879.
    assert data["curve"][0] == {"context": 512, "max_batch": 879}


def test_kv_model_that_does_not_fit_is_an_answer():
    out = run("kv", "--model", "llama-3.1-405b", "--hardware", "h100-sxm")
    assert out.returncode == 0
    assert "weights alone need 811.7 GB" in out.stdout and "use TP >= 16" in out.stdout


@pytest.mark.parametrize(
    "args, expected",
    [
        (["kv", "--model", "nope"], "unknown model 'nope'"),
        (["kv", "--model", "llama-2-7b", "--memory-utilization", "0"], "expected a number in (0, 1], got '0'"),
        (["kv", "--model", "llama-2-7b", "--memory-utilization", "1.2"], "expected a number in (0, 1], got '1.2'"),
        (
            ["kv", "--model", "llama-2-7b", "--context", "5000"],
            "context: 5000 is not allowed; allowed: integers 1..4096",
        ),
    ],
)
def test_kv_errors_are_one_line(args, expected):
    out = run(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], out.stderr


def test_advise_json():
    out = run(
        "advise",
        "--model",
        "llama-3.1-8b",
        "--phase",
        "decode",
        "--batch",
        "1",
        "--seq-len",
        "1024",
        "--cuda-graphs",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"hardware", "time_s", "bound", "fits"} <= set(data["ranking"][0])
    assert {"bound", "top_ops", "levers"} <= set(data["diagnosis"])
    assert {"name", "time_s"} <= set(data["diagnosis"]["levers"][0])
    assert data["sensitivity"]["memory_bandwidth"] > 1.5
    # Measured kernels on some devices and the datasheet on others: ranked on the ideal bound, where the
    # Blackwell parts (8 TB/s) lead.
    assert data["ranking"][0]["ranked_on"] == "ideal bound"
    assert data["ranking"][0]["hardware"] in ("gb200", "b200", "gb300")
    # Which engine's kernels the expected times read, named for the device diagnosed.
    assert (
        data["engine"] == "auto"
        and "vLLM" in data["engine_note"]
        and data["diagnosis"]["hardware"] in data["engine_note"]
    )
    text = run("advise", "--model", "llama-3.1-8b", "--phase", "decode", "--seq-len", "1024", "--engine", "sglang")
    assert "Engine: NVIDIA H100 SXM5 80GB: engine-measured roofs, SGLang" in text.stdout, text.stdout
    ideal = run("advise", "--model", "llama-3.1-8b", "--phase", "decode", "--seq-len", "1024", "--engine", "ideal")
    assert ideal.returncode == 0 and "Engine:" not in ideal.stdout


def test_advise_bad_objective_is_one_line():
    out = run("advise", "--model", "llama-3.1-8b", "--phase", "decode", "--seq-len", "10", "--objective", "cheap")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "--objective: invalid choice: 'cheap' (choose from 'latency', 'throughput', 'per-watt')" in out.stderr


@pytest.mark.parametrize(
    "flag, value, said",
    [
        ("--non-torch-gb", "1e12", "--non-torch-gb: expected a number in [0, 1e+06], got 1000000000000.0"),
        ("--launch-overhead-us", "1e12", "--launch-overhead-us: expected a number in [0, 1e+06]"),
        ("--graph-launch-overhead-us", "5e6", "--graph-launch-overhead-us: expected a number in [0, 1e+06]"),
        ("--block-size", "1000000000", "--block-size: expected an integer in [1, 1048576], got 1000000000"),
    ],
)
def test_a_setting_out_of_range_is_named_as_its_flag_in_its_units(flag, value, said, capsys):
    from roofline.cli import main

    argv = ["request", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--prompt-len", "10", "--output-len", "10"]
    assert main([*argv, flag, value]) == 2
    err = capsys.readouterr().err
    assert said in err and "_bytes" not in err and "_s must" not in err


@pytest.mark.parametrize("tp", ["3", "1000"])
def test_load_refuses_a_tp_that_does_not_split_the_heads(tp, capsys):
    from roofline.cli import main

    assert main(["load", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", tp]) == 2
    assert f"tp={tp} does not divide llama-3.1-8b's 32 attention heads" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["--act-dtype", "fp16"], ["--kv-dtype", "fp16"]])
def test_a_device_without_bf16_runs_fp16_whichever_part_was_asked_in_fp16(extra, capsys):
    from roofline.cli import main

    argv = ["request", "--model", "llama-3.1-8b", "--hardware", "t4", "--prompt-len", "10", "--output-len", "10"]
    assert main([*argv, *extra, "--json"]) == 0  # the T4 has no bf16 kernels: every bf16 part runs fp16
    data = json.loads(capsys.readouterr().out)
    p = data["precision"]
    assert (p["weight_dtype"], p["act_dtype"], p["kv_dtype"]) == ("fp16", "fp16", "fp16")


def test_a_calibration_is_not_also_called_the_engines_kernel_tables(capsys):
    from roofline.cli import main

    argv = ["request", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--prompt-len", "64", "--output-len", "8"]
    assert main([*argv, "--calibration", str(ROOT / "examples/h100-sxm-quick-run.json")]) == 0
    out = capsys.readouterr().out
    assert "calibrated roofs" in out and "engine-measured roofs, vLLM" not in out
    assert "your calibration's roofs stand in for vLLM's kernel tables; vLLM's host work per step still applies" in out


def test_the_pages_engine_captions_say_where_a_calibration_stands_in():
    from types import SimpleNamespace

    from dashboard.state import engine_notes
    from roofline.hardware import get_hardware

    devices = {h: get_hardware(h) for h in ("h100-sxm", "b200")}
    text = engine_notes("vllm", devices, ["h100-sxm", "b200"], calibration=SimpleNamespace(hardware_id="h100-sxm"))
    h100, b200 = text.split("  \n")
    assert "your calibration's roofs stand in for vLLM's kernel tables" in h100
    assert "engine-measured roofs, vLLM" in b200  # the device not measured keeps the engine's tables


@pytest.mark.parametrize(
    "extra, said",
    [
        (["--sweep", "--capacity"], "--sweep and --capacity are two kinds of run: give one"),
        (["--sweep", "--rate", "5"], "--sweep and --rate are two kinds of run"),
        (["--capacity", "--concurrency", "8"], "--capacity and --concurrency are two kinds of run"),
        (["--rate", "5", "--target-rate", "100"], "--target-rate: the replicas a rate needs come with --capacity"),
        (["--capacity", "--target-rate", "0"], "--target-rate: expected a rate above 0 requests/s, got 0"),
        (["--target-rate", "100"], "--target-rate act in the simulation"),
    ],
)
def test_serve_refuses_two_kinds_of_run_rather_than_dropping_one(extra, said, capsys):
    from roofline.cli import main

    assert main(["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", *extra]) == 2
    assert said in capsys.readouterr().err


def test_the_capacity_ranking_prints_the_replicas_a_target_rate_needs(capsys):
    from roofline.cli import main

    argv = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--capacity", "--requests", "200"]
    assert main([*argv, "--target-rate", "100"]) == 0
    text = capsys.readouterr().out
    assert main([*argv, "--target-rate", "100", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["ranking"][0]
    n = row["replicas_for_target"]
    assert n >= 100 / row["max_rate_per_s"] and f"h100-sxm TP1: {n} replicas ({n} devices) for 100 requests/s" in text


def test_fp8_weights_with_16_bit_math_say_they_run_weight_only_where_engines_run_w8a8(capsys):
    from roofline.cli import main

    argv = ["request", "--model", "llama-3.1-8b", "--prompt-len", "64", "--output-len", "8", "--weight-dtype", "fp8"]
    assert main([*argv, "--hardware", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert "fp8 weights with bf16 math run weight-only" in out and "as W8A8, in fp8 math" in out
    assert main([*argv, "--hardware", "h100-sxm", "--act-dtype", "fp8"]) == 0
    assert "run weight-only" not in capsys.readouterr().out  # W8A8 asked: nothing to say
    assert main([*argv, "--hardware", "a100-sxm-80gb"]) == 0
    assert "run weight-only" not in capsys.readouterr().out  # no fp8 math there: weight-only is what runs


def test_advise_prints_a_rate_under_one_token_a_second_with_its_figures(capsys):
    from roofline.cli import main

    argv = ["advise", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--phase", "request"]
    assert main([*argv, "--seq-len", "131072", "--output-len", "1", "--engine", "ideal"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("1 "))
    assert " 0 " not in row and "0.3" in row  # 2.6 s for one token: 0.38 tokens/s, not "0"
