"""KV-cache capacity: hand-worked values and properties (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.hardware import get_hardware, load_hardware
from roofline.kvcache import (
    KVConfig,
    analyze_kv,
    capacity_curves,
    kv_bytes_per_sequence,
    kv_crossover_context,
    max_batch,
    max_context,
    memory_budget,
)
from roofline.llm import Precision
from roofline.models import get_model, load_models

H100 = get_hardware("h100-sxm")
LLAMA8 = get_model("llama-3.1-8b")


def test_max_batch_llama_3_1_8b_on_h100_at_8k():
    bf16 = analyze_kv(KVConfig(LLAMA8), H100, batch=1, context=8192)
    # usable: 80 GiB * 0.9 = 85,899,345,920 * 0.9 = 77,309,411,328 B
    assert bf16["capacity_bytes"] == 77_309_411_328
    # weights: 8,030,261,248 params * 2 B = 16,060,522,496 B
    assert bf16["weights_bytes"] == 16_060_522_496
    # workspace for 8192 batched tokens: the SwiGLU activation reads gate and up and writes the
    # product, 3 * 8192 * 14336 * 2 B = 704,643,072 B (the largest op)
    assert bf16["workspace_bytes"] == 704_643_072
    # budget: 77,309,411,328 - 16,060,522,496 - 704,643,072 = 60,544,245,760 B
    assert bf16["kv_budget_bytes"] == 60_544_245_760
    # one 8192-token sequence: 8192 * 131,072 B = 1,073,741,824 B; 60,544,245,760 / that = 56.39 -> 56
    assert bf16["kv_bytes_per_sequence"] == 1_073_741_824
    assert bf16["max_batch"] == 56
    # fp8 KV halves the sequence: 536,870,912 B -> 112.78 -> 112
    fp8 = analyze_kv(KVConfig(LLAMA8, Precision(kv="fp8")), H100, batch=1, context=8192)
    assert fp8["kv_bytes_per_sequence"] == 536_870_912 and fp8["max_batch"] == 112


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
        result = analyze_kv(KVConfig(get_model(model_id)), get_hardware("mi300x"), 1, 1024)
        assert result["kv_bytes_per_token_per_layer"] == per_layer, model_id


def test_sliding_window_stops_the_cache_growing():
    mistral = KVConfig(get_model("mistral-7b-v0.1"))
    # 32 layers * 4096 tokens * 4096 B per token per layer = 536,870,912 B, at 8k or 32k alike
    assert kv_bytes_per_sequence(mistral, 4096) == 32 * 4096 * 4096
    assert kv_bytes_per_sequence(mistral, 32768) == kv_bytes_per_sequence(mistral, 8192) == 536_870_912


def test_paging_rounds_up_to_blocks():
    cfg = KVConfig(LLAMA8, block_size=16)
    # 1000 tokens need 63 blocks = 1008 tokens: 8 tokens * 131,072 B wasted
    assert kv_bytes_per_sequence(cfg, 1000) - kv_bytes_per_sequence(cfg, 1000, paged=False) == 8 * 131_072
    assert analyze_kv(cfg, H100, 1, 1000)["paging_waste_bytes"] == 8 * 131_072


def test_tp_splits_kv_heads_and_weights():
    one = analyze_kv(KVConfig(get_model("llama-3.1-70b"), tp=2), H100, 1, 8192)
    # 8 KV heads over 2 devices: 4 heads * 128 * 2 (K,V) * 2 B = 2048 B per layer per device
    assert one["kv_bytes_per_token_per_layer"] == 2048


def test_model_that_does_not_fit_says_what_to_do():
    result = analyze_kv(KVConfig(get_model("llama-3.1-405b")), H100, 1, 1024)
    assert not result["fits"] and result["max_batch"] == 0
    assert result["smallest_tp"] == 16
    assert "weights alone need 811.7 GB" in result["message"] and "use TP >= 16" in result["message"]


def test_crossover_by_hand():
    # Decode at batch 32 reads 15.01e9 B of weights (all but the embedding table) and
    # 32 * C * 131,072 B of KV (plus 32 * 131,072 B written): KV >= weights first at
    # C = ceil(15,009,849,344 / (32 * 131,072)) - 1 = 3578 - 1 = 3577 (the new token's write counts).
    assert kv_crossover_context(KVConfig(LLAMA8), 32) == 3577
    assert kv_crossover_context(KVConfig(get_model("mistral-7b-v0.1")), 1) is None


def test_curves_for_many_devices_at_once():
    devices = list(load_hardware().values())
    curves = capacity_curves(KVConfig(LLAMA8), devices)
    assert curves["max_batch"].shape == (len(devices), len(curves["contexts"]))
    assert curves["contexts"][0] == 512 and curves["contexts"][-1] == 131072


def test_bad_input():
    with pytest.raises(ValueError, match=r"memory_utilization must be in \(0, 1\], got 1.5"):
        KVConfig(LLAMA8, memory_utilization=1.5)
    with pytest.raises(ValueError, match="context: 5000 exceeds llama-2-7b's maximum context of 4096"):
        analyze_kv(KVConfig(get_model("llama-2-7b")), H100, 1, 5000)


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
    cfg = KVConfig(model, Precision(kv=kv), memory_utilization=fraction)
    budget = memory_budget(cfg, get_hardware(device_id))["kv_budget_bytes"]
    assert max_batch(budget, kv_bytes_per_sequence(cfg, hi)) <= max_batch(budget, kv_bytes_per_sequence(cfg, lo))


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
        cfg = KVConfig(model, Precision(kv=kv), memory_utilization=fraction)
        return int(max_batch(memory_budget(cfg, hw)["kv_budget_bytes"], kv_bytes_per_sequence(cfg, context)))

    assert capacity(large, "bf16") >= capacity(small, "bf16")
    assert capacity(large, "fp8") >= capacity(large, "bf16")
    assert capacity(large, "int4") >= capacity(large, "fp8")


@settings(max_examples=40, deadline=None)
@given(
    model_id=st.sampled_from(MODELS),
    device_id=st.sampled_from(DEVICES),
    context=st.integers(1, 200_000),
    batch=st.integers(1, 512),
    block=st.sampled_from([1, 16, 128]),
)
def test_reported_max_fits_and_one_more_does_not(model_id, device_id, context, batch, block):
    model = get_model(model_id)
    context = min(context, model.max_context)
    cfg = KVConfig(model, block_size=block)
    budget = memory_budget(cfg, get_hardware(device_id))["kv_budget_bytes"]
    per_seq = kv_bytes_per_sequence(cfg, context)
    n = int(max_batch(budget, per_seq))
    assert n * per_seq <= budget < (n + 1) * per_seq
    longest = max_context(cfg, budget, batch)
    if longest:
        assert batch * kv_bytes_per_sequence(cfg, longest) <= budget
    if longest < model.max_context:
        assert batch * kv_bytes_per_sequence(cfg, longest + 1) > budget
    assert np.all(np.diff(kv_bytes_per_sequence(cfg, np.arange(1, 2000))) >= 0)
