"""A small dense model record the measurement and calibration tests share."""

from __future__ import annotations

from roofline.models import ModelConfig


def small_model(**extra) -> ModelConfig:
    """A 2-layer model big enough that its prefill is compute-bound on a CPU."""
    data = {
        "id": "small",
        "name": "small",
        "family": "test",
        "num_layers": 2,
        "hidden_size": 1024,
        "num_heads": 16,
        "num_kv_heads": 4,
        "head_dim": 64,
        "mlp": "gated",
        "intermediate_size": 2816,
        "vocab_size": 8000,
        "tied_embeddings": False,
        "max_context": 4096,
        "norm": "rmsnorm",
        "sources": [{"name": "test"}],
    }
    return ModelConfig.model_validate(data | extra)
