"""Which kernels run a MoE model's experts: the converter keeps each kernel family apart, a server's
MoE backend setting picks one, and a kernel the engine did not time is read from another engine's
tables on the same device, labelled so."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import roofline.tables.store as store
from roofline.roofs import kernel_tables, moe_kernel_of_backend
from roofline.script_setup import digest, evaluate
from roofline.settings import Settings
from roofline.tables.convert import moe_kernel
from roofline.tables.grid import LogGrid
from tests.table_fixtures import GEMM_1024, clear_caches, install_converted, write_engine


@pytest.mark.parametrize(
    ("source", "system", "family"),
    [
        ("moe_torch_flow_min_latency", "b200_sxm", "trtllm-gen"),  # the collector's "trtllm gen"
        ("vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic", "b200_sxm", "trtllm-gen"),
        ("sglang_flashinfer_trtllm_moe", "b200_sxm", "trtllm-gen"),
        ("deepgemm", "b200_sxm", "deepgemm"),
        ("moe_torch_flow_cutlass", "b200_sxm", "cutlass"),
        ("moe_torch_flow_nongated", "b200_sxm", "cutlass"),  # non-gated experts on TensorRT-LLM's CUTLASS
        ("vllm_modeloptfp8moe_flashinfer_cutlass_flashinferexperts", "h100_sxm", "cutlass"),
        ("vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts", "h100_sxm", "marlin"),
        ("sglang_fused_moe_triton", "h200_sxm", "triton"),
        ("vllm_fused_moe", "b200_sxm", "triton"),
        # TensorRT-LLM's plain torch flow (gpt-oss's experts): TRTLLM-gen on Blackwell, Triton on Hopper.
        ("moe_torch_flow", "b200_sxm", "trtllm-gen"),
        ("moe_torch_flow", "h200_sxm", "triton"),
        ("moe_torch_flow", "a100_sxm", "default"),
        ("vllm_xpu_moe", "b60", "default"),
    ],
)
def test_kernel_families_of_the_database_names(source, system, family):
    assert moe_kernel(source, system) == family


def test_the_converter_and_the_setting_name_the_same_families():
    from roofline.roofs import MOE_KERNEL_WORDS, MOE_KERNELS
    from roofline.tables.convert import MOE_KERNEL_MARKS

    assert [f for f, _ in MOE_KERNEL_MARKS] == list(MOE_KERNELS[1:]) == list(MOE_KERNEL_WORDS)


def test_the_engine_note_says_the_kernels_were_set_not_that_they_ran():
    from roofline.roofs import engine_note

    note = engine_note("trtllm", "b200", "NVIDIA B200", moe_kernel="marlin")
    assert note.endswith("; MoE kernels set to Marlin (each MoE op says where its time is read)")
    assert "MoE" not in engine_note("trtllm", "b200", "NVIDIA B200")
    assert "MoE" not in engine_note("ideal", "b200", "NVIDIA B200", moe_kernel="marlin")  # the datasheet has none


@pytest.mark.parametrize(
    ("backend", "family"),
    [
        ("TRTLLM", "trtllm-gen"),
        ("flashinfer_trtllm", "trtllm-gen"),
        ("DEEPGEMM", "deepgemm"),
        ("deep_gemm", "deepgemm"),
        ("CUTLASS", "cutlass"),
        ("triton", "triton"),
        ("triton_kernel", "triton"),
        ("WIDEEP", None),
        ("flashinfer_cutedsl", None),
        (None, None),
    ],
)
def test_server_backend_names(backend, family):
    assert moe_kernel_of_backend(backend) == family


def test_duplicate_rows_read_as_the_fastest():
    # Two kernels at m = 4 (10 and 20 ns), one at m = 16 (40 ns): the grid holds 10 and 40.
    grid = LogGrid.from_rows([np.array([4, 4, 16])], np.array([20e-9, 10e-9, 40e-9]))
    assert np.exp(grid.log_latency) == pytest.approx([10e-9, 40e-9])
    # m = 8 halfway in log: sqrt(10 x 40) = 20 ns.
    assert math.exp(grid((8.0,))[0]) == pytest.approx(20e-9)


def test_script_moe_backend_is_read_from_the_moe_config_block_only():
    script = "\n".join(
        [
            'MOE_BACKEND="TRTLLM"',
            'if [[ "$ISL" == "1024" && "$OSL" == "8192" ]]; then',
            "    if [[ $CONC -ge 256 ]]; then",
            '        MOE_BACKEND="DEEPGEMM"',
            "    fi",
            "fi",
            "cat > cfg.yml << EOF",
            "cache_transceiver_config:",
            "    backend: UCX",
            "moe_config:",
            "    backend: $MOE_BACKEND",
            "kv_cache_config:",
            "    dtype: fp8",
            "EOF",
            "trtllm-serve $MODEL --backend=pytorch --extra_llm_api_options=cfg.yml &",
            "run_benchmark_serving --backend openai",
        ]
    )
    lines = digest(script)
    assert "moe_backend: $MOE_BACKEND" in lines and not any("UCX" in line for line in lines)
    # Other keys of the block (its own max_num_tokens, a nested backend) are not top-level settings,
    # and a comment after a key is not its value.
    nested = (
        "moe_config:  # experts\n  max_num_tokens: 4096\n  load_balancer:\n    backend: X\n  backend: CUTLASS  # x\n"
    )
    assert evaluate(digest(nested), {}) == {"moe_backend": "CUTLASS"}
    assert evaluate(lines, {"ISL": "1024", "OSL": "8192", "CONC": "32"}) == {"moe_backend": "TRTLLM"}
    assert evaluate(lines, {"ISL": "1024", "OSL": "8192", "CONC": "256"}) == {"moe_backend": "DEEPGEMM"}
    assert evaluate(lines, {"ISL": "8192", "OSL": "1024", "CONC": "256"}) == {"moe_backend": "TRTLLM"}
    sglang = digest("python3 -m sglang.launch_server --tp 8 --moe-runner-backend flashinfer_trtllm --port 8888")
    assert evaluate(sglang, {}) == {"moe_backend": "flashinfer_trtllm"}


def test_sglangs_older_flags_set_the_experts_by_being_there():
    """InferenceX's DeepSeek-R1 FP4 B200 script of September 2025 (``benchmarks/dsr1_fp4_b200_docker.sh``
    at 27f29acbe): ``--enable-ep-moe`` splits the experts over the TP group, and
    ``--enable-flashinfer-trtllm-moe`` is the flag form of ``--moe-runner-backend flashinfer_trtllm``."""
    script = (
        "python3 -m sglang.launch_server --model-path $MODEL --tensor-parallel-size=$TP \\\n"
        "--enable-ep-moe --quantization modelopt_fp4 --enable-flashinfer-allreduce-fusion \\\n"
        "--enable-symm-mem --disable-radix-cache --attention-backend trtllm_mla --enable-flashinfer-trtllm-moe "
        "--stream-interval 10\n"
    )
    assert evaluate(digest(script), {"TP": "4"}) == {"ep_size": "4", "moe_backend": "flashinfer_trtllm"}
    assert evaluate(digest(script), {}) == {"ep_size": None, "moe_backend": "flashinfer_trtllm"}  # TP unknown
    # A flag kept in a variable is not followed; a longer flag that starts the same is another flag.
    assert evaluate(digest('EXTRA="--enable-ep-moe"\nsglang $EXTRA'), {"TP": "8"}) == {"ep_size": None}
    assert evaluate(digest("sglang --enable-ep-moe-x --enable-flashinfer-cutlass-moe"), {"TP": "8"}) == {
        "moe_backend": "flashinfer_cutlass"
    }
    # The flag and a value that disagree: not known.
    assert evaluate(digest("sglang --enable-ep-moe --ep-size 2"), {"TP": "8"}) == {"ep_size": None}


def test_settings_name_the_field_and_choices():
    with pytest.raises(ValueError, match="moe_kernel must be one of auto, trtllm-gen"):
        Settings(engine="trtllm", moe_kernel="TRTLLM")


def _moe_rows(kernel_source: str, ms_per_token: float, dtype: str = "fp8_block", ms: float = 0.010) -> list[dict]:
    return [
        {
            "kernel_source": kernel_source,
            "moe_dtype": dtype,
            "num_tokens": t,
            "hidden_size": 1024,
            "inter_size": 512,
            "topk": 2,
            "num_experts": 8,
            "moe_tp_size": 1,
            "moe_ep_size": 1,
            "distribution": "balanced",
            "latency": ms + ms_per_token * t,
        }
        for t in (1, 16, 256)
    ]


@pytest.fixture
def engines(tmp_path, monkeypatch):
    """One device, three engines: TensorRT-LLM timed DeepGEMM and CUTLASS (block-FP8) and CUTLASS
    (MXFP4 with bf16 activations), vLLM TRTLLM-gen (block-FP8; MXFP4 with bf16 activations), SGLang
    TRTLLM-gen (MXFP4 with MXFP8 activations, the fastest from 16 tokens)."""
    gen = "flashinfer_trtllm_moe"
    for engine, rows in [
        (
            "trtllm",
            _moe_rows("deepgemm", 0.004)
            + _moe_rows("moe_torch_flow_cutlass", 0.002)
            + _moe_rows("moe_torch_flow_cutlass", 0.003, "w4a16_mxfp4"),
        ),
        ("vllm", _moe_rows(gen, 0.001) + _moe_rows(gen, 0.0015, "w4a16_mxfp4")),
        ("sglang", _moe_rows(gen, 0.0005, "w4a8_mxfp4_mxfp8", ms=0.020)),
    ]:
        files = {("gemm", "gemm_perf.parquet"): GEMM_1024, ("moe", "moe_perf.parquet"): rows}
        write_engine(tmp_path / "pkg", "b200_sxm", engine, files)
    yield install_converted(tmp_path, monkeypatch)
    clear_caches()


def _experts(expert_dtype: str, tokens=16.0):
    """A fused MoE op as roofline.ops.mlp writes it, at the fixture's expert shape."""
    meta = {"tp": 1, "hidden": 1024, "expert_inter": 512, "topk": 2, "experts": 8}
    return SimpleNamespace(meta={**meta, "expert_dtype": expert_dtype, "moe_tokens": np.atleast_1d(tokens)})


