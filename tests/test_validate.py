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


def test_each_run_is_simulated_with_the_client_its_source_documents():
    """InferenceX's exports (a dated source_file or a db-dump) ran vLLM's benchmark_serving.py with
    --random-range-ratio 0.8 and CONC x 10 prompts; a source that names no client is read as the row
    says (fixed lengths). The choice follows the row's source, never its measured figures."""
    from roofline.silicon_sample import INFERENCEX_CLIENT, RECORDED_CLIENT, benchmark_client
    from roofline.validate import load_silicon_sample, why_not_scored
    from roofline.validate_load import simulate_row

    assert (
        benchmark_client({"silicon_data_source": "source_file=2026-04-06.csv; model=DeepSeek-R1"}) is INFERENCEX_CLIENT
    )
    assert benchmark_client({"silicon_data_source": "db-dump/2026-04-27; config_id=733"}) is INFERENCEX_CLIENT
    local = "source_file=/Users/x/aic-auto-gap-analysis/data/h100_sxm/vllm/0.12.0/Qwen_Qwen3-32B.csv"
    assert benchmark_client({"silicon_data_source": local}) is RECORDED_CLIENT
    assert benchmark_client({}) is RECORDED_CLIENT
    rows = load_silicon_sample()
    # InferenceX's exports are exactly its fixed-sequence grid (1k/1k, 1k/8k, 8k/1k).
    grid = {(r["isl"], r["osl"]) for r in rows if benchmark_client(r) is INFERENCEX_CLIENT}
    assert grid == {("1024", "1024"), ("1024", "8192"), ("8192", "1024")}
    scored = [r for r in rows if why_not_scored(r) is None and float(r["batch_size"]) <= 8]
    ix = next(r for r in scored if benchmark_client(r) is INFERENCEX_CLIENT and r["isl"] == "1024")
    own, drawn = simulate_row(ix, {}, tables=False), simulate_row(ix, {}, tables=False, range_ratio=0.8)
    assert (own["client"], own["range_ratio"]) == (INFERENCEX_CLIENT.name, 0.8)
    assert own["requests"] == 10 * int(float(ix["batch_size"]))
    assert own["datasheet_ttft_ms"] == drawn["datasheet_ttft_ms"]  # the same draw: the same seed
    fixed = simulate_row(ix, {}, tables=False, range_ratio=1.0)
    assert fixed["range_ratio"] == 1.0 and fixed["datasheet_ttft_ms"] != own["datasheet_ttft_ms"]
    other = next(r for r in scored if benchmark_client(r) is RECORDED_CLIENT)
    assert simulate_row(other, {}, tables=False)["range_ratio"] == 1.0


def test_an_inferencex_runs_warm_up_is_read_off_its_measured_date():
    """InferenceX's client sends 2 x CONC warm-up requests before measuring since d053ae24e
    (2026-01-21 17:53 UTC), none before: a run measured on that day could be either. A run of
    another source, or one without a measured date, has no known warm-up."""
    from roofline.benchmark_clients import client_warmup, measured_date
    from roofline.validate import load_silicon_sample, why_not_scored
    from roofline.validate_load import simulate_row

    def db(day: str) -> dict[str, str]:
        return {"silicon_data_source": f"db-dump/2026-04-27; config_id=88; measured={day}T00:00:00.000Z"}

    days = ("2025-11-10", "2026-01-20", "2026-01-21", "2026-01-22", "2026-04-06")
    assert [client_warmup(db(d)) for d in days] == [0, 0, None, 2, 2]
    assert measured_date(db("2025-11-10")) == "2025-11-10"
    assert client_warmup({"silicon_data_source": "db-dump/2026-04-27; config_id=88"}) is None  # no date recorded
    local = "source_file=/x/h100_sxm/vllm/0.12.0/Qwen_Qwen3-32B.csv; measured=2026-03-01"
    assert (
        measured_date({"silicon_data_source": local}) is None and client_warmup({"silicon_data_source": local}) is None
    )
    rows = [r for r in load_silicon_sample() if why_not_scored(r) is None and float(r["batch_size"]) <= 4]
    seen = {}
    for row in rows:
        day = measured_date(row)
        key = None if day is None else day >= "2026-01-22"
        if key not in seen:
            seen[key] = simulate_row(row, {}, tables=False)["client_warmup"]
    assert seen == {None: None, False: 0, True: 2}


