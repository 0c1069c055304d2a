"""The field checks of a Hugging Face ``config.json``: each field this project reads, checked for
its JSON type and range before anything is built from it (``roofline.hf_config`` reads it).
"""

from __future__ import annotations

import json

from roofline.datafiles import DataError
from roofline.model_schema import (
    MAX_CONTEXT,
    MAX_EXPERTS,
    MAX_EXPERTS_PER_TOKEN,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN_SIZE,
    MAX_INTERMEDIATE_SIZE,
    MAX_LAYERS,
    MAX_LORA_RANK,
    MAX_SHARED_EXPERTS,
    MAX_VOCAB_SIZE,
)

MAX_NAME_CHARS = 200

# The range of every whole-number field read from a config.json, checked before anything is
# built from it (a per-layer list of 10^8 entries took 41 s and 5.5 GB): the model record's
# limits (roofline.model_schema), which are what real models need times about four.
INT_RANGES: dict[str, tuple[int, int]] = {
    "hidden_size": (1, MAX_HIDDEN_SIZE),
    "num_hidden_layers": (1, MAX_LAYERS),
    "num_attention_heads": (1, MAX_HEADS),
    "num_key_value_heads": (1, MAX_HEADS),
    "head_dim": (1, MAX_HEAD_DIM),
    "vocab_size": (1, MAX_VOCAB_SIZE),
    "max_position_embeddings": (1, MAX_CONTEXT),
    "intermediate_size": (1, MAX_INTERMEDIATE_SIZE),
    "intermediate_size_mlp": (1, MAX_INTERMEDIATE_SIZE),
    "moe_intermediate_size": (1, MAX_INTERMEDIATE_SIZE),
    "sliding_window": (1, MAX_CONTEXT),
    "attention_chunk_size": (1, MAX_CONTEXT),
    "sliding_window_pattern": (1, MAX_LAYERS),
    "no_rope_layer_interval": (1, MAX_LAYERS),
    "num_local_experts": (2, MAX_EXPERTS),
    "num_experts": (2, MAX_EXPERTS),
    "n_routed_experts": (2, MAX_EXPERTS),
    "num_experts_per_tok": (1, MAX_EXPERTS_PER_TOKEN),
    "experts_per_token": (1, MAX_EXPERTS_PER_TOKEN),
    "n_shared_experts": (0, MAX_SHARED_EXPERTS),
    "first_k_dense_replace": (0, MAX_LAYERS),
    "max_window_layers": (0, MAX_LAYERS),
    "moe_layer_freq": (1, MAX_LAYERS),
    "decoder_sparse_step": (1, MAX_LAYERS),
    "interleave_moe_layer_step": (1, MAX_LAYERS),
    "q_lora_rank": (1, MAX_LORA_RANK),
    "kv_lora_rank": (1, MAX_LORA_RANK),
    "qk_nope_head_dim": (1, MAX_HEAD_DIM),
    "qk_rope_head_dim": (1, MAX_HEAD_DIM),
    "v_head_dim": (1, MAX_HEAD_DIM),
}
FLAG_FIELDS = ("tie_word_embeddings", "attention_bias", "use_sliding_window", "use_qk_norm")
# Per-layer lists: one entry per layer (layer_types, no_rope_layers) or layer indices (mlp_only_layers).
LIST_FIELDS = ("layer_types", "no_rope_layers", "mlp_only_layers")
TEXT_FIELDS = ("model_type", "_name_or_path")


def shown(value: object) -> str:
    """A value as an error shows it, short: a 5,000-entry list or a 300-digit number is not
    repeated in full."""
    if isinstance(value, list):
        head = ", ".join(shown(v) for v in value[:3])
        return f"[{head}{', …' if len(value) > 3 else ''}] ({len(value):,} entries)" if len(value) > 3 else f"[{head}]"
    if isinstance(value, dict):
        return f"an object of {len(value):,} fields"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    text = json.dumps(value) if isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else f"{text[:30]}… ({len(text):,} characters)"