def test_a_set_kernel_is_read_where_it_was_timed(engines):
    trt = kernel_tables("trtllm", "b200")
    op = _experts("fp8_block")
    # Unset: the fastest TensorRT-LLM timed, CUTLASS: 0.010 + 0.002 x 16 = 0.042 ms.
    assert trt._moe(op).seconds[0] == pytest.approx(42e-6, rel=1e-3)
    deepgemm = replace(trt, moe_kernel="deepgemm")._moe(op)  # 0.010 + 0.004 x 16
    assert deepgemm.seconds[0] == pytest.approx(74e-6, rel=1e-3) and deepgemm.label.startswith("DeepGEMM MoE kernel")
    # TRTLLM-gen: TensorRT-LLM timed none, vLLM did (0.010 + 0.001 x 16 = 0.026 ms), and the label says whose.
    gen = replace(trt, moe_kernel="trtllm-gen")._moe(op)
    assert gen.seconds[0] == pytest.approx(26e-6, rel=1e-3)
    assert "as timed in vLLM 9.9.9 kernels" in gen.label and "TensorRT-LLM 9.9.9 did not time it" in gen.label
    # Marlin: nobody timed it: the fastest TensorRT-LLM timed, and why.
    marlin = replace(trt, moe_kernel="marlin")._moe(op)
    assert marlin.seconds[0] == pytest.approx(42e-6, rel=1e-3) and "no Marlin MoE timing" in marlin.label
    manifest = json.loads((engines / "manifest.json").read_text())
    assert {f["file"]: f["rows"]["moe"] for f in manifest["files"]} == {
        "b200/trtllm-9.9.9.npz": 9,
        "b200/vllm-9.9.9.npz": 6,
        "b200/sglang-9.9.9.npz": 3,
    }


