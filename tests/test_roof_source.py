"""Roof sources: the engine's kernel tables read op by op from each op's own shape, the ideal bound
kept beside the expected time, and the engine a prediction names (``--engine``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

from roofline.engine import evaluate
from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.ops import step_ops
from roofline.roofs import engine_note, kernel_tables, resolved_engine
from roofline.settings import Settings
from roofline.tables import TablePredictor, store
from roofline.tables.grid import LogGrid
from roofline.tables.source import KernelTables, OpAnswer
from roofline.workload import Precision, Workload

shipped = pytest.mark.skipif(not (store.SHIPPED_DIR / "manifest.json").exists(), reason="no shipped kernel_db")
H100 = get_hardware("h100-sxm")


def test_a_sweep_reads_the_grid_as_each_point_alone():
    # t = m x k^2 ns on a 3 x 3 grid with one corner unmeasured: inside, outside (both sides) and
    # on the missing corner, the vectorised read gives what one-point reads give.
    m, k = np.meshgrid([1.0, 4.0, 16.0], [2.0, 8.0, 32.0], indexing="ij")
    t = 1e-9 * m * k**2
    keep = ~((m == 16) & (k == 32))
    grid = LogGrid.from_rows([m[keep], k[keep]], t[keep])
    xs = np.array([0.5, 1.0, 3.0, 16.0, 40.0])
    ys = np.array([1.0, 2.0, 10.0, 32.0, 64.0])
    values, extrapolated = grid.many((xs[:, None], ys[None, :]))
    for i, x in enumerate(xs):
        for j, y in enumerate(ys):
            one, out = grid((x, y))
            assert (np.isnan(one) and np.isnan(values[i, j])) or one == pytest.approx(values[i, j], rel=1e-12)
            assert out == extrapolated[i, j]
    # Between measured points the power law is exact: at (2, 4) it is 2 x 16 ns.
    assert np.exp(grid.many((np.array([2.0]), np.array([4.0])))[0][0]) == pytest.approx(32e-9)


@shipped
def test_each_op_is_read_at_its_own_shape():
    w = Workload(get_model("llama-3.1-8b"), "prefill", 2, 1024)
    ops = step_ops(w)
    p = TablePredictor.open("h100-sxm", "vllm")
    source = KernelTables(p)
    by_name = {op.name: source.op_seconds(op) for op in ops}
    attention = by_name["attention (FlashAttention)"]
    assert float(attention.seconds) == pytest.approx(p.attention("prefill", 2, 1024, 32, 8, 128).time_s, rel=1e-9)
    # The down projection: 2048 tokens, 14336 in (k), 4096 out (n).
    down = by_name["MLP down projection"]
    assert float(down.seconds) == pytest.approx(p.gemm(2048, 4096, 14336).time_s, rel=1e-9)
    assert by_name["input norm"].seconds is None and "elementwise" in by_name["input norm"].label


@shipped
def test_the_tables_replace_only_what_they_answer_and_the_ideal_bound_stays():
    w = Workload(get_model("llama-3.1-8b"), "decode", 32, 2048, cuda_graphs=True)
    ops = step_ops(w)
    ideal = Settings().ceilings(H100, 1, cuda_graphs=True)
    step = evaluate(
        ops, replace(ideal, roof_source=KernelTables(TablePredictor.open("h100-sxm", "vllm")), source="engine-measured")
    )
    plain = evaluate(ops, ideal)
    assert np.allclose(step.ideal_device_s, plain.device_s)
    assert float(step.ideal_step_time_s) == pytest.approx(float(plain.step_time_s))
    kept = ~step.from_source
    assert np.array_equal(step.device_s[kept], plain.device_s[kept])
    assert all(s.startswith("datasheet") for s, k in zip(step.sources, kept) if k)
    assert step.source_share > 0.8 and float(step.step_time_s) > float(plain.step_time_s)
    # The regime is the datasheet's: a decode GEMM stays memory-bound at its measured time.
    rows = {r["name"]: r for r in step.rows()}
    qkv = rows["QKV projection"]
    assert qkv["bound"] == "memory" and qkv["time_s"] > qkv["ideal_time_s"]
    assert "vLLM 0.24.0 kernels" in qkv["rests_on"]
    assert "engine-measured: vLLM 0.24.0 kernels" in step.rests_on()


@shipped
def test_a_sweep_is_read_in_one_pass():
    batches = np.array([1.0, 8.0, 64.0])
    w = Workload(get_model("llama-3.1-8b"), "decode", batches[:, None], np.array([[512.0, 4096.0]]), cuda_graphs=True)
    c = Settings(engine="vllm").ceilings(H100, 1, cuda_graphs=True)
    sweep = evaluate(step_ops(w), c)
    for i, b in enumerate(batches):
        for j, s in enumerate((512.0, 4096.0)):
            one = evaluate(step_ops(Workload(w.model, "decode", b, s, cuda_graphs=True)), c)
            assert float(sweep.step_time_s[i, j]) == pytest.approx(float(one.step_time_s), rel=1e-9)


@shipped
def test_mla_decode_and_the_fused_moe_layer_of_a_deepseek_step():
    p = TablePredictor.open("h200-sxm", "sglang")
    w = Workload(get_model("deepseek-r1"), "decode", 64, 4096, precision=Precision("fp8", "fp8", "bf16"), tp=8)
    ops = step_ops(w)
    source = KernelTables(p, moe_dtype="fp8_block")
    c = replace(Settings().ceilings(get_hardware("h200-sxm"), 8, True), roof_source=source, source="engine-measured")
    table = evaluate(ops, c)
    per_op = {op.name: (t / op.count, src) for op, t, src in zip(ops, table.device_s, table.sources)}
    assert per_op["attention (MLA latent, decode)"][0] == pytest.approx(p.mla_decode(64, 4096, 16).time_s, rel=1e-9)
    # The fused layer's table time, or the datasheet bound of all its parts where the table reads
    # faster than the roofs allow.
    ideal = evaluate(ops, Settings().ceilings(get_hardware("h200-sxm"), 8, True))
    moe = [k for k, op in enumerate(ops) if op.meta.get("moe") in ("fused", "inside")]
    bound = sum(max(ideal.terms_s[0, k], ideal.terms_s[1, k]) / ops[k].count for k in moe)
    # DeepSeek-R1 has a shared expert: read, as the database prices it, at power-law routing of exponent 1.01.
    measured = p.moe(64, 7168, 2048, 8, 256, 8, 1, "fp8_block", routing="power-law-1.01").time_s
    assert per_op["MoE experts gate+up"][0] == pytest.approx(max(measured, bound), rel=1e-9)
    assert "power-law routing (α 1.01" in per_op["MoE experts gate+up"][1]
    down, label = per_op["MoE experts down + combine"]
    assert down == 0.0 and "inside the fused MoE" in label
    # vLLM converted no MLA table: the datasheet keeps that op, and says why.
    vllm = KernelTables(TablePredictor.open("h200-sxm", "vllm"))
    mla = next(op for op in ops if op.name == "attention (MLA latent, decode)")
    assert vllm.op_seconds(mla).seconds is None


@shipped
def test_mla_prefill_attention_is_read_from_the_mla_prefill_table():
    """DeepSeek-R1's prefill attention on SGLang's H200 files: two 1,024-token prompts at TP 8 (16 heads
    a GPU, bf16 cache) is the measured row itself, 0.0903 ms a layer in the file; a chunk's share of
    the work scales it; vLLM's files time no MLA prefill kernel, and the datasheet says so."""
    w = Workload(get_model("deepseek-r1"), "prefill", 2, 1024, precision=Precision("fp8", "fp8", "bf16"), tp=8)
    attention = next(op for op in step_ops(w) if op.name == "attention (FlashAttention)")
    assert attention.meta["mla_prefill"] and attention.meta["head_dim"] == 192
    with np.load(store.SHIPPED_DIR / "h200-sxm" / "sglang-0.5.14.npz") as f:
        t = {k.split("/")[1]: f[k] for k in f.files if k.startswith("context_mla/")}
    row = (t["num_heads"] == 16) & (t["kv_cache_dtype"] == "bfloat16") & (t["isl"] == 1024) & (t["batch_size"] == 2)
    assert row.sum() == 1
    sglang = KernelTables(TablePredictor.open("h200-sxm", "sglang"))
    answer = sglang.op_seconds(attention)
    assert float(answer.seconds) == pytest.approx(float(t["latency_ms"][row][0]) * 1e-3, rel=1e-6)
    assert float(answer.seconds) == pytest.approx(0.0903e-3, rel=1e-3) and "SGLang" in answer.label
    quarter = replace(attention, meta={**attention.meta, "work_share": 0.25})
    assert float(sglang.op_seconds(quarter).seconds) == pytest.approx(0.25 * float(answer.seconds), rel=1e-9)
    vllm = KernelTables(TablePredictor.open("h200-sxm", "vllm")).op_seconds(attention)
    assert vllm.seconds is None and "time no MLA prefill kernel" in vllm.label
    other = replace(attention, meta={**attention.meta, "head_dim": 128})  # not DeepSeek-V3's heads
    assert "192-dim query/key heads" in sglang.op_seconds(other).label


