"""MLA's projections on the engine-measured tables: the absorbed per-head products read off the
``mla_bmm`` table in the dtype of the checkpoint's kv_b_proj, and the down/up projections as the
two GEMMs the engines run, each read back at a measured point worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.ops.step import mla_parts, step_ops
from roofline.precision import Precision
from roofline.roofs import kernel_tables
from roofline.tables.mla import NVFP4_KV_B
from roofline.workload import Workload

DSV3 = get_model("deepseek-v3")


def _measured_ms(tables, table: str, **keys) -> float:
    t = tables.predictor.tables[table]
    mask = np.ones(len(t["latency_ms"]), bool)
    for column, value in keys.items():
        mask &= t[column] == value
    (i,) = np.flatnonzero(mask)
    return float(t["latency_ms"][i])


def _op(weights: str, name: str, batch: int = 128):
    precision = Precision(weight_dtype=weights, kv_dtype="fp8")
    run, _ = Workload(DSV3, "decode", batch, 1024, precision=precision, tp=8).on(get_hardware("b200"))
    ops = step_ops(run)
    return next(o for o in ops if o.name.startswith(name))


def test_deepseek_v3s_down_and_up_projections_are_two_gemms_per_rank():
    # q_a (1,536) and kv_a (512 latent + 64 rope) fused over the 7,168 hidden size; q_b from the
    # 1,536 query latent to 16 heads of 192 on each of 8 ranks.
    assert mla_parts(DSV3, 128 / 8) == ((1536 + 512 + 64, 7168), (16 * 192, 1536))
    op = _op("bf16", "QKV projection (MLA down/up)")
    assert float(np.asarray(op.weight_bytes).reshape(-1)[0]) == pytest.approx(2 * (2112 * 7168 + 3072 * 1536))


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_the_absorbed_products_read_the_measured_bf16_bmm(engine):
    tables = kernel_tables(engine, "b200")
    for name, table_op in (("MLA query absorb", "mla_gen_pre"), ("MLA output absorb", "mla_gen_post")):
        answer = tables.op_seconds(_op("bf16", name))
        # 128 tokens through 16 heads a rank: a measured point of the table, read back exactly.
        measured = _measured_ms(tables, "mla_bmm", bmm_dtype="bfloat16", op_name=table_op, num_heads=16, num_tokens=128)
        assert float(np.asarray(answer.seconds).reshape(-1)[0]) == pytest.approx(measured * 1e-3, rel=1e-6)
        assert "SGLang" in answer.label or "TensorRT-LLM" in answer.label


def test_an_fp8_checkpoint_reads_the_fp8_bmm_where_the_engine_has_one_and_bf16_in_vllm():
    sglang = kernel_tables("sglang", "b200")
    answer = sglang.op_seconds(_op("fp8", "MLA query absorb"))
    fp8 = _measured_ms(sglang, "mla_bmm", bmm_dtype="fp8", op_name="mla_gen_pre", num_heads=16, num_tokens=128)
    assert float(np.asarray(answer.seconds).reshape(-1)[0]) == pytest.approx(fp8 * 1e-3, rel=1e-6)
    vllm = kernel_tables("vllm", "b200")
    answer = vllm.op_seconds(_op("fp8", "MLA query absorb"))
    bf16 = _measured_ms(vllm, "mla_bmm", bmm_dtype="bfloat16", op_name="mla_gen_pre", num_heads=16, num_tokens=128)
    assert float(np.asarray(answer.seconds).reshape(-1)[0]) == pytest.approx(bf16 * 1e-3, rel=1e-6)
    assert "vLLM runs it in bf16" in answer.label


def test_an_nvfp4_checkpoint_runs_mlas_q_and_kv_projections_in_bf16_and_says_why():
    tables = kernel_tables("sglang", "b200")
    absorb = tables.op_seconds(_op("nvfp4", "MLA output absorb"))
    bf16 = _measured_ms(tables, "mla_bmm", bmm_dtype="bfloat16", op_name="mla_gen_post", num_heads=16, num_tokens=128)
    assert float(np.asarray(absorb.seconds).reshape(-1)[0]) == pytest.approx(bf16 * 1e-3, rel=1e-6)
    assert NVFP4_KV_B in absorb.label
    # The down/up projections: the bf16 GEMM table at (128, 2112, 7168) plus (128, 3072, 1536).
    down_up = tables.op_seconds(_op("nvfp4", "QKV projection (MLA down/up)"))
    p = tables.predictor
    expected = p.gemm(128, 2112, 7168, "bf16").time_s + p.gemm(128, 3072, 1536, "bf16").time_s
    assert float(np.asarray(down_up.seconds).reshape(-1)[0]) == pytest.approx(expected, rel=1e-6)
    assert "(2 GEMMs)" in down_up.label and NVFP4_KV_B in down_up.label
    # A bf16 checkpoint reads the same two GEMMs, without the note.
    plain = tables.op_seconds(_op("bf16", "QKV projection (MLA down/up)"))
    assert float(np.asarray(plain.seconds).reshape(-1)[0]) == pytest.approx(expected, rel=1e-6)
    assert NVFP4_KV_B not in plain.label


def test_int4_weights_have_no_bmm_table_and_keep_the_datasheet():
    answer = kernel_tables("vllm", "b200").op_seconds(_op("int4", "MLA query absorb"))
    assert answer.seconds is None and "no table" in answer.label


@pytest.mark.parametrize("weights, group", [("int8", 128), ("int4", 64), ("int4", 32)])
def test_formats_with_no_bmm_kernel_keep_the_datasheet_whatever_their_bytes(weights, group):
    # int4 at groups of 64 stores 0.54 bytes a weight, close to NVFP4's 0.5625; int8 stores one byte, as fp8
    # does: the format, not its bytes, picks the table.
    precision = Precision(weight_dtype=weights, kv_dtype="fp8", group_size=group)
    run, _ = Workload(DSV3, "decode", 128, 1024, precision=precision, tp=8).on(get_hardware("h200-sxm"))
    op = next(o for o in step_ops(run) if o.name.startswith("MLA query absorb"))
    answer = kernel_tables("sglang", "h200-sxm").op_seconds(op)
    assert answer.seconds is None and f"{weights} weights: no table" in answer.label


def test_an_nvfp4_checkpoints_mla_projections_are_bf16_ops_ideal_bound_and_all():
    for name in ("QKV projection (MLA down/up)", "MLA query absorb", "MLA output absorb"):
        nvfp4, bf16 = _op("nvfp4", name), _op("bf16", name)
        assert nvfp4.dtype == bf16.dtype == "bf16" and nvfp4.meta["nvfp4_kept"] and not bf16.meta["nvfp4_kept"]
        assert np.asarray(nvfp4.weight_bytes) == pytest.approx(np.asarray(bf16.weight_bytes))
    # The rest of the step keeps the checkpoint's NVFP4: the output projection's weights are 4-bit.
    assert _op("nvfp4", "output projection").meta["weight_dtype"] == "nvfp4"
