"""LLM prefill and decode workloads: hand-worked counts, regimes, TP, MoE, memory, requests."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.engine import Ceilings, evaluate
from roofline.hardware import get_hardware
from roofline.inference import analyze_request, analyze_step
from roofline.memory import kv_cache_bytes, weight_bytes_per_device
from roofline.models import get_model
from roofline.ops import causal_pairs, expected_experts_loaded, step_ops
from roofline.settings import Settings
from roofline.workload import Precision, Workload

H100 = get_hardware("h100-sxm")
LLAMA8 = get_model("llama-3.1-8b")


def step_json(w: Workload, hw=H100, settings: Settings | None = None) -> dict:
    return analyze_step(w, hw, settings or Settings()).to_json()


def ops_by_name(w: Workload) -> dict:
    return {op.name: op for op in step_ops(w)}


def test_decode_batch_1_is_weight_bandwidth_bound():
    # With launch overhead removed, an 8B bf16 decode step at batch 1 takes about the bytes of the
    # weights it reads / bandwidth. Resident: 2 B * 8,030,261,248 = 16.06 GB; the embedding
    # gather reads one row, not the 128256 * 4096 * 2 B = 1.05 GB table, so 15.01 GB are read:
    # 15.01e9 / 3.35e12 = 4.48 ms, plus a 67 MB KV read (20 us).
    result = step_json(
        Workload(LLAMA8, "decode", 1, 512), H100, Settings(launch_overhead_s=0.0, graph_launch_overhead_s=0.0)
    )
    weights = weight_bytes_per_device(LLAMA8, Precision())
    assert weights == 2 * 8_030_261_248
    read = weights - 128256 * 4096 * 2
    assert result["total"]["bound"] == "memory"
    assert result["total"]["weight_bytes"] == pytest.approx(read, rel=1e-3)
    assert result["total"]["time_s"] == pytest.approx(read / 3.35e12, rel=0.01)
    # Eager launches add time, CUDA graphs take most of it away again.
    eager = step_json(Workload(LLAMA8, "decode", 1, 512), H100)["total"]["time_s"]
    graphs = step_json(Workload(LLAMA8, "decode", 1, 512, cuda_graphs=True))["total"]["time_s"]
    assert eager > graphs > result["total"]["time_s"]


def test_small_model_decode_is_overhead_bound_without_cuda_graphs():
    small = get_model("llama-3.2-1b")
    eager = step_json(Workload(small, "decode", 1, 128), H100)
    assert eager["total"]["bound"] == "overhead"
    graphs = step_json(Workload(small, "decode", 1, 128, cuda_graphs=True))
    assert graphs["total"]["bound"] == "memory"


def test_prefill_is_compute_bound():
    result = step_json(Workload(LLAMA8, "prefill", 4, 2048), H100)
    assert result["total"]["bound"] == "compute"


def test_linear_layer_counts_by_hand():
    ops = ops_by_name(Workload(LLAMA8, "prefill", 2, 1000))
    qkv = ops["QKV projection"]
    # T = 2*1000 tokens; out = (32 + 2*8) * 128 = 6144; FLOPs 2 * 2000 * 4096 * 6144 = 100,663,296,000
    assert qkv.flops == 2 * 2000 * 4096 * 6144 == 100_663_296_000
    # weights 4096 * 6144 * 2 B = 50,331,648 B; activations 2000 * (4096 + 6144) * 2 B = 40,960,000 B
    assert qkv.weight_bytes == 50_331_648 and qkv.act_bytes == 40_960_000
    assert qkv.count == 32 and qkv.dtype == "bf16"


def test_prefill_attention_is_causal_with_kv_at_kv_heads():
    ops = ops_by_name(Workload(LLAMA8, "prefill", 1, 2048))
    attn = ops["attention (FlashAttention)"]
    # pairs = 2048 * 2049 / 2 = 2,098,176; FLOPs = 2 * 32 heads * pairs * (128 + 128) = 34,376,515,584
    assert attn.flops == 2 * 32 * 2_098_176 * 256 == 34_376_515_584
    # reads Q (2048*32*128), K and V at 8 KV heads (2 * 2048*8*128), writes O (2048*32*128), all 2 B
    assert attn.act_bytes == (2048 * 32 * 128 * 2 + 2 * 2048 * 8 * 128) * 2
    # and writes the cache: 2048 tokens * 2 * 8 * 128 * 2 B
    assert attn.kv_bytes == 2048 * 2 * 8 * 128 * 2


def test_naive_prefill_writes_and_rereads_scores():
    ops = ops_by_name(Workload(LLAMA8, "prefill", 1, 2048, attention="naive"))
    qk = ops["attention scores QK^T (naive)"]
    # Full masked square: 2 * 32 * 2048 * 2048 * 128 FLOPs; scores 32 * 2048^2 * 2 B written
    assert qk.flops == 2 * 32 * 2048 * 2048 * 128
    scores_bytes = 32 * 2048 * 2048 * 2
    assert qk.act_bytes == 2048 * 32 * 128 * 2 + 2048 * 8 * 128 * 2 + scores_bytes
    assert ops["attention softmax + mask (naive)"].act_bytes == 2 * scores_bytes
    flash = step_json(Workload(LLAMA8, "prefill", 1, 8192), H100)["total"]
    naive = step_json(Workload(LLAMA8, "prefill", 1, 8192, attention="naive"), H100)["total"]
    assert naive["bytes"] > flash["bytes"] and naive["time_s"] > flash["time_s"]


def test_decode_reads_the_kv_cache_once():
    ops = ops_by_name(Workload(LLAMA8, "decode", 4, 1000))
    attn = ops["attention (fused decode)"]
    # read: 4 seqs * 1001 tokens * 2 * 8 * 128 * 2 B = 8,200,192 per layer; write 4 * 4096 B
    assert attn.kv_bytes == 4 * 1001 * 4096 + 4 * 4096
    step = evaluate(step_ops(Workload(LLAMA8, "decode", 4, 1000)), Ceilings.from_hardware(H100))
    # over 32 layers the cache read is batch * context * KV bytes per token (131,072 B)
    assert step.kv_bytes.sum() == 4 * 1001 * 131_072 + 4 * 131_072


def test_sliding_window_caps_reads_and_cache():
    mistral = get_model("mistral-7b-v0.1")
    attn = ops_by_name(Workload(mistral, "decode", 1, 10_000))["attention (fused decode)"]
    assert attn.kv_bytes == 4096 * 4096 + 4096  # min(10,001, 4096) tokens read, one written
    # Gemma 2: half the layers windowed at 4096; cache of one 8000-token sequence:
    gemma = get_model("gemma-2-9b")
    per_layer = 2 * 8 * 256 * 2
    assert kv_cache_bytes(gemma, Precision(), 1, 1, 8000) == 21 * 8000 * per_layer + 21 * 4096 * per_layer
    assert causal_pairs(10, 4) == 4 * 5 / 2 + 6 * 4


def test_logits_only_for_the_last_token_in_prefill():
    logits = ops_by_name(Workload(LLAMA8, "prefill", 3, 500))["logits (LM head)"]
    assert logits.flops == 2 * 3 * 4096 * 128256


def test_moe_experts_loaded_grow_with_batch():
    assert expected_experts_loaded(8, 2, 1) == pytest.approx(2.0)
    # 4 tokens: 8 * (1 - 0.75^4) = 5.469
    assert expected_experts_loaded(8, 2, 4) == pytest.approx(8 * (1 - 0.75**4))
    mixtral = get_model("mixtral-8x7b")
    one = ops_by_name(Workload(mixtral, "decode", 1, 100))["MoE experts gate+up"]
    many = ops_by_name(Workload(mixtral, "decode", 64, 100))["MoE experts gate+up"]
    expert_gate_up = 4096 * 2 * 14336 * 2
    assert one.weight_bytes == pytest.approx(2 * expert_gate_up)
    assert many.weight_bytes == pytest.approx(8 * expert_gate_up, rel=1e-6)


def test_deepseek_mla_decode_reads_the_latent():
    w8a8 = Precision(weight_dtype="fp8", act_dtype="fp8")
    ops = ops_by_name(Workload(get_model("deepseek-v3"), "decode", 2, 999, precision=w8a8))
    attn = ops["attention (MLA latent, decode)"]
    # cache read: 2 * 1000 tokens * (512 + 64) * 2 B, plus 2 new tokens written
    assert attn.kv_bytes == 2 * 1000 * 576 * 2 + 2 * 576 * 2
    assert "shared expert gate+up projection" in ops
    assert ops["MoE experts gate+up"].count == 58 and ops["MLP gate+up projection"].count == 3


def test_tensor_parallel_splits_weights_and_adds_all_reduces():
    one = weight_bytes_per_device(get_model("llama-3.1-70b"), Precision(), 1)
    four = weight_bytes_per_device(get_model("llama-3.1-70b"), Precision(), 4)
    assert four == pytest.approx(one / 4, rel=0.01)
    ops = ops_by_name(Workload(get_model("llama-3.1-70b"), "decode", 8, 100, tp=4))
    ar = ops["all-reduce (attention)"]
    # message 8 tokens * 8192 * 2 B = 131,072 B; ring: each device sends 2*3/4 of it
    assert ar.comm_bytes == pytest.approx(1.5 * 131_072)
    assert ops["QKV projection"].flops == 2 * 8 * 8192 * (16 + 2 * 2) * 128


def test_mqa_kv_heads_are_replicated_under_tp():
    falcon = get_model("falcon-7b")
    with pytest.raises(ValueError, match="tp=2 does not divide falcon-7b's 71 attention heads"):
        Workload(falcon, "decode", 1, 10, tp=2)
    llama2 = get_model("llama-2-70b")  # 8 KV heads on 16 devices: one (replicated) each
    assert kv_cache_bytes(llama2, Precision(), 16, 1, 100) == 80 * 100 * 2 * 1 * 128 * 2


def test_weight_only_quantization_keeps_the_bf16_peak():
    cfg = Workload(LLAMA8, "decode", 1, 100, precision=Precision(weight_dtype="int4"))
    qkv = ops_by_name(cfg)["QKV projection"]
    # int4 with groups of 128: 4 bits + (16-bit scale + 4-bit zero) / 128 = 4.15625 bits = 0.51953125 B per weight
    assert qkv.dtype == "bf16" and qkv.weight_bytes == 4096 * 6144 * (4 + 20 / 128) / 8
    w8a8 = Precision(weight_dtype="fp8", act_dtype="fp8")
    fp8 = ops_by_name(Workload(LLAMA8, "decode", 1, 100, precision=w8a8))["QKV projection"]
    assert fp8.dtype == "fp8"
    # The engines' math ("auto", the default) is bf16 on every device for int4 weights; for fp8
    # weights it depends on the device, so the ops wait for one.
    assert Precision(weight_dtype="int4").math_dtype == "bf16"
    with pytest.raises(ValueError, match="math auto with fp8 weights depends on the device"):
        ops_by_name(Workload(LLAMA8, "decode", 1, 100, precision=Precision(weight_dtype="fp8")))


def test_sweep_equals_point_by_point():
    ceilings = Ceilings.from_hardware(H100)
    batches = np.array([1, 8, 64])[:, None]
    contexts = np.array([128, 4096])[None, :]
    grid = evaluate(step_ops(Workload(LLAMA8, "decode", batches, contexts)), ceilings).step_time_s
    for i, b in enumerate([1, 8, 64]):
        for j, c in enumerate([128, 4096]):
            point = evaluate(step_ops(Workload(LLAMA8, "decode", b, c)), ceilings).total_time_s
            assert grid[i, j] == pytest.approx(point)


def test_request_metrics():
    # With CUDA graphs, so that the device time (which grows with the context) sets TPOT.
    r = analyze_request(Workload(LLAMA8, "request", 8, 1024, 129, cuda_graphs=True), H100).to_json()
    prefill = step_json(Workload(LLAMA8, "prefill", 8, 1024, cuda_graphs=True), H100)["total"]["time_s"]
    assert r["ttft_s"] == pytest.approx(prefill)
    first = step_json(Workload(LLAMA8, "decode", 8, 1024, cuda_graphs=True), H100)["total"]["time_s"]
    last = step_json(Workload(LLAMA8, "decode", 8, 1024 + 127, cuda_graphs=True), H100)["total"]["time_s"]
    assert first < r["tpot_s"] < last
    assert r["e2e_s"] == pytest.approx(r["ttft_s"] + 128 * r["tpot_s"])
    assert r["tokens_per_s"] == pytest.approx(8 * 129 / r["e2e_s"])
    assert 0 < r["mfu"] < 1 and r["memory"]["fits"]


def test_memory_fit():
    big = step_json(Workload(get_model("llama-3.1-405b"), "decode", 1, 100), H100)
    assert not big["memory"]["fits"] and big["memory"]["smallest_tp"] == 16
    assert big["memory"]["weights_bytes"] == pytest.approx(2 * 405.85e9, rel=0.001)
    # What CUDA exposes on an H100 SXM (85,017,493,504 B), 90% usable
    assert big["memory"]["capacity_bytes"] == 85_017_493_504 * 0.9


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch": 0}, "batch must be a positive integer"),
        ({"batch": float("nan")}, "batch must be a positive integer"),
        ({"batch": 2.5}, "batch must be a positive integer"),
        ({"seq_len": 200_000}, "exceed llama-3.1-8b's maximum context of 131072"),
        ({"phase": "train"}, "phase: 'train' is not allowed; allowed: prefill, decode, request"),
        ({"tp": 3}, "tp=3 does not divide llama-3.1-8b's 32 attention heads"),
    ],
)
def test_bad_input(kwargs, message):
    args = {"model": LLAMA8, "phase": "decode", "batch": 1, "seq_len": 10, **kwargs}
    with pytest.raises(ValueError, match=message):
        Workload(**args)


def test_bad_dtype():
    with pytest.raises(ValueError, match="weight dtype: 'int3' is not allowed; allowed: fp32, bf16"):
        Precision(weight_dtype="int3")