def test_an_inferencex_runs_kv_cache_is_the_format_its_script_set_on_the_runs_date():
    """engine_db/inferencex_kv.toml holds each InferenceX script's KV format, version by version;
    a run reads the one in effect on its measured date, and nothing where that cannot be told."""
    from roofline.silicon_sample import documented_kv_dtype, kv_dtype_for

    def row(model, system, backend, precision, day, source="source_file=2026-04-06.csv"):
        src = f"{source}; measured={day}T00:00:00Z" if day else source
        return {
            "model_path": model,
            "system": system,
            "backend": backend,
            "precision": precision,
            "silicon_data_source": src,
        }

    # Llama 3.1 70B FP8 on H100 with vLLM: the script set --kv-cache-dtype fp8 from 2025-09-23.
    kv, where = documented_kv_dtype(row("meta-llama/Llama-3.1-70B", "h100_sxm", "vllm", "fp8", "2025-10-20"))
    assert kv == "fp8" and "benchmarks/70b_fp8_h100_slurm.sh" in where and "2025-10-20" in where
    assert documented_kv_dtype(row("meta-llama/Llama-3.1-70B", "h100_sxm", "vllm", "fp8", "2025-09-13"))[0] == "bf16"
    # gpt-oss-120b on B200 with vLLM: no flag until December 2025, fp8 since.
    assert documented_kv_dtype(row("openai/gpt-oss-120b", "b200_sxm", "vllm", "fp4", "2025-11-02"))[0] == "bf16"
    assert documented_kv_dtype(row("openai/gpt-oss-120b", "b200_sxm", "vllm", "fp4", "2026-02-10"))[0] == "fp8"
    # TensorRT-LLM's kv_cache_config: fp8 for DeepSeek-R1 on H200, auto (bf16) for gpt-oss on H200.
    assert documented_kv_dtype(row("deepseek-ai/DeepSeek-R1", "h200_sxm", "trtllm", "fp8", "2026-01-15"))[0] == "fp8"
    assert documented_kv_dtype(row("openai/gpt-oss-120b", "h200_sxm", "trtllm", "fp4", "2026-01-15"))[0] == "bf16"
    # Nothing to tell: no date, a date before any script, no single-node script (GB200), another source.
    for unknown in (
        row("meta-llama/Llama-3.1-70B", "h100_sxm", "vllm", "fp8", None),
        row("meta-llama/Llama-3.1-70B", "h100_sxm", "vllm", "fp8", "2025-01-01"),
        row("deepseek-ai/DeepSeek-R1", "gb200", "trtllm", "fp4", "2026-01-15"),
        row("meta-llama/Llama-3.1-70B", "h100_sxm", "vllm", "fp8", "2025-10-20", "source_file=/x/gap.csv"),
    ):
        assert documented_kv_dtype(unknown) is None and kv_dtype_for(unknown) == "bf16"


