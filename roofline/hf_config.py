"""Any Hugging Face ``config.json`` of the common families, turned into a model record offline.

The fields transformers reads for each family map onto ``ModelConfig``; where the published file
leaves a key out, the default of that family's transformers config class applies (Gemma 3's
files omit their head counts, for one). Anything the model record cannot express (an MoE layer
list that is not a regular pattern, a local/global layout that is not "every n-th layer global")
is an error that says so, as is an unknown ``model_type`` or a missing field.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from roofline.datafiles import DataError, format_validation_error, read_regular_file, strict_json
from roofline.hf_checks import (  # noqa: F401 (the field checks are importable from here too)
    FLAG_FIELDS,
    INT_RANGES,
    LIST_FIELDS,
    MAX_NAME_CHARS,
    TEXT_FIELDS,
    check_fields,
    fp8_checkpoint,
    json_type,
    shown,
)
from roofline.model_schema import MAX_CONTEXT, ModelConfig

SUPPORTED_FAMILIES: tuple[str, ...] = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "gemma2",
    "gemma3",
    "phi3",
    "deepseek_v3",
    "gpt_oss",
    "llama4",
)
# model_type values that name a family above (multimodal wrappers carry the text model inside).
ALIASES = {"gemma3_text": "gemma3", "llama4_text": "llama4", "kimi_k2": "deepseek_v3", "mistral3": "mistral"}
MAX_CONFIG_BYTES = 1 << 20

# transformers' config-class defaults for keys a published file may omit, per family.
# Qwen's window is 4096 unless given, and acts only with use_sliding_window (transformers' configs).
QWEN_WINDOW = {"use_sliding_window": False, "sliding_window": 4096}
FAMILY_DEFAULTS: dict[str, dict[str, object]] = {
    "llama": {"max_position_embeddings": 2048, "tie_word_embeddings": False, "attention_bias": False},
    "mistral": {"max_position_embeddings": 4096 * 32, "tie_word_embeddings": False, "sliding_window": 4096},
    "mixtral": {"max_position_embeddings": 4096 * 32, "tie_word_embeddings": False, "sliding_window": None},
    "qwen2": {"max_position_embeddings": 32768, "tie_word_embeddings": False, **QWEN_WINDOW},
    "qwen3": {"max_position_embeddings": 32768, "tie_word_embeddings": False, **QWEN_WINDOW},
    "qwen3_moe": {
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        **QWEN_WINDOW,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    },
    "gemma2": {
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
        "head_dim": 256,
        "sliding_window": 4096,
    },
    # Gemma3TextConfig's defaults (the 1B model's shape): Gemma 3 4B's published text_config
    # leaves its heads, head dim and vocabulary to these.
    "gemma3": {
        "vocab_size": 262_208,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131_072,
        "tie_word_embeddings": True,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
    },
    "phi3": {"max_position_embeddings": 4096, "tie_word_embeddings": False, "sliding_window": None},
    "deepseek_v3": {
        "tie_word_embeddings": False,
        "first_k_dense_replace": 0,
        "moe_layer_freq": 1,
        "n_shared_experts": None,
    },
    "gpt_oss": {"tie_word_embeddings": False, "sliding_window": 128},
    "llama4": {
        "tie_word_embeddings": False,
        "interleave_moe_layer_step": 1,
        "no_rope_layer_interval": 4,
        "use_qk_norm": True,
        "attention_chunk_size": 8192,
    },
}


class _Fields:
    """Reads a checked config dict, with the family's defaults and errors that name the key."""

    def __init__(self, data: dict, family: str, origin: str, prefix: str = ""):
        self.data, self.family, self.origin, self.prefix = data, family, origin, prefix
        self.defaults = FAMILY_DEFAULTS.get(family, {})

    def get(self, key: str, default: object = None) -> object:
        if key in self.data:
            return self.data[key]
        return self.defaults.get(key, default)

    def need(self, key: str) -> object:
        value = self.get(key)
        if value is None:
            raise DataError(
                f"{self.origin}: missing field {self.prefix + key!r} (needed for model_type {self.family!r})"
            )
        return value

    def integer(self, key: str, default: object = None) -> int:
        """A whole number in the field's range (``INT_RANGES``); a family default is checked too."""
        value = self.need(key) if default is None else self.get(key, default)
        if value is None:
            value = default
        lo, hi = INT_RANGES.get(key, (1, MAX_CONTEXT))
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise DataError(
                f"{self.origin}: field {self.prefix + key!r} must be an integer from {lo:,} to {hi:,}, "
                f"got {shown(value)}"
            )
        return value


def _every_nth(flags: list[bool], what: str, origin: str) -> int | None:
    """The n for which exactly layers n-1, 2n-1, ... are flagged (None: none flagged)."""
    flagged = [i for i, f in enumerate(flags) if f]
    if not flagged:
        return None
    n = flagged[0] + 1
    if flagged != [i for i in range(len(flags)) if (i + 1) % n == 0]:
        raise DataError(
            f"{origin}: {what} on layers {flagged[:8]}{'...' if len(flagged) > 8 else ''} is not one every n layers, "
            "which the model record cannot express"
        )
    return n