@shipped
def test_the_engine_a_prediction_names():
    assert resolved_engine("auto", "h100-sxm") == "vllm"
    assert resolved_engine("auto", "a100-sxm-80gb") == "ideal"
    assert kernel_tables("sglang", "h200-sxm").engine == "sglang"
    assert kernel_tables("vllm", "mi300x") is None
    assert Settings(engine="auto").ceilings(H100).source == "engine-measured"
    assert Settings(engine="ideal").ceilings(H100).source == "datasheet"
    assert Settings(engine="trtllm").ceilings(get_hardware("a100-sxm-80gb")).source == "datasheet"
    assert "no TensorRT-LLM kernel tables" in engine_note("trtllm", "mi300x", "MI300X")
    assert "engine-measured roofs, vLLM" in engine_note("auto", "h100-sxm", "H100")


def test_a_bad_engine_names_the_allowed_ones():
    with pytest.raises(ValueError, match="engine must be one of auto, vllm, sglang, trtllm, ideal"):
        Settings(engine="tgi")
    with pytest.raises(ValueError, match="engine_version"):
        Settings(engine="vllm", engine_version="x" * 100)


@shipped
def test_what_if_scales_a_measured_op_by_the_term_that_binds_it():
    w = Workload(get_model("llama-3.1-8b"), "decode", 1, 1024, cuda_graphs=True)
    c = Settings(engine="vllm").ceilings(H100, 1, cuda_graphs=True)
    base = evaluate(step_ops(w), c)
    faster = evaluate(step_ops(w), c.scaled(memory=2.0))
    qkv = [i for i, op in enumerate(base.ops) if op.name == "QKV projection"][0]
    assert float(faster.device_s[qkv]) == pytest.approx(float(base.device_s[qkv]) / 2)


