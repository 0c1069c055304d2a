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


def test_a_gemm_no_table_covers_says_it_rests_on_the_datasheet():
    """An fp64 GEMM on an H100 (vLLM's tables time no fp64) read "engine-measured roofs" in its
    header and "expected (engine-measured)" beside a datasheet time."""
    out = run("matmul", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "fp64", "--hardware", "h100-sxm")
    assert out.returncode == 0, out.stderr
    assert "(datasheet roofs)" in out.stdout and "engine-measured" not in out.stdout
    assert "rests on:   datasheet (8-byte weights with fp64 math: no table)" in out.stdout
    # 2 x 4096^3 FLOPs at the H100's 67 TFLOP/s fp64: 2.05 ms.
    assert "2.05 ms (ideal bound, datasheet roofs)" in out.stdout


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
    # KV budget 58,085,439,897.6 B (tests/test_kvcache.py works it out): / 1,073,741,824 B per
    # 8192-token sequence = 54.10 -> 54; / 32 sequences = 1,815,169,996.8 B each = 13,848.6 tokens,
    # held in whole 16-token blocks -> 13,840.
    assert data["max_batch"] == 54
    assert data["max_context"] == 13840
    assert {"kv_budget_bytes", "curve", "memory"} <= set(data)
    # At 512 tokens: 58,085,439,897.6 / (512 x 131,072) = 865.5 -> 865 sequences, whose decode step's
    # logits (b rows x 128,256 x 10 B, plus the 2 x b x 4096 x 2 B stream: 865 x 1,298,944 = 1.12 GB)
    # stay under the workspace (the sampler's 2.10 GB over vLLM's 1,024 sequences on an H100).
    assert data["curve"][0] == {"context": 512, "max_batch": 865}
    # Under vLLM's cap of 256 sequences (its default on a smaller GPU) the logits outgrow the workspace:
    # b x (512 x 131,072 + 1,298,944) <= 76,515,744,153.6 - 16,060,522,496 - 268,435,456 -> 879.
    capped = run(
        "kv", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--context", "8192", "--batch", "32",
        "--max-num-seqs", "256", "--json",
    )  # fmt: skip
    assert json.loads(capped.stdout)["curve"][0] == {"context": 512, "max_batch": 879}


def test_kv_model_that_does_not_fit_is_an_answer():
    out = run("kv", "--model", "llama-3.1-405b", "--hardware", "h100-sxm")
    assert out.returncode == 0
    assert "weights alone need 811.7 GB" in out.stdout and "at TP >= 16" in out.stdout


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


def test_kv_text_reads_its_counts_with_separators_and_says_when_nothing_fits():
    """At a batch of 10^12 it printed "max context 0" and "from 1 tokens of context at batch 1000000000000"."""
    out = run("kv", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "1000000000000").stdout
    assert "at batch 1,000,000,000,000: max context 0 (not one token of cache fits for every sequence)" in out
    assert "from 1 token of context at batch 1,000,000,000,000" in out
    out = run("kv", "--model", "llama-3.1-8b", "--hardware", "h100-sxm").stdout
    assert "at batch 1: max context 131,072\n" in out and "from 114,515 tokens of context at batch 1\n" in out