def json_type(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return {str: "text", list: "a list", dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def check_fields(data: dict, origin: str, prefix: str = "") -> None:
    """Every field this reader uses, checked for its JSON type and range before anything is
    built from it; an error names the field, the value and what is allowed."""

    def fail(key: str, allowed: str, value: object) -> None:
        raise DataError(f"{origin}: field {prefix + key!r} must be {allowed}, got {shown(value)}")

    layers = data.get("num_hidden_layers")
    for key, (lo, hi) in INT_RANGES.items():
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            fail(key, f"an integer from {lo:,} to {hi:,} (or null)", value)
    for key in FLAG_FIELDS:
        value = data.get(key)
        if value is not None and not isinstance(value, bool):
            fail(key, "true or false (or null)", value)
    for key in TEXT_FIELDS:
        value = data.get(key)
        if value is not None and not (isinstance(value, str) and len(value) <= MAX_NAME_CHARS):
            fail(key, f"text of at most {MAX_NAME_CHARS} characters", value)
    for key in LIST_FIELDS:
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, list):
            fail(key, f"a list ({json_type(value)} is not one)", value)
        if len(value) > MAX_LAYERS:
            fail(key, f"a list of at most {MAX_LAYERS:,} entries (one per layer), not {len(value):,}", value)
        if key == "layer_types":
            if not all(isinstance(v, str) and len(v) <= 64 for v in value):
                fail(key, 'a list of layer kinds as text ("full_attention", "sliding_attention")', value)
        elif key == "no_rope_layers":
            if not all(v in (0, 1) and not isinstance(v, float) for v in value):
                fail(key, "a list of 0 and 1 (0: a layer without RoPE)", value)
        elif not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_LAYERS for v in value):
            fail(key, f"a list of layer indices from 0 to {MAX_LAYERS - 1:,}", value)
        if key != "mlp_only_layers" and isinstance(layers, int) and value and len(value) != layers:
            fail(key, f"a list of one entry per layer ({layers:,}, num_hidden_layers), not {len(value):,}", value)


def fp8_checkpoint(config: dict, repo: str, origin: str) -> dict | None:
    """The scaling of an FP8 checkpoint's weights as its config.json's ``quantization_config`` (or
    its ``text_config``'s) says: quant_method "fp8" (any case, as vLLM reads it) with one scale per
    ``weight_block_size`` block where it gives one, else one per tensor; as model_db's
    ``fp8_checkpoint``. None for any other checkpoint (bf16, MXFP4, compressed-tensors, ...)."""
    field = "quantization_config"
    quant = config.get(field)
    nested = config.get("text_config")
    if quant is None and isinstance(nested, dict) and nested.get(field) is not None:
        field, quant = "text_config.quantization_config", nested.get(field)
    if quant is None:
        return None
    if not isinstance(quant, dict):
        raise DataError(f"{origin}: field {field!r} must be an object (or null), got {shown(quant)}")
    method = quant.get("quant_method")
    if not (isinstance(method, str) and method.strip().lower() == "fp8"):
        return None
    block = quant.get("weight_block_size")
    ok = isinstance(block, list) and len(block) == 2
    if block is not None and not (ok and all(type(v) is int and 1 <= v <= 1 << 16 for v in block)):
        raise DataError(
            f"{origin}: field '{field}.weight_block_size' must be two positive integers "
            f"(rows, columns of a scaled block) or null, got {shown(block)}"
        )
    said = f"weight_block_size {block}" if block else "no weight_block_size: one scale per tensor"
    if block and block != [128, 128]:
        said += " (the kernel tables time 128 x 128 blocks: read at those)"
    return {
        "repo": repo,
        "scaling": "block" if block else "per-tensor",
        "source": {"name": f"its config.json ({origin}): {field} quant_method fp8, {said}"},
    }