@dataclass(frozen=True)
class _Fixed(KernelTables):
    """A table that answers the QKV projection with one fixed time, and nothing else."""

    fixed_s: float = 0.0

    def op_seconds(self, op):
        if op.name == "QKV projection":
            return OpAnswer(np.asarray(self.fixed_s), "fixed table")
        return OpAnswer(None, "no table")


@shipped
def test_a_table_faster_than_the_datasheet_is_held_at_the_bound():
    # Llama 3.1 8B decode, batch 1: the QKV projection reads 4096 x 6144 bf16 weights,
    # 50,331,648 B, in 15.02 us at the H100's 3.35 TB/s: no kernel of a whole step is faster.
    w = Workload(get_model("llama-3.1-8b"), "decode", 1, 512, cuda_graphs=True)
    ops = step_ops(w)
    k = next(i for i, op in enumerate(ops) if op.name == "QKV projection")
    bound_s = 4096 * 6144 * 2 / 3.35e12
    ideal = Settings().ceilings(H100, 1, cuda_graphs=True)
    p = TablePredictor.open("h100-sxm", "vllm")
    for table_s, expected_s in ((5e-6, bound_s), (30e-6, 30e-6)):
        source = _Fixed(p, fixed_s=table_s)
        step = evaluate(ops, replace(ideal, roof_source=source, source="engine-measured"))
        assert float(step.device_s[k]) / ops[k].count == pytest.approx(expected_s, rel=2e-3)
        held = "held at the datasheet bound" in step.sources[k]
        assert held == (table_s < bound_s)


