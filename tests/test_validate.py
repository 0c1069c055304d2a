"""validate: the sample's names and precisions mapped as documented, ops' GEMM shapes recovered,
the datasheet column equal to the serving plan's TPOT, and the report on a tiny sample."""

from __future__ import annotations

import csv
import gzip
import json

import numpy as np
import pytest

from roofline.cli import main
from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving import Traffic, serving_sweep
from roofline.tables import store
from roofline.validate import (
    precision_for,
    predict_tpot,
    validate,
    why_not_scored,
)
from roofline.workload import Precision

FIELDS = (
    "id,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,"
    "batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms"
).split(",")


def _row(**kw) -> dict[str, str]:
    base = dict.fromkeys(FIELDS, "")
    base.update(
        id="r",
        backend="vllm",
        backend_version="0.24.0",
        model_path="meta-llama/Llama-3.1-8B-Instruct",
        system="h100_sxm",
        mode="agg",
        isl="1024",
        osl="128",
        batch_size="8",
        tp_size="1",
        pp_size="1",
        attention_dp_size="1",
        silicon_tpot_ms="8.0",
    )
    base.update({k: str(v) for k, v in kw.items()})
    return base


def test_precisions_are_mapped_as_documented():
    llama = get_model("llama-3.1-8b")
    tensor = {"fp8_scaling": "per-tensor"}
    assert precision_for(_row(), llama) == Precision("bf16", "bf16", "bf16", **tensor)
    block = precision_for(_row(gemm_quant_mode="fp8_block"), llama)
    assert block == Precision("fp8", "fp8", "bf16", fp8_scaling="block")
    assert precision_for(_row(gemm_quant_mode="nvfp4"), llama) == Precision("nvfp4", "fp4", "bf16", **tensor)
    kimi = get_model("kimi-k2")
    assert precision_for(_row(gemm_quant_mode="int4_wo", moe_quant_mode="int4_wo"), kimi) == Precision(
        "int4", "bf16", "bf16", expert_weight_dtype="int4", **tensor
    )
    # A block-scaled checkpoint (model_db's fp8_checkpoint) runs block kernels whatever its column says;
    # the bf16 repository quantized at load (vLLM's --quantization fp8) scales per tensor.
    qwen = get_model("qwen3-235b-a22b")
    fp8 = {"gemm_quant_mode": "fp8", "moe_quant_mode": "fp8"}
    assert precision_for(_row(model_path="Qwen/Qwen3-235B-A22B-FP8", **fp8), qwen).fp8_scaling == "block"
    assert precision_for(_row(model_path="Qwen/Qwen3-32B", **fp8), get_model("qwen3-32b")).fp8_scaling == "per-tensor"
    oss = get_model("gpt-oss-120b")
    assert precision_for(_row(gemm_quant_mode="nvfp4"), oss).expert_weight_dtype == "mxfp4"


def test_rows_left_out_say_why():
    assert why_not_scored(_row()) is None
    assert "disaggregated" in why_not_scored(_row(mode="disagg"))
    assert why_not_scored(_row(model_path="MiniMaxAI/MiniMax-M2.5")) == "model not in model_db"
    # Attention data parallelism runs as one of its ranks where the row holds together (roofline.sample_ranks).
    assert why_not_scored(_row(attention_dp_size="4")) is None
    assert "scale-up domain of 8" in why_not_scored(_row(attention_dp_size="16"))


def test_a_run_whose_weights_are_more_than_its_gpus_memory_is_not_scored():
    """Qwen3-235B-A22B in fp8 is 220 GiB of weights, more than one H200's 140 GiB: a row recording
    it at TP 1 did not run so (validate --load cannot simulate it either). DeepSeek-R1 in fp8 at TP 4
    on B200s fits their memory but leaves no KV cache at the memory model's default 0.9: its
    engine's own fraction is not recorded, so it is scored."""
    from roofline.validate import score_rows

    fp8 = {"gemm_quant_mode": "fp8", "moe_quant_mode": "fp8", "model_path": "Qwen/Qwen3-235B-A22B-FP8"}
    one = _row(system="h200_sxm", tp_size="1", **fp8)
    four = _row(id="s", system="h200_sxm", tp_size="4", **fp8)
    dsr1 = _row(id="d", system="b200_sxm", tp_size="4", model_path="deepseek-ai/DeepSeek-R1", backend="sglang",
                gemm_quant_mode="fp8", moe_quant_mode="fp8_block", backend_version="0.5.9")  # fmt: skip
    scored, skipped = score_rows([one, four, dsr1], tables=False)
    assert [r["id"] for r in scored] == ["s", "d"]
    why = "Qwen3 235B-A22B's weights at TP 1 (220 GiB a GPU) are more than the 140 GiB of one NVIDIA H200 SXM 141GB"
    assert skipped == {f"{why}: not the run its row records": 1}