def test_the_kv_format_reader_of_benchmark_scripts_on_hand_written_scripts():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "inferencex_kv.py"
    spec = importlib.util.spec_from_file_location("inferencex_kv", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.kv_format("vllm serve m --kv-cache-dtype fp8 --tp 8", "vllm") == "fp8"
    assert mod.kv_format("cat > c.yaml << EOF\nkv-cache-dtype: fp8\nEOF\nvllm serve m --config c.yaml", "vllm") == "fp8"
    assert mod.kv_format("vllm serve m --tp 8", "vllm") == "bf16"
    sglang = "python3 -m sglang.launch_server --kv-cache-dtype fp8_e4m3 --tp 8"
    assert mod.kv_format(sglang, "sglang") == "fp8"
    # Two launches, one of them without the flag: the script's branches disagree.
    assert mod.kv_format(sglang + "\nelse\npython3 -m sglang.launch_server --tp 8", "sglang") == "mixed"
    trt = "kv_cache_config:\n  enable_block_reuse: false\n  dtype: fp8\n  free_gpu_memory_fraction: 0.8\ntrtllm-serve m"
    assert mod.kv_format(trt, "trtllm") == "fp8"
    assert mod.kv_format(trt.replace("fp8", "auto"), "trtllm") == "bf16"
    assert mod.framework("trtllm-serve m", True) == "trtllm"
    assert mod.framework("vllm serve m", False) == "vllm" and mod.framework("vllm serve m", True) is None


def test_a_runs_kv_cache_does_not_depend_on_the_runs_simulated_before_it():
    """The KV budget depends on the token budget (the activation workspace): two runs of one model,
    device, precision and TP with different budgets keep their own blocks in a shared cache."""
    from roofline.silicon_sample import documented_setup, load_silicon_sample
    from roofline.validate_load import simulate_row

    rows = [
        r
        for r in load_silicon_sample()
        if r.get("model_path") == "meta-llama/Llama-3.1-70B"
        and r.get("system") == "h200_sxm"
        and r.get("tp_size") in ("1", "1.0")
        and r.get("batch_size") in ("4", "4.0")
        and r.get("osl") == "1024"
    ]
    vllm = next(r for r in rows if r["backend"] == "vllm")
    trt = next(r for r in rows if r["backend"] == "trtllm" and documented_setup(r).token_budget == 16384)
    alone = simulate_row(trt, {}, tables=False)
    cache: dict = {}
    simulate_row(vllm, cache, tables=False)
    assert simulate_row(trt, cache, tables=False) == alone
    blocks = {k[-1].max_batched_tokens: v for k, v in cache.items() if isinstance(k, tuple) and k[0] == "kv"}
    assert set(blocks) == {8192, 16384} and blocks[8192] > blocks[16384]


def test_a_row_that_records_tp_times_ep_is_read_as_its_config_ran_it():
    """InferenceX's config ``dsr1-fp4-b300-sglang: { tp: 4, ep: 4 }`` is a row with tp_size 16,
    moe_tp_size 4, moe_ep_size 4 in some exports, where its 2026-03-25 export writes 4, 1, 4: TP 16
    on an 8-GPU board is TP x EP."""
    from roofline.silicon_sample import _config_parallelism

    def row(source, tp, moe_tp, ep, adp="1.0", system="b300_sxm"):
        keys = ("tp_size", "moe_tp_size", "moe_ep_size", "attention_dp_size")
        return {"silicon_data_source": source, "system": system, **dict(zip(keys, (tp, moe_tp, ep, adp)))}

    dump = "db-dump/2026-04-27; config_id=717; measured=2026-04-17T00:00:00.000Z"
    export = "source_file=2026-04-06.csv; measured=2025-11-10T00:00:00.000Z"
    read = _config_parallelism(row(dump, "16.0", "4.0", "4.0"))
    assert (read["tp_size"], read["moe_tp_size"], read["moe_ep_size"]) == ("4", "1", "4.0")
    assert read["recorded_parallelism"] == "tp_size 16, moe_tp_size 4, moe_ep_size 4"
    assert _config_parallelism(row(export, "64.0", "8.0", "8.0", system="h200_sxm"))["tp_size"] == "8"
    # Left as recorded: the convention's own rows, no EP, attention data parallel, figures that do
    # not multiply, a TP one NVLink domain holds (GB200's 72), another source.
    for untouched in (
        row(export, "4.0", "1.0", "4.0"),
        row(dump, "4.0", "2.0", "2.0"),
        row(dump, "8.0", "8.0", "1.0"),
        row(dump, "1.0", "8.0", "8.0", adp="64.0"),
        row(dump, "12.0", "4.0", "4.0"),
        row(export, "16.0", "4.0", "4.0", system="gb200"),
        row("aiconfigurator sweep", "16.0", "4.0", "4.0"),
    ):
        assert _config_parallelism(untouched) == untouched
