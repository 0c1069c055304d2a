"""KV-cache capacity: hand-worked values and properties (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.hardware import get_hardware, load_hardware
from roofline.kvcache import analyze_kv, capacity_curves, kv_crossover_context
from roofline.memory import footprint, kv_cache_bytes, max_batch, max_context
from roofline.models import get_model, load_models
from roofline.settings import Settings
from roofline.workload import Precision, Workload

H100 = get_hardware("h100-sxm")
LLAMA8 = get_model("llama-3.1-8b")
GIB = 2**30


def kv_workload(model, kv="bf16", tp=1, weight="bf16") -> Workload:
    return Workload(model, "decode", precision=Precision(weight_dtype=weight, kv_dtype=kv), tp=tp)


def per_sequence(w: Workload, context, block=16):
    return kv_cache_bytes(w.model, w.precision, w.tp, 1, context, block)


def test_max_batch_llama_3_1_8b_on_h100_at_8k():
    bf16 = analyze_kv(kv_workload(LLAMA8), H100, batch=1, context=8192).to_json()
    # usable: what CUDA exposes on an H100 SXM x 0.9 = 85,017,493,504 x 0.9 = 76,515,744,153.6 B
    assert bf16["capacity_bytes"] == pytest.approx(76_515_744_153.6)
    # weights: 8,030,261,248 params * 2 B = 16,060,522,496 B
    assert bf16["weights_bytes"] == 16_060_522_496
    # workspace: vLLM's profile run with its defaults on an H100 (8,192 tokens, 1,024 sequences). A
    # pass of 8192 tokens: its largest stage is the MLP, the residual stream and the normed input
    # (2 * 8192 * 4096 * 2 B = 134,217,728) plus gate/up (8192 * 28672 * 2 B) and the activated
    # product (8192 * 14336 * 2 B) = 134,217,728 + 704,643,072 = 838,860,800 B; the sampler's dummy
    # run over 1,024 rows, 1,024 x 128,256 x 16 B = 2,101,346,304 B, is the larger.
    assert (bf16["max_batched_tokens"], bf16["max_num_seqs"]) == (8192, 1024)
    assert bf16["workspace_bytes"] == 2_101_346_304
    # non-torch memory: vLLM's logged forward growth, 0.25 GiB = 268,435,456 B
    assert bf16["non_torch_bytes"] == 268_435_456
    # budget: 76,515,744,153.6 - 16,060,522,496 - 2,101,346,304 - 268,435,456 = 58,085,439,897.6 B
    assert bf16["kv_budget_bytes"] == pytest.approx(58_085_439_897.6)
    # one 8192-token sequence: 8192 * 131,072 B = 1,073,741,824 B; 58,085,439,897.6 / that = 54.1 -> 54
    assert bf16["kv_bytes_per_sequence"] == 1_073_741_824
    assert bf16["max_batch"] == 54
    # fp8 KV halves the sequence: 536,870,912 B -> 108.2 -> 108
    fp8 = analyze_kv(kv_workload(LLAMA8, kv="fp8"), H100, batch=1, context=8192).to_json()
    assert fp8["kv_bytes_per_sequence"] == 536_870_912 and fp8["max_batch"] == 108
    # vLLM's defaults at 256 sequences (its own on a GPU under 70 GiB) leave the forward pass the
    # larger: 838,860,800 B (the logits stage, 256 rows x 128,256 x (2 + 4 + 4) B + the stream =
    # 462,553,088 B, and the sampler's 256 x 128,256 x 16 B = 525,336,576 B are smaller).
    small = analyze_kv(kv_workload(LLAMA8), H100, 1, 8192, Settings(max_num_seqs=256)).to_json()
    assert small["workspace_bytes"] == 838_860_800


def test_kv_budget_against_vllm_logs():
    # vLLM's own accounting for Llama 3 8B on one H100 (see the README): at utilisation 0.95,
    # v0.19.0 logs "Available KV cache memory: 58.11 GiB" (total 79.19 GiB; weights 14.99 GiB,
    # activation peak 1.89 GiB at max_num_seqs 1024, non-torch forward growth 0.25 GiB).
    # The same settings here give 58.66 GiB (+0.9%); at 0.9, v0.6.5 logged 53.29 GiB (with 1.79 GiB
    # of non-torch memory, the CUDA context included) and this gives 55.27 GiB (+3.7%).
    ours = analyze_kv(kv_workload(LLAMA8), H100, 1, 8192, Settings(memory_utilization=0.95, max_num_seqs=1024))
    assert ours.footprint.kv_budget_bytes / GIB == pytest.approx(58.11, rel=0.02)
    at_90 = analyze_kv(kv_workload(LLAMA8), H100, 1, 8192).footprint.kv_budget_bytes / GIB
    assert at_90 == pytest.approx(53.29, rel=0.04)


def test_kv_bytes_per_token_of_each_attention_kind():
    # per layer, per token, bf16 (2 B)
    cases = {
        "llama-2-7b": 2 * 32 * 128 * 2,  # MHA: K and V at 32 heads of 128
        "llama-3.1-8b": 2 * 8 * 128 * 2,  # GQA: 8 KV heads
        "falcon-7b": 2 * 1 * 64 * 2,  # MQA: one KV head of 64
        "deepseek-v3": (512 + 64) * 2,  # MLA: latent + rotary key, shared by all heads
        "mistral-7b-v0.1": 2 * 8 * 128 * 2,
    }
    for model_id, per_layer in cases.items():
        result = analyze_kv(kv_workload(get_model(model_id)), get_hardware("mi300x"), 1, 1024)
        assert result.kv_bytes_per_token_per_layer == per_layer, model_id


def test_sliding_window_stops_the_cache_growing():
    mistral = kv_workload(get_model("mistral-7b-v0.1"))
    # 32 layers * 4096 tokens * 4096 B per token per layer = 536,870,912 B, at 8k or 32k alike
    assert per_sequence(mistral, 4096) == 32 * 4096 * 4096
    assert per_sequence(mistral, 32768) == per_sequence(mistral, 8192) == 536_870_912


def test_paging_rounds_up_to_blocks():
    w = kv_workload(LLAMA8)
    # 1000 tokens need 63 blocks = 1008 tokens: 8 tokens * 131,072 B wasted
    assert per_sequence(w, 1000) - per_sequence(w, 1000, block=1) == 8 * 131_072
    assert analyze_kv(w, H100, 1, 1000).paging_waste_bytes == 8 * 131_072


def test_tp_splits_kv_heads_and_weights():
    one = analyze_kv(kv_workload(get_model("llama-3.1-70b"), tp=2), H100, 1, 8192)
    # 8 KV heads over 2 devices: 4 heads * 128 * 2 (K,V) * 2 B = 2048 B per layer per device
    assert one.kv_bytes_per_token_per_layer == 2048


def test_model_that_does_not_fit_says_what_to_do():
    result = analyze_kv(kv_workload(get_model("llama-3.1-405b")), H100, 1, 1024).to_json()
    assert not result["fits"] and result["max_batch"] == 0
    assert result["smallest_tp"] == 16
    assert "weights alone need 811.7 GB" in result["message"] and "at TP >= 16" in result["message"]
    assert "per device" not in result["message"]  # at TP=1 the whole is the per-device figure: said once
    at_tp2 = analyze_kv(kv_workload(get_model("llama-3.1-405b"), tp=2), H100, 1, 1024).to_json()["message"]
    assert "weights alone need 811.7 GB (bf16), 405.9 GB per device at TP=2, against" in at_tp2
    # Weights that fit beside a reserve that does not: the reserve is named, not the weights.
    w = Workload(LLAMA8, "decode", precision=Precision(weight_dtype="bf16", kv_dtype="bf16"), cuda_graphs=True)
    reserved = analyze_kv(w, H100, 1, 1024, Settings(cuda_graph_bytes=100e9)).to_json()["message"]
    assert "weights alone" not in reserved and "the weights (16.1 GB a device, bf16)" in reserved
    assert "its reserve (100.3 GB: CUDA graphs 100.0 GB" in reserved
    # The TP that leaves the weights room is not the one that holds the batch asked: Llama 3.1 70B's
    # 141.1 GB of bf16 weights are 70.6 GB a device at TP 2, under 76.5 GB usable; its fp8 cache,
    # 80 layers x 8 KV heads x 128 x 2 (K, V) x 1 B = 163,840 B a token, holds 64 x 32,768 tokens in
    # 343.6 GB: 85.9 GB a device at TP 4 (too much), 42.9 GB at TP 8 beside 17.6 GB of weights.
    big = analyze_kv(kv_workload(get_model("llama-3.1-70b"), kv="fp8"), H100, 64, 32768).to_json()["message"]
    assert big.endswith(
        "at TP >= 2 they leave room for a KV cache, and at TP >= 8 a batch of 64 at 32,768 tokens of context fits"
    )


def test_crossover_by_hand():
    # Decode at batch 32 reads 15.01e9 B of weights (all but the embedding table) and
    # 32 * C * 131,072 B of KV (plus 32 * 131,072 B written): KV >= weights first at
    # C = ceil(15,009,849,344 / (32 * 131,072)) - 1 = 3578 - 1 = 3577 (the new token's write counts).
    assert kv_crossover_context(kv_workload(LLAMA8), 32) == 3577
    assert kv_crossover_context(kv_workload(get_model("mistral-7b-v0.1")), 1) is None


def test_curves_for_many_devices_at_once():
    devices = list(load_hardware().values())
    curves = capacity_curves(kv_workload(LLAMA8), devices)
    assert curves["max_batch"].shape == (len(devices), len(curves["contexts"]))
    assert curves["contexts"][0] == 512 and curves["contexts"][-1] == 131072


def test_bad_input():
    with pytest.raises(ValueError, match=r"memory_utilization must be a number in \(0, 1\], got 1.5"):
        Settings(memory_utilization=1.5)
    with pytest.raises(ValueError, match=r"context: 5000 is not allowed; allowed: integers 1..4096"):
        analyze_kv(kv_workload(get_model("llama-2-7b")), H100, 1, 5000)


MODELS = sorted(load_models())
DEVICES = sorted(load_hardware())


@settings(max_examples=40, deadline=None)
@given(
    model_id=st.sampled_from(MODELS),
    device_id=st.sampled_from(DEVICES),
    kv=st.sampled_from(["bf16", "fp8"]),
    fraction=st.floats(0.3, 1.0),
    c1=st.integers(1, 200_000),
    c2=st.integers(1, 200_000),
)
def test_capacity_never_increases_with_context(model_id, device_id, kv, fraction, c1, c2):
    model = get_model(model_id)
    lo, hi = sorted((min(c1, model.max_context), min(c2, model.max_context)))
    w, hw = kv_workload(model, kv), get_hardware(device_id)
    s = Settings(memory_utilization=fraction)
    assert max_batch(w, hw, s, hi) <= max_batch(w, hw, s, lo)


@settings(max_examples=40, deadline=None)
@given(
    model_id=st.sampled_from(MODELS),
    device_id=st.sampled_from(DEVICES),
    context=st.integers(1, 200_000),
    f1=st.floats(0.1, 1.0),
    f2=st.floats(0.1, 1.0),
)
def test_capacity_never_decreases_with_memory_or_a_smaller_kv_dtype(model_id, device_id, context, f1, f2):
    model = get_model(model_id)
    context = min(context, model.max_context)
    hw = get_hardware(device_id)
    small, large = sorted((f1, f2))

    def capacity(fraction: float, kv: str) -> int:
        return int(max_batch(kv_workload(model, kv), hw, Settings(memory_utilization=fraction), context))

    assert capacity(large, "bf16") >= capacity(small, "bf16")
    assert capacity(large, "fp8") >= capacity(large, "bf16")
    assert capacity(large, "int4") >= capacity(large, "fp8")


@settings(max_examples=40, deadline=None)
@given(
    model_id=st.sampled_from(MODELS),
    device_id=st.sampled_from(DEVICES),
    context=st.integers(2, 200_000),
    batch=st.integers(1, 512),
    block=st.sampled_from([1, 16, 128]),
)
def test_reported_max_fits_and_one_more_does_not(model_id, device_id, context, batch, block):
    # The capacity answers are the footprint's own: n sequences fit and n + 1 do not.
    model = get_model(model_id)
    context = min(context, model.max_context)
    w, hw, s = kv_workload(model), get_hardware(device_id), Settings(block_size=block)
    n = int(max_batch(w, hw, s, context))
    if n:
        assert footprint(w.step("decode", context - 1, n), hw, s, False).fits
    assert not footprint(w.step("decode", context - 1, n + 1), hw, s, False).fits
    longest = max_context(w, hw, s, batch)
    if longest > 1:
        assert footprint(w.step("decode", longest - 1, batch), hw, s, False).fits
    if 1 < longest < model.max_context:
        assert not footprint(w.step("decode", longest, batch), hw, s, False).fits
    assert np.all(np.diff(per_sequence(w, np.arange(1, 2000), block)) >= 0)