def test_each_activation_format_from_its_first_source_then_the_faster(engines):
    """MXFP4 experts have two tables (bf16 or MXFP8 activations), the faster of which runs. With a
    kernel set, each is read from the first table that timed that kernel for it (bf16: vLLM's,
    0.010 + 0.0015 t ms; MXFP8: SGLang's, 0.020 + 0.0005 t), then the faster at each size, labelled
    with whose it is: vLLM's at 1 token (0.0115 against 0.0205 ms), SGLang's at 16 (0.028 against
    0.034) and 256."""
    trt = replace(kernel_tables("trtllm", "b200"), moe_kernel="trtllm-gen")
    at16 = trt._moe(_experts("mxfp4"))
    assert at16.seconds[0] == pytest.approx(28e-6, rel=1e-3)
    assert "as timed in SGLang 9.9.9" in at16.label and "vLLM" not in at16.label
    at1 = trt._moe(_experts("mxfp4", 1.0))
    assert at1.seconds[0] == pytest.approx(11.5e-6, rel=1e-3) and "as timed in vLLM 9.9.9" in at1.label
    sweep = trt._moe(_experts("mxfp4", np.array([1.0, 256.0])))
    assert sweep.seconds == pytest.approx([11.5e-6, 148e-6], rel=1e-3)
    assert "vLLM 9.9.9" in sweep.label and "SGLang 9.9.9" in sweep.label and "the faster at each size" in sweep.label
    # Unset: TensorRT-LLM's own CUTLASS (0.010 + 0.003 x 16), SGLang's table timed nothing else.
    assert kernel_tables("trtllm", "b200")._moe(_experts("mxfp4")).seconds[0] == pytest.approx(58e-6, rel=1e-3)


