"""validate --load on the InferenceX runs: each run simulated with the client, the warm-up, the KV
format and the parallelism its source documents, read off its date and its benchmark script."""

from __future__ import annotations

from roofline.validate import why_not_scored


def test_each_run_is_simulated_with_the_client_its_source_documents():
    """InferenceX's exports (a dated source_file or a db-dump) ran vLLM's benchmark_serving.py with
    --random-range-ratio 0.8 and CONC x 10 prompts; a source that names no client is read as the row
    says (fixed lengths). The choice follows the row's source, never its measured figures."""
    from roofline.silicon_sample import INFERENCEX_CLIENT, RECORDED_CLIENT, benchmark_client
    from roofline.validate import load_silicon_sample
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
    from roofline.validate import load_silicon_sample
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
