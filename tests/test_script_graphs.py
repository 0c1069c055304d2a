"""Which steps replay a CUDA graph, as a run's benchmark script set it: vLLM's sequence cap, its
largest captured step and its cudagraph_mode; TensorRT-LLM's piecewise graphs (scripts worked by
hand, then InferenceX's own scripts for real rows)."""

from __future__ import annotations

from roofline.script_setup import digest, evaluate

VLLM = """
FUSION_FLAG='{'\\
'"pass_config": {"enable_noop": true},'\\
'"cudagraph_mode": "FULL_DECODE_ONLY",'\\
'"splitting_ops": []'\\
'}'
cat > config.yaml << EOF
compilation-config: '$FUSION_FLAG'
max-num-batched-tokens: 8192
EOF
if [[ "$ISL" == "1024" ]]; then
  CAPTURE=2048
else
  CAPTURE=$(( CONC * 2 ))
fi
vllm serve $MODEL --max-num-seqs=$CONC --max-cudagraph-capture-size "$CAPTURE" --config config.yaml
"""

TRT = """
PIECEWISE_CUDA_GRAPHS="false"
if [[ "$ISL" == "1024" && "$OSL" == "1024" ]]; then
    if [[ $CONC -ge 64 ]]; then
        PIECEWISE_CUDA_GRAPHS="true"
    fi
fi
MAX_NUM_TOKENS=$(( ($CONC+$ISL+64+63)/64*64 ))
MAX_NUM_TOKENS=$(( MAX_NUM_TOKENS > 8192 ? MAX_NUM_TOKENS : 8192 ))
if [[ "$PIECEWISE_CUDA_GRAPHS" == "true" ]]; then
    cat << EOF >> extra.yml
torch_compile_config:
    enable_piecewise_cuda_graph: true
EOF
fi
trtllm-serve $MODEL --max_num_tokens=$MAX_NUM_TOKENS --extra_llm_api_options=extra.yml
"""


def test_vllms_graph_settings_are_read_for_a_runs_variables():
    lines = digest(VLLM)
    got = evaluate(lines, {"ISL": "1024", "OSL": "1024", "CONC": "4"})
    # The mode sits in a JSON string split over a variable's quoted lines; the capture size is set
    # through a variable the script assigns in a branch.
    assert got["cudagraph_mode"] == "FULL_DECODE_ONLY"
    assert (got["max_num_seqs"], got["cudagraph_capture_size"]) == ("4", "2048")  # "$CAPTURE" followed
    # 2 x 4 = 8 for 8k prompts; straight from the flag too.
    assert evaluate(lines, {"ISL": "8192", "OSL": "1024", "CONC": "4"})["cudagraph_capture_size"] == "8"
    direct = digest('vllm serve --max-num-seqs 16 --max-cudagraph-capture-size "$((CONC * 2))"\n')
    assert evaluate(direct, {"CONC": "16"}) == {"max_num_seqs": "16", "cudagraph_capture_size": "32"}
    # YAML keys, as InferenceX's gpt-oss scripts write them (cuda-graph-sizes before vLLM 0.11).
    yaml = digest("cat > config.yaml << EOF\ncuda-graph-sizes: 2048\nmax-num-batched-tokens: 8192\nEOF\n")
    assert evaluate(yaml, {})["cudagraph_capture_size"] == "2048"
    # A mode kept in a one-line variable is not followed to where it goes.
    kept = digest('FLAG=\'{"cudagraph_mode": "NONE"}\'\nvllm serve -O "$FLAG"\n')
    assert evaluate(kept, {}) == {"cudagraph_mode": None}


def test_tensorrt_llms_piecewise_graphs_follow_the_scripts_branches():
    lines = digest(TRT)
    on = evaluate(lines, {"ISL": "1024", "OSL": "1024", "CONC": "64"})
    assert on == {"enable_piecewise_cuda_graph": "true", "max_num_tokens": "8192"}
    off = evaluate(lines, {"ISL": "1024", "OSL": "1024", "CONC": "32"})
    assert "enable_piecewise_cuda_graph" not in off
    # (64 + 8192 + 127) // 64 * 64 = 8320 tokens, no piecewise graphs for 8k prompts.
    assert evaluate(lines, {"ISL": "8192", "OSL": "1024", "CONC": "64"}) == {"max_num_tokens": "8320"}


def _row(model, system, backend, precision, tp, conc, day, isl=1024, osl=1024, ep=None):
    row = {
        "model_path": model,
        "system": system,
        "backend": backend,
        "precision": precision,
        "mode": "agg",
        "tp_size": str(tp),
        "batch_size": str(conc),
        "isl": str(isl),
        "osl": str(osl),
        "silicon_data_source": f"db-dump/2026-04-27; measured={day}T00:00:00.000Z",
    }
    return row | ({"moe_ep_size": str(ep)} if ep else {})