def test_a_file_without_kernels_still_borrows(engines, monkeypatch):
    """A file converted before kernels were told apart (no kernel column) reads the named kernel where
    another engine's file records it, and says its own does not."""
    trt = kernel_tables("trtllm", "b200")
    tables = {name: dict(columns) for name, columns in trt.predictor.tables.items()}
    del tables["moe"]["kernel"]
    monkeypatch.setitem(trt.predictor.__dict__, "tables", tables)  # this engine's file only
    gen = replace(trt, moe_kernel="trtllm-gen")._moe(_experts("fp8_block"))
    assert "as timed in" in gen.label
    cutlass = replace(trt, moe_kernel="cutlass")._moe(_experts("fp8_block"))
    assert "this file does not record MoE kernels" in cutlass.label


def test_the_setting_reaches_a_step_through_settings(engines):
    from roofline.hardware import get_hardware

    hw = get_hardware("b200")
    source = Settings(engine="trtllm", moe_kernel="trtllm-gen").ceilings(hw).roof_source
    assert source.moe_kernel == "trtllm-gen"
    assert Settings(engine="trtllm").ceilings(hw).roof_source.moe_kernel is None
    assert source.scaled(2.0, 1.0).moe_kernel == "trtllm-gen"  # what-ifs keep it
    assert source.short_label == "TensorRT-LLM 9.9.9 kernels, TensorRT-LLM-gen MoE kernels"


shipped = pytest.mark.skipif(not (store.SHIPPED_DIR / "manifest.json").exists(), reason="no shipped kernel_db")
DSR1_TRT = "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_agg_1024x8192_c32_tp8_0_ep1_0_1188"


