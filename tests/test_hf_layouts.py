"""Which layers a Hugging Face config.json makes local or MoE, as transformers builds the model:
Qwen2 and Qwen3 slide only layers from ``max_window_layers`` on (28 unless given), or as
``layer_types`` says; Qwen3-MoE slides every layer; a layout the model record cannot hold is
refused, never read as another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.datafiles import DataError
from roofline.hf_config import model_from_hf_config
from roofline.memory import kv_cache_bytes
from roofline.workload import Precision

QWEN = {
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 4,
    "intermediate_size": 512,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
    "use_sliding_window": True,
    "sliding_window": 16,
}


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_qwen_slides_the_layers_transformers_slides(family):
    def read(**extra):
        return model_from_hf_config(QWEN | {"model_type": family} | extra)

    # By hand, at a 200-token context: 2 KV heads x 64 wide x K and V x 2 B = 512 B a token and
    # layer; a full layer holds 200 tokens, a sliding one 16.
    def kv(model):
        return float(kv_cache_bytes(model, Precision(), 1, 1, 200))

    # max_window_layers unset is 28: none of the 4 layers slides (transformers' Qwen2Config).
    default = read()
    assert (default.sliding_window, default.local_layers, kv(default)) == (None, 0, 4 * 200 * 512)
    every = read(max_window_layers=0)
    assert (every.sliding_window, every.local_layers, kv(every)) == (16, 4, 4 * 16 * 512)
    # layer_types, where given, decides: global on every second layer.
    types = ["sliding_attention", "full_attention"] * 2
    halves = read(layer_types=types, max_window_layers=0)
    assert (halves.local_layers, kv(halves)) == (2, 2 * 200 * 512 + 2 * 16 * 512)
    assert read(use_sliding_window=False).sliding_window is None
    # No sliding_window key: transformers' 4096 (shorter than this context of 32,768).
    unset = model_from_hf_config(
        {k: v for k, v in QWEN.items() if k != "sliding_window"}
        | {"model_type": family, "max_window_layers": 0, "max_position_embeddings": 32768}
    )
    assert unset.sliding_window == 4096 and unset.local_layers == 4
    # The first layers global and the rest sliding: no window on every layer, nor on all but
    # every n-th, so refused by name (it had been read as a window on all 4 layers).
    with pytest.raises(DataError, match=r"global attention \(layers below max_window_layers 2\) on layers \[0, 1\]"):
        read(max_window_layers=2)


def test_qwen3_moe_slides_every_layer():
    config = QWEN | {
        "model_type": "qwen3_moe",
        "max_window_layers": 2,  # transformers' Qwen3-MoE does not read it
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
    }
    assert model_from_hf_config(config).local_layers == 4


def test_deepseek_moe_layers_every_other_one_are_refused():
    """DeepSeek places its MoE layers on i % moe_layer_freq == 0 after the dense ones; the record
    counts (i + 1) % freq == 0 (Llama 4's, Qwen3-MoE's), so a frequency above 1 is refused."""
    path = Path(__file__).parent / "data" / "hf_configs" / "deepseek-v3.json"
    config = json.loads(path.read_text())
    assert model_from_hf_config(config).moe_layers == 58  # 61 layers, the first 3 dense
    with pytest.raises(DataError, match="moe_layer_freq 2 is not supported"):
        model_from_hf_config(config | {"moe_layer_freq": 2})