def test_an_inferencex_runs_graphs_are_the_ones_its_scripts_set():
    from roofline.silicon_sample import documented_setup

    # gpt-oss-120b on H200 with vLLM (benchmarks/single_node/gptoss_fp4_h200.sh, 2026-03-27):
    # --max-num-seqs $CONC and max-cudagraph-capture-size 2048.
    oss = documented_setup(_row("openai/gpt-oss-120b", "h200_sxm", "vllm", "fp4", 4, 8, "2026-04-06"))
    assert (oss.max_num_seqs, oss.prompt_graph_tokens) == (8, 2048)
    assert "at most 8 sequences" in oss.words() and "CUDA graphs for steps of up to 2,048 tokens" in oss.words()
    # Llama 3.1 70B FP8 on B200 with vLLM (70b_fp8_b200_docker.sh): FULL_DECODE_ONLY, 512 sequences.
    llama = documented_setup(_row("meta-llama/Llama-3.1-70B", "b200_sxm", "vllm", "fp8", 4, 8, "2025-10-29"))
    assert (llama.max_num_seqs, llama.prompt_graph_tokens) == (512, 0)
    # Kimi K2.5 on H200 (kimik2.5_int4_h200.sh): --max-num-seqs $CONC, vLLM's default graphs.
    kimi = documented_setup(_row("moonshotai/Kimi-K2.5", "h200_sxm", "vllm", "int4", 8, 16, "2026-03-27"))
    assert (kimi.max_num_seqs, kimi.prompt_graph_tokens) == (16, None)
    # DeepSeek-R1 FP8 on B200 with TensorRT-LLM (dsr1_fp8_b200_trt.sh, 2026-01-29): piecewise graphs
    # for 1k/1k from 64 clients, captured up to the token budget; none at 32.
    day = "2026-02-05"
    on = documented_setup(_row("deepseek-ai/DeepSeek-R1", "b200_sxm", "trtllm", "fp8", 8, 64, day, ep=1))
    off = documented_setup(_row("deepseek-ai/DeepSeek-R1", "b200_sxm", "trtllm", "fp8", 8, 32, day, ep=1))
    assert (on.token_budget, on.prompt_graph_tokens) == (8192, 8192)
    assert off.prompt_graph_tokens is None and off.max_num_seqs is None  # TensorRT-LLM has no such cap read


def test_the_simulated_run_replays_the_graphs_its_script_set(monkeypatch):
    """A 1,024-token prompt step fits gpt-oss's 2,048-token graphs, not vLLM's default 512: with a
    host slow enough (1 ms a launch) that eager dispatch outlasts the kernels, the script's graphs
    give the shorter TTFT."""
    from dataclasses import replace

    import roofline.validate_load as vl
    from roofline.settings import Settings
    from roofline.silicon_sample import documented_setup

    row = _row("openai/gpt-oss-120b", "h200_sxm", "vllm", "fp4", 8, 4, "2026-04-06")
    row |= {"id": "oss", "silicon_ttft_ms": "40", "silicon_tpot_ms": "4", "gemm_quant_mode": "", "moe_quant_mode": ""}
    slow_host = Settings(launch_overhead_s=1e-3)
    read = vl.simulate_row(row, {}, slow_host)
    assert "CUDA graphs for steps of up to 2,048 tokens" in read["scheduler"]
    script = documented_setup(row)
    monkeypatch.setattr(vl, "documented_setup", lambda r: replace(script, prompt_graph_tokens=None, max_num_seqs=None))
    engine_default = vl.simulate_row(row, {}, slow_host)
    assert read["tables_ttft_ms"] < 0.5 * engine_default["tables_ttft_ms"]
    assert read["datasheet_ttft_ms"] == engine_default["datasheet_ttft_ms"]  # the ideal engine has no host


def test_a_scripts_sequence_cap_holds_the_other_requests_back(monkeypatch):
    """vLLM's --max-num-seqs below the clients: the rest wait in the server's queue, so the mean
    TTFT grows and the decode batch (TPOT) shrinks. SGLang's --max-running-requests is not read:
    runs whose script sets 128 measured what only a larger batch gives (README)."""
    from dataclasses import replace

    import roofline.validate_load as vl
    from roofline.silicon_sample import documented_setup

    row = _row("openai/gpt-oss-120b", "h200_sxm", "vllm", "fp4", 8, 8, "2026-04-06")
    row |= {"id": "oss", "silicon_ttft_ms": "40", "silicon_tpot_ms": "4", "gemm_quant_mode": "", "moe_quant_mode": ""}
    script = documented_setup(row)
    assert script.max_num_seqs == 8
    free = vl.simulate_row(row, {}, tables=False)
    monkeypatch.setattr(vl, "documented_setup", lambda r: replace(script, max_num_seqs=2))
    capped = vl.simulate_row(row, {}, tables=False)
    assert capped["datasheet_ttft_ms"] > 2 * free["datasheet_ttft_ms"]
    assert capped["datasheet_tpot_ms"] < free["datasheet_tpot_ms"]
    sglang = _row("deepseek-ai/DeepSeek-R1", "b200_sxm", "sglang", "fp8", 8, 256, "2026-03-25")
    assert documented_setup(sglang).max_num_seqs is None