@shipped
def test_a_sample_run_reads_the_kernel_its_script_set():
    """InferenceX's DeepSeek-R1 FP8 TensorRT-LLM script sets moe_config.backend TRTLLM at 32 clients."""
    from roofline.silicon_sample import documented_setup, load_silicon_sample, run_tables

    row = next(r for r in load_silicon_sample() if r["id"] == DSR1_TRT)
    assert documented_setup(row).moe_kernel == "trtllm-gen"
    assert "TensorRT-LLM-gen MoE kernels" in documented_setup(row).words()
    assert run_tables(row).moe_kernel == "trtllm-gen"


@shipped
def test_cli_takes_the_kernel_and_says_where_it_was_timed(capsys):
    from roofline.cli import main

    common = ["analyze", "--model", "deepseek-r1", "--hardware", "b200", "--tp", "8", "--engine", "trtllm"]
    common += ["--weight-dtype", "fp8", "--act-dtype", "fp8", "--phase", "decode", "--batch", "32"]
    common += ["--seq-len", "2048", "--json"]
    times = {}
    for kernel in ("auto", "trtllm-gen"):
        assert main([*common, "--moe-kernel", kernel]) == 0
        ops = json.loads(capsys.readouterr().out)["ops"]
        (experts,) = [o for o in ops if o["name"] == "MoE experts gate+up"]
        times[kernel] = experts["time_s"]
        if kernel == "trtllm-gen":
            assert "TensorRT-LLM-gen MoE kernel as timed in" in experts["rests_on"]
    assert times["trtllm-gen"] != times["auto"]
    with pytest.raises(SystemExit):
        main([*common, "--moe-kernel", "TRTLLM"])
    assert "invalid choice: 'TRTLLM'" in capsys.readouterr().err


def test_script_expert_and_attention_parallelism():
    """A script that decides them itself (InferenceX's DeepSeek-R1 FP4 TensorRT-LLM script of 2025-10)."""
    script = "\n".join(
        [
            'EP_SIZE="1"',
            'MOE_BACKEND="TRTLLM"',
            "DP_ATTENTION=false",
            'if [[ "$TP" == "4" ]]; then',
            "    if [[ $CONC -gt 32 ]]; then",
            '        EP_SIZE="$TP"',
            "    fi",
            "    if [[ $CONC -ge 256 ]]; then",
            "        DP_ATTENTION=true",
            '        MOE_BACKEND="CUTLASS"',
            "    fi",
            "fi",
            "cat > cfg.yml << EOF",
            "enable_attention_dp: $DP_ATTENTION",
            "moe_config:",
            "  backend: $MOE_BACKEND",
            "EOF",
            "trtllm-serve $MODEL --tp_size=$TP --ep_size=$EP_SIZE --extra_llm_api_options=cfg.yml",
        ]
    )
    lines = digest(script)
    low = evaluate(lines, {"TP": "4", "CONC": "16", "DP_ATTENTION": "false", "EP_SIZE": "1"})
    assert low == {"enable_attention_dp": "false", "moe_backend": "TRTLLM", "ep_size": "1"}
    high = evaluate(lines, {"TP": "4", "CONC": "256", "DP_ATTENTION": "false", "EP_SIZE": "1"})
    assert high == {"enable_attention_dp": "true", "moe_backend": "CUTLASS", "ep_size": "4"}


@shipped
def test_sample_rows_read_as_their_scripts_ran_them():
    from roofline.silicon_sample import load_silicon_sample, run_tables, why_not_scored

    rows = {r["id"]: r for r in load_silicon_sample()}
    # 256 clients at TP 4: the script turned attention data parallelism on; the row does not say.
    dp = rows["2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c256_tp4_ep1_10"]
    assert dp["attention_dp_size"] in ("", "1", "1.0")
    assert why_not_scored(dp) == "attention data parallel (its script sets it; the row does not say)"
    # gpt-oss on H200 in 2025-11: the script ran the experts with --ep_size=$TP, the row says EP 1.
    ep = rows["2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x8192_c64_tp4_ep1_231"]
    tables = run_tables(ep)
    assert tables.moe_parallel == (1, 4) and tables.moe_kernel == "triton"