def test_datasheet_column_is_the_serving_plans_tpot():
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    plan = serving_sweep(model, [hw], Traffic(prompt_len=1024, output_len=128), batches=np.array([8]))
    pred = predict_tpot(model, "h100-sxm", Precision(), 1, 1024, 128, 8)
    assert pred.datasheet_s == pytest.approx(float(plan.tpot_s[0, 0]), rel=1e-9)
    assert pred.tables_s is None


shipped = pytest.mark.skipif(not (store.SHIPPED_DIR / "manifest.json").exists(), reason="no shipped kernel_db")


@shipped
def test_tables_column_sets_most_of_a_dense_step():
    from roofline.tables import TablePredictor
    from roofline.tables.source import KernelTables

    model = get_model("llama-3.1-8b")
    tables = KernelTables(TablePredictor.open("h100-sxm", "vllm"))
    pred = predict_tpot(model, "h100-sxm", Precision(), 1, 1024, 128, 8, tables)
    # Measured kernels run below the datasheet roofs: the tables' step is slower, within 2x.
    assert pred.datasheet_s < pred.tables_s < 2 * pred.datasheet_s
    assert pred.table_share > 0.8
    assert any("vLLM 0.24.0 kernels, h100-sxm" in label for label in pred.labels)


@shipped
def test_validate_command_on_a_tiny_sample(tmp_path, capsys):
    path = tmp_path / "sample.csv.gz"
    rows = [
        _row(id="a", batch_size=8, silicon_tpot_ms=8.0),
        _row(id="b", batch_size=16, silicon_tpot_ms=9.0),
        _row(id="c", mode="disagg"),
        _row(id="d", model_path="MiniMaxAI/MiniMax-M2.5"),
    ]
    with gzip.open(path, "wt", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    report = validate(path)
    assert report["overall"]["runs"] == 2
    assert report["skipped"] == {"disaggregated run (needs the serving simulation)": 1, "model not in model_db": 1}
    (group,) = report["groups"]
    assert (group["model"], group["device"], group["engine"], group["runs"]) == ("llama-3.1-8b", "h100-sxm", "vllm", 2)
    a = report["results"][0]
    assert group["datasheet"]["median_abs_error"] >= 0
    assert a["tables_tpot_ms"] > a["datasheet_tpot_ms"]

    out_csv = tmp_path / "runs.csv"
    assert main(["validate", "--sample", str(path), "--json", "--csv", str(out_csv)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["overall"]["runs"] == 2 and "TTFT" in data["not_scored"]
    with open(out_csv) as f:
        assert [r["id"] for r in csv.DictReader(f)] == ["a", "b"]
    assert main(["validate", "--sample", str(path), "--no-tables"]) == 0
    assert "2 runs scored" in capsys.readouterr().out


@shipped
def test_explain_gives_every_op_its_source(tmp_path):
    from roofline.validate import load_silicon_sample
    from roofline.validate_explain import explain, render_explain

    path = tmp_path / "sample.csv.gz"
    with gzip.open(path, "wt", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerow(_row(id="one", tp_size=2))
    result = explain("one", path)
    names = [op["name"] for op in result["ops"]]
    assert "attention (fused decode)" in names and "all-reduce (attention)" in names
    total = sum(op["tables_s"] for op in result["ops"])
    assert total * 1e3 == pytest.approx(result["tables_tpot_ms"], rel=1e-9)
    sources = {op["name"]: op["source"] for op in result["ops"]}
    assert sources["input norm"].startswith("datasheet")
    assert "vLLM 0.24.0 kernels" in sources["all-reduce (attention)"]
    assert "one: llama-3.1-8b on h100-sxm" in render_explain(result)
    assert "KV cache: bf16 (the engines' default; the source records none)" in render_explain(result)
    assert "Scheduler (validate --load): the engine's defaults (the source records none)" in render_explain(result)
    # The first token: the run under its load (validate --load's figures) beside its prompts alone.
    from roofline.validate_load import simulate_row

    row = next(r for r in load_silicon_sample(path) if r["id"] == "one")
    loaded, t = simulate_row(row, {}), result["ttft"]
    assert (t["datasheet_ms"], t["tables_ms"]) == (loaded["datasheet_ttft_ms"], loaded["tables_ttft_ms"])
    assert t["one_client_tables_ms"] <= t["tables_ms"] and t["one_client_datasheet_ms"] <= t["datasheet_ms"]
    assert f"TTFT measured {loaded['measured_ttft_ms']:.1f} ms; simulated at its" in render_explain(result)
    with pytest.raises(ValueError, match="no run"):
        explain("missing", path)


@pytest.mark.parametrize("run_id", ["", "   "])
def test_an_empty_run_id_to_explain_is_refused_not_read_as_no_option(run_id, capsys):
    from roofline.cli import main

    assert main(["validate", "--explain", run_id]) == 2
    assert "--explain: expected a run id" in capsys.readouterr().err


def test_validate_load_simulates_runs_at_their_concurrency(tmp_path, capsys):
    """A few runs of the sample through the closed-loop simulation: both metrics scored, a
    simulated TTFT above an empty server's one prefill (the clients' prompts queue together)."""
    from roofline.cli import main
    from roofline.validate import load_silicon_sample, why_not_scored
    from roofline.validate_load import simulate_row

    rows = [r for r in load_silicon_sample() if why_not_scored(r) is None and r["model_path"].endswith("8B-Instruct")]
    row = next(r for r in rows if float(r["batch_size"]) >= 8)
    result = simulate_row(row, {})
    assert result["requests"] == 10 * result["concurrency"]
    for column in ("datasheet", "tables"):
        assert result[f"{column}_ttft_ms"] > 0 and result[f"{column}_tpot_ms"] > 0
    # The engine's measured kernels are slower than the datasheet's ideal ones.
    assert result["tables_tpot_ms"] > result["datasheet_tpot_ms"]
    csv_path = tmp_path / "load.csv"
    assert main(["validate", "--load", "--every", "400", "--json", "--csv", str(csv_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["overall"]["runs"] >= 3
    assert {"datasheet_ttft", "tables_ttft", "datasheet_tpot", "tables_tpot"} <= set(report["overall"])
    assert csv_path.read_text().startswith("id,model,device,engine")
    # The test set again by the client that ran each run: its runs, every one once.
    by_client = report["test_set_by_client"]
    assert sum(s["runs"] for s in by_client.values()) == report["test_set"]["runs"]
    assert all(
        sum(r["client"] == name for r in report["results"] if not r["host_fit_split"]) == s["runs"]
        for name, s in by_client.items()
    )


def test_validate_load_scores_under_an_fp8_kv_cache_when_asked(capsys):
    """The sample does not record the KV format: --kv-dtype fp8 rescores under that assumption.
    Half the cache bytes per token: a long-context run's ideal decode step reads less, and its
    cache holds twice the tokens."""
    from roofline.cli import main
    from roofline.validate import load_silicon_sample, why_not_scored
    from roofline.validate_load import simulate_row

    rows = [r for r in load_silicon_sample() if why_not_scored(r) is None and r["model_path"].endswith("8B-Instruct")]
    row = next(r for r in rows if r["isl"] == "4096" and float(r["batch_size"]) >= 16)
    bf16, fp8 = simulate_row(row, {}, tables=False), simulate_row(row, {}, tables=False, kv_dtype="fp8")
    assert fp8["datasheet_tpot_ms"] < bf16["datasheet_tpot_ms"]
    assert main(["validate", "--load", "--every", "400", "--kv-dtype", "fp8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_dtype"] == "fp8"
    for args in ([], ["--memory"], ["--load", "--report", "r.json"]):
        assert main(["validate", *args, "--kv-dtype", "fp8"]) != 0
        assert "--kv-dtype: only with --load, not with --memory, --report" in capsys.readouterr().err


def test_validate_load_draws_lengths_as_a_benchmark_clients_range_ratio_when_asked(capsys):
    """--range-ratio 0.8: every length uniform in [0.8 L, L], as vLLM's benchmark client draws them
    with --random-range-ratio 0.8 (the sample records fixed lengths)."""
    from roofline.cli import main
    from roofline.validate import load_silicon_sample, why_not_scored
    from roofline.validate_load import score_load, simulate_row

    rows = [r for r in load_silicon_sample() if why_not_scored(r) is None and r["model_path"].endswith("8B-Instruct")]
    row = next(r for r in rows if float(r["batch_size"]) >= 16)
    fixed, drawn = simulate_row(row, {}, tables=False), simulate_row(row, {}, tables=False, range_ratio=0.8)
    assert fixed["datasheet_ttft_ms"] != drawn["datasheet_ttft_ms"]
    # Shorter prompts on average (0.9 L) and clients that drift apart: the first token comes sooner.
    assert drawn["datasheet_ttft_ms"] < fixed["datasheet_ttft_ms"]
    with pytest.raises(ValueError, match="range ratio"):
        score_load(rows[:1], range_ratio=0.0)
    assert main(["validate", "--load", "--every", "400", "--range-ratio", "0.8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["range_ratio"] == 0.8
    for bad in ("1.5", "nan", "-0.2"):
        assert main(["validate", "--load", "--range-ratio", bad]) != 0
        assert "--range-ratio: expected a number in (0, 1]" in capsys.readouterr().err


def test_a_run_that_does_not_run_as_configured_says_why_with_its_numbers():
    """The report groups such runs by reason, numbers as N; one run explained keeps its own (they had
    read "tp=N does not divide llama-3.1-8b's N attention heads"), and a length that is not a whole
    number is named by its column (not Python's "invalid literal for int() with base N")."""
    from roofline.validate import load_silicon_sample, score_rows, why_not_scored

    row = next(
        r for r in load_silicon_sample() if not why_not_scored(r) and r["model_path"].endswith("Llama-3.1-8B-Instruct")
    )
    odd = {**row, "tp_size": "3"}
    _, grouped = score_rows([odd], tables=False)
    _, exact = score_rows([odd], tables=False, exact=True)
    (reason,) = grouped
    assert "tp=N does not divide" in reason and "N attention heads" in reason
    (said,) = exact
    assert "tp=3 does not divide" in said and "32 attention heads" in said
    _, bad = score_rows([{**row, "isl": "1e12"}], tables=False, exact=True)
    assert list(bad) == [
        "does not run as configured: isl: expected a whole number of tokens from 1 to 16,777,216, got '1e12'"
    ]


def test_a_p90_of_fewer_than_ten_runs_is_printed_as_a_dash():
    """One run's error had been printed as its own p90 (deepseek-r1 on GB200: 73%/73%/-73%)."""
    from roofline.accuracy import Score, p90_shown
    from roofline.validate_render import render

    assert [p90_shown(0.734, n) for n in (1, 9, 10, None)] == ["–", "–", "73%", "73%"]
    assert Score(1, 0.5, 0.5, -0.5).words() == "median 50% off, 50% too fast"
    assert Score(10, 0.5, 0.9, -0.5).words() == "median 50% off (p90 90%), 50% too fast"
    e = {"median_abs_error": 0.73, "p90_abs_error": 0.73, "bias": -0.73}
    group = {"model": "deepseek-r1", "device": "gb200", "engine": "trtllm", "runs": 1, "datasheet": e, "tables": e}
    totals = {"runs": 1923, "datasheet": e, "tables": e}
    report = {"metric": "TPOT", "overall": totals, "not_scored": "none", "groups": [group]}
    text = render(report | {"host_fit_split": totals, "test_set": totals, "skipped": {}})
    lines = text.splitlines()
    assert "73%/–/-73%" in next(line for line in lines if line.startswith("deepseek-r1"))
    assert "73%/73%/-73%" in next(line for line in lines if line.startswith("all"))