@shipped
def test_speculation_never_beats_the_tokens_each_verify_yields():
    # On engine-measured tables a GEMM at (k + 1) x the rows can read faster than at the rows alone;
    # the verify step still does the plain step's work and more, so the speed-up stays at most the
    # expected tokens per verify (2.77 at k = 4, acceptance 0.7).
    from roofline.serving.techniques import speculative
    from roofline.serving.traffic import Traffic

    batches = [1, 2, 4, 8, 16, 24, 32, 48, 64]
    r = speculative(
        get_model("llama-3.1-8b"), H100, Traffic(1024, 256), batches, 4, 0.7,
        settings=Settings(engine="vllm"),
    )  # fmt: skip
    assert np.all(r["speedup"] <= r["tokens_per_verify"] + 1e-12)
    assert np.all(r["verify_s"] >= r["plain_tpot_s"])


def test_a_version_not_installed_reads_the_closest_and_says_so():
    newest = TablePredictor.open("h100-sxm", "vllm")
    assert newest.asked is None and "installed" not in newest.label
    exact = TablePredictor.open("h100-sxm", "vllm", newest.version)
    assert exact.label == newest.label
    old = TablePredictor.open("h100-sxm", "vllm", "0.1")
    assert old.version == newest.version  # none older installed: the oldest newer one
    assert f"vLLM {old.version} kernels (no 0.1 tables installed: the closest)" in old.label
    # A measured run's own version is named beside its tables already: no such words there.
    assert "installed" not in TablePredictor.open("h100-sxm", "vllm", "0.1", say_closest=False).label


@pytest.mark.parametrize("text", ["abc", ".1", "", "1" + "a" * 38 + "!", "0.24.0 --x"])
def test_an_engine_version_must_read_as_one(text, capsys):
    from roofline.cli import main

    with pytest.raises(SystemExit):
        main(["request", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine-version", text])
    assert "--engine-version: expected a version such as 0.24.0" in capsys.readouterr().err


@shipped
def test_a_step_and_a_request_say_which_gemms_the_tables_timed_slower_than_twice_their_rows():
    """vLLM's FP8 GEMMs at one row on a B200 (the tables' finding, tests/test_tables.py): the notes
    name the ops and their ratios, once; a batch of two has none, and neither has the datasheet."""
    from roofline import analyze
    from roofline.inference import analyze_request

    def found(notes):
        return [n for n in notes if "twice the rows" in n]

    step = dict(model="llama-3.1-8b", hardware="b200", seq_len=1152, weight_dtype="fp8")
    (one,) = found(analyze(**step, batch=1)["notes"])
    assert one.startswith("At m = 1 the kernel tables timed GEMMs over 1.5x their time at m = 2")
    assert "QKV projection 2.5x" in one and "output projection" in one
    assert not found(analyze(**step, batch=2)["notes"]) and not found(analyze(**step, engine="ideal")["notes"])
    w = Workload(get_model("llama-3.1-8b"), "request", 1, 1024, output_len=64, precision=Precision("fp8"))
    (decode,) = found(analyze_request(w, get_hardware("b200"), Settings(engine="vllm")).notes)
    assert decode.startswith("At m = 1 the kernel tables timed the decode step's GEMMs")
    one_token = replace(w, seq_len=1, output_len=1)  # a one-token prompt: its prefill's GEMMs have m = 1
    (prefill,) = found(analyze_request(one_token, get_hardware("b200"), Settings(engine="vllm")).notes)
    assert prefill.startswith("At m = 1 the kernel tables timed the prefill step's GEMMs")


def test_the_ops_timed_inside_a_fused_moe_layer_read_so_in_analyzes_table(capsys):
    """analyze printed their 0 ns as compute-bound; the time is the fused layer's, in its row."""
    from roofline.cli import main

    assert main(["analyze", "--phase", "decode", "--seq-len", "1024", "--model", "qwen3-30b-a3b"]) == 0
    rows = {line.split("  ")[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("MoE")}
    for name in ("MoE experts activation", "MoE experts down + combine"):
        assert rows[name].rstrip().endswith("in the fused MoE layer  —") and "0 ns" not in rows[name]
    assert rows["MoE experts gate+up"].rstrip().endswith("memory")