def slugify(text: str) -> str:
    """An id from any text: lower-case letters, digits, dots and dashes, at most 100 characters."""
    slug = re.sub(r"[^a-z0-9.-]+", "-", text.lower())[:100].strip("-.")
    return slug or "custom-model"


def model_from_hf_config(
    config: dict, model_id: str | None = None, name: str | None = None, origin: str = "config.json"
) -> ModelConfig:
    """A ``ModelConfig`` from a parsed Hugging Face ``config.json`` (no network)."""
    if not isinstance(config, dict):
        raise DataError(f"{origin}: a config.json holds one JSON object, got {json_type(config)}")
    nested = config.get("text_config")
    if nested is not None and not isinstance(nested, dict):
        raise DataError(f"{origin}: field 'text_config' must be an object (or null), got {shown(nested)}")
    check_fields(config, origin)
    data, prefix = (nested, "text_config.") if nested else (config, "")
    if nested:
        check_fields(nested, origin, prefix)
    model_type = data.get("model_type") or config.get("model_type")
    family = ALIASES.get(model_type, model_type)
    if model_type is None:
        raise DataError(
            f"{origin}: no 'model_type' field: not a Hugging Face config.json; supported model types: "
            f"{', '.join(SUPPORTED_FAMILIES)}"
        )
    if family not in SUPPORTED_FAMILIES:
        raise DataError(
            f"{origin}: model_type {model_type!r} is not supported; supported: {', '.join(SUPPORTED_FAMILIES)} "
            f"(and {', '.join(ALIASES)})"
        )
    f = _Fields(data, family, origin, prefix)
    hidden = f.integer("hidden_size")
    layers = f.integer("num_hidden_layers")
    heads = f.integer("num_attention_heads")
    kv_heads = f.integer("num_key_value_heads", heads)
    head_dim = f.integer("head_dim", max(1, hidden // heads))
    vocab = f.integer("vocab_size")
    max_context = f.integer("max_position_embeddings")
    label = name or config.get("_name_or_path") or data.get("_name_or_path")
    record_id = model_id or slugify(str(label or family))
    record: dict[str, object] = {
        "id": record_id,
        "name": str(label or record_id),
        "family": family,
        "num_layers": layers,
        "hidden_size": hidden,
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "mlp": "gated",
        "intermediate_size": f.integer("intermediate_size"),
        "vocab_size": vocab,
        "tied_embeddings": bool(f.get("tie_word_embeddings", False)),
        "max_context": max_context,
        "norm": "rmsnorm",
        "sources": [{"name": f"Hugging Face config.json ({origin})"}],
    }
    checkpoint = fp8_checkpoint(config, str(label or record_id).ljust(3, "_"), origin)
    if checkpoint:
        record["fp8_checkpoint"] = checkpoint
    if f.get("attention_bias") or family == "qwen2":
        record["qkv_bias"] = True

    # Local attention: a sliding window on every layer, or on all but every n-th.
    window = f.get("sliding_window")
    if family == "qwen2" or family == "qwen3" or family == "qwen3_moe":
        window = window if f.get("use_sliding_window") else None
    if window is not None and window >= max_context:
        window = None  # a window as long as the context is no window (Phi-4)
    layer_types = f.get("layer_types")
    if family == "gemma2":
        record["norms_per_layer"] = 4
        if window:
            record |= {"sliding_window": window, "global_layer_interval": 2}
    elif family == "gemma3":
        record |= {"norms_per_layer": 4, "qk_norm": "rmsnorm"}
        if layer_types:
            interval = _every_nth([t == "full_attention" for t in layer_types], "global attention", origin)
        else:
            interval = f.integer("sliding_window_pattern")
        record |= {"sliding_window": window, "global_layer_interval": interval}
    elif family == "gpt_oss":
        types = layer_types or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
        record |= {
            "sliding_window": window,
            "global_layer_interval": _every_nth([t == "full_attention" for t in types], "global attention", origin),
            "attention_sinks": True,
        }
    elif family == "llama4":
        chunk = f.get("attention_chunk_size")
        no_rope = f.get("no_rope_layers") or [
            int((i + 1) % f.integer("no_rope_layer_interval") != 0) for i in range(layers)
        ]
        record |= {
            "attention_chunk_size": chunk,
            # NoPE layers (no_rope_layers[i] == 0) attend globally; the others are chunked.
            "global_layer_interval": _every_nth([v == 0 for v in no_rope], "global attention", origin),
        }
        if f.get("use_qk_norm"):
            record["qk_norm"] = "l2"
    elif family in ("qwen2", "qwen3") and window:
        # transformers slides layers i >= max_window_layers (28 unless given), or as layer_types says
        first = f.integer("max_window_layers", 28)
        types = layer_types or ["sliding_attention" if i >= first else "full_attention" for i in range(layers)]
        if "sliding_attention" in types:
            what = "global attention" + ("" if layer_types else f" (layers below max_window_layers {first})")
            full = _every_nth([t != "sliding_attention" for t in types], what, origin)
            record |= {"sliding_window": window, "global_layer_interval": full}
    elif window:
        record["sliding_window"] = window
    if family in ("qwen3", "qwen3_moe"):
        record["qk_norm"] = "rmsnorm"

    # Mixture of experts.
    if family == "mixtral":
        record["moe"] = {
            "num_experts": f.integer("num_local_experts"),
            "experts_per_token": f.integer("num_experts_per_tok"),
            "expert_intermediate_size": record["intermediate_size"],
        }
    elif family == "qwen3_moe":
        if f.get("mlp_only_layers"):
            raise DataError(f"{origin}: mlp_only_layers {f.get('mlp_only_layers')} is not supported (dense layers)")
        record["moe"] = {
            "num_experts": f.integer("num_experts"),
            "experts_per_token": f.integer("num_experts_per_tok"),
            "expert_intermediate_size": f.integer("moe_intermediate_size"),
            "layer_interval": f.integer("decoder_sparse_step", 1),
        }
    elif family == "deepseek_v3":
        shared = f.get("n_shared_experts") or 0
        record["moe"] = {
            "num_experts": f.integer("n_routed_experts"),
            "experts_per_token": f.integer("num_experts_per_tok"),
            "shared_experts": shared,
            "expert_intermediate_size": f.integer("moe_intermediate_size"),
            "first_dense_layers": f.integer("first_k_dense_replace", 0),
        }
        if f.integer("moe_layer_freq", 1) != 1:  # DeepSeek places them on i % freq == 0, not (i + 1) % freq
            raise DataError(f"{origin}: moe_layer_freq {f.get('moe_layer_freq')} is not supported (every layer MoE: 1)")
        record["mla"] = {
            "q_lora_rank": f.get("q_lora_rank"),
            "kv_lora_rank": f.integer("kv_lora_rank"),
            "qk_nope_head_dim": f.integer("qk_nope_head_dim"),
            "qk_rope_head_dim": f.integer("qk_rope_head_dim"),
            "v_head_dim": f.integer("v_head_dim"),
        }
        record["head_dim"] = f.integer("v_head_dim")  # per-head widths are in the MLA section
    elif family == "gpt_oss":
        record["moe"] = {
            "num_experts": f.integer("num_local_experts"),
            "experts_per_token": f.integer("num_experts_per_tok", f.get("experts_per_token")),
            "expert_intermediate_size": record["intermediate_size"],
        }
    elif family == "llama4":
        experts = f.integer("num_local_experts")
        record["intermediate_size"] = f.integer("intermediate_size_mlp", record["intermediate_size"])
        record["moe"] = {
            "num_experts": experts,
            "experts_per_token": f.integer("num_experts_per_tok"),
            "shared_experts": 1,
            "expert_intermediate_size": f.integer("intermediate_size"),
            "layer_interval": f.integer("interleave_moe_layer_step", 1),
        }
    # Every supported family rotates its queries and keys (RoPE) by pairs of dimensions: an odd
    # rotated width builds no model (the rotation's halves differ by one).
    mla = record.get("mla")
    rope_field, rope_dim = ("qk_rope_head_dim", mla["qk_rope_head_dim"]) if mla else ("head_dim", head_dim)
    if isinstance(rope_dim, int) and rope_dim % 2:
        given = "" if f.get(rope_field) is not None else f" (hidden_size {hidden} // num_attention_heads {heads})"
        raise DataError(
            f"{origin}: field {prefix + rope_field!r} must be even (rotary embeddings turn pairs of dimensions), "
            f"got {rope_dim}{given}"
        )
    try:
        return ModelConfig.model_validate(record)
    except ValidationError as exc:
        raise DataError(format_validation_error(Path(origin), exc)) from None


def parse_hf_config(
    text: bytes | str, origin: str = "config.json", model_id: str | None = None, name: str | None = None
) -> ModelConfig:
    """Strict JSON (no NaN or Infinity), at most 1 MiB, then ``model_from_hf_config``."""
    if len(text) > MAX_CONFIG_BYTES:
        raise DataError(f"{origin}: {len(text):,} bytes is more than a config.json holds (limit {MAX_CONFIG_BYTES:,})")

    try:
        data = strict_json(text)
    except (ValueError, RecursionError) as exc:
        raise DataError(f"{origin}: not valid JSON ({str(exc)[:120]})") from None
    return model_from_hf_config(data, model_id=model_id, name=name, origin=origin)


def load_hf_config(path: str | Path, model_id: str | None = None) -> ModelConfig:
    path = Path(path)
    text = read_regular_file(path, MAX_CONFIG_BYTES)
    return parse_hf_config(
        text, str(path), model_id or slugify(path.parent.name if path.stem == "config" else path.stem)
    )
