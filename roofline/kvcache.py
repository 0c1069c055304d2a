"""KV-cache capacity: how many sequences fit at a context length, and what the cache costs decode.

Conventions:
- Capacity per device = the vendor's "GB" read as GiB (an "80 GB" H100 exposes 80 GiB) x the
  usable fraction (a serving engine's memory-utilisation setting, default 0.9).
- Budget for the cache = capacity - weights (at their dtype, split over TP) - an activation
  workspace sized for the largest batch of tokens one forward pass processes
  (``max_batched_tokens``, like vLLM's max_num_batched_tokens).
- Paged allocation: each sequence holds whole blocks of ``block_size`` tokens, so a partly
  filled last block is waste. Sliding-window layers hold at most ``window`` tokens.
- Per device: KV heads split over TP (replicated when fewer than TP); MLA's latent is not split.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from roofline.engine import Ceilings, evaluate
from roofline.hardware import Hardware
from roofline.llm import (
    DEFAULT_MEMORY_UTILIZATION,
    Precision,
    StepConfig,
    kv_heads_per_device,
    step_ops,
    usable_memory_bytes,
    validate_tp,
    weight_bytes_per_device,
)
from roofline.models import ModelConfig

DEFAULT_BLOCK_SIZE = 16
DEFAULT_MAX_BATCHED_TOKENS = 8192
TP_DEGREES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class KVConfig:
    model: ModelConfig
    precision: Precision = field(default_factory=Precision)
    tp: int = 1
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    block_size: int = DEFAULT_BLOCK_SIZE
    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS

    def __post_init__(self) -> None:
        validate_tp(self.model, self.tp)
        if not 0 < self.memory_utilization <= 1:
            raise ValueError(f"memory_utilization must be in (0, 1], got {self.memory_utilization}")
        if self.block_size < 1:
            raise ValueError(f"block_size must be a positive integer, got {self.block_size}")
        if self.max_batched_tokens < 1:
            raise ValueError(f"max_batched_tokens must be a positive integer, got {self.max_batched_tokens}")


def kv_bytes_per_token_per_layer(model: ModelConfig, precision: Precision, tp: int = 1) -> float:
    """Bytes one token adds to one layer's cache on one device."""
    if model.mla:
        elements = model.kv_elements_per_token_per_layer()
    else:
        elements = 2 * kv_heads_per_device(model, tp) * model.head_dim
    return elements * precision.kv_bytes


def kv_bytes_per_sequence(cfg: KVConfig, context: np.ndarray | float, paged: bool = True) -> np.ndarray:
    """Cache bytes of one sequence of ``context`` tokens on one device.

    Full-attention layers hold every token; sliding-window layers at most the window. With
    paging each layer's tokens are rounded up to whole blocks.
    """
    m = cfg.model
    ctx = np.asarray(context, float)
    per_layer = kv_bytes_per_token_per_layer(m, cfg.precision, cfg.tp)

    def held(tokens: np.ndarray) -> np.ndarray:
        return np.ceil(tokens / cfg.block_size) * cfg.block_size if paged else tokens

    local = m.local_layers
    total = (m.num_layers - local) * held(ctx)
    if local:
        total = total + local * held(np.minimum(ctx, m.sliding_window))
    return total * per_layer


def workspace_bytes(cfg: KVConfig) -> float:
    """Activations of the largest op in a prefill pass of ``max_batched_tokens`` tokens."""
    tokens = min(cfg.max_batched_tokens, cfg.model.max_context)
    table = evaluate(step_ops(StepConfig(cfg.model, "prefill", 1, tokens, cfg.precision, cfg.tp)), _UNIT_CEILINGS)
    return float((table.act_bytes / table.count).max())


# Byte counts do not depend on the device; any ceilings will do for evaluating them.
_UNIT_CEILINGS = Ceilings(
    name="unit",
    peak_flops_per_s={"fp32": 1.0, "bf16": 1.0, "fp16": 1.0, "fp8": 1.0, "int8": 1.0},
    memory_bandwidth_bytes_per_s=1.0,
    link_bandwidth_bytes_per_s=1.0,
)


def memory_budget(cfg: KVConfig, hw: Hardware) -> dict[str, float]:
    capacity = usable_memory_bytes(hw.memory_gb, cfg.memory_utilization)
    weights = weight_bytes_per_device(cfg.model, cfg.precision, cfg.tp)
    workspace = workspace_bytes(cfg)
    return {
        "capacity_bytes": capacity,
        "weights_bytes": weights,
        "workspace_bytes": workspace,
        "kv_budget_bytes": max(0.0, capacity - weights - workspace),
    }


def max_batch(budget_bytes: np.ndarray | float, per_sequence_bytes: np.ndarray | float) -> np.ndarray:
    """Whole sequences that fit: floor(budget / bytes per sequence); broadcasts."""
    return np.floor(np.asarray(budget_bytes, float) / np.asarray(per_sequence_bytes, float)).astype(np.int64)


def max_context(cfg: KVConfig, budget_bytes: float, batch: int) -> int:
    """Longest context (up to the model's maximum) at which ``batch`` sequences fit; 0 if none."""
    contexts = np.arange(1, cfg.model.max_context + 1)
    need = batch * kv_bytes_per_sequence(cfg, contexts)  # non-decreasing in context
    return int(np.searchsorted(need, budget_bytes, side="right"))


def context_grid(model: ModelConfig, points_per_octave: int = 4) -> np.ndarray:
    """Contexts from 512 (or the model's maximum, if smaller) to the maximum, log-spaced."""
    lo = min(512, model.max_context)
    octaves = max(1.0, np.log2(model.max_context / lo))
    grid = np.round(np.geomspace(lo, model.max_context, int(octaves * points_per_octave) + 1)).astype(int)
    return np.unique(np.append(grid, model.max_context))


def capacity_curves(cfg: KVConfig, hardware: list[Hardware], contexts: np.ndarray | None = None) -> dict:
    """Max concurrent sequences against context for many devices at once (one numpy pass)."""
    contexts = context_grid(cfg.model) if contexts is None else np.asarray(contexts)
    budgets = np.array([memory_budget(cfg, hw)["kv_budget_bytes"] for hw in hardware])
    per_seq = kv_bytes_per_sequence(cfg, contexts)
    return {"contexts": contexts, "max_batch": max_batch(budgets[:, None], per_seq[None, :])}


def smallest_fitting_tp(
    model: ModelConfig,
    precision: Precision,
    hw: Hardware,
    memory_utilization: float,
    max_batched_tokens: int,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> int | None:
    """The smallest valid TP degree at which weights, workspace and one block per layer fit."""
    for tp in TP_DEGREES:
        try:
            cfg = KVConfig(model, precision, tp, memory_utilization, block_size, max_batched_tokens)
        except ValueError:
            continue
        if memory_budget(cfg, hw)["kv_budget_bytes"] >= kv_bytes_per_sequence(cfg, 1):
            return tp
    return None


def decode_read_bytes(cfg: KVConfig, batch: int, contexts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(weight bytes, KV bytes) a decode step reads per device at each context."""
    step = StepConfig(cfg.model, "decode", batch, np.asarray(contexts), cfg.precision, cfg.tp)
    table = evaluate(step_ops(step), _UNIT_CEILINGS)
    return table.weight_bytes.sum(axis=0), table.kv_bytes.sum(axis=0)


def kv_crossover_context(cfg: KVConfig, batch: int) -> int | None:
    """Smallest context at which a decode step reads more KV-cache bytes than weight bytes.

    None when the cache never overtakes the weights below the model's maximum (a sliding
    window or a small batch can keep it below). KV reads grow with context while weight reads
    do not depend on it, so the first crossing is found by bisection.
    """

    def kv_overtakes(context: int) -> bool:
        weights, kv = decode_read_bytes(cfg, batch, np.array([context]))
        return bool(kv[0] >= weights[0])

    lo, hi = 1, cfg.model.max_context - 1
    if not kv_overtakes(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if kv_overtakes(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def analyze_kv(cfg: KVConfig, hw: Hardware, batch: int, context: int) -> dict[str, object]:
    """Everything the KV page and ``python -m roofline kv`` show, for one device."""
    m = cfg.model
    if context > m.max_context:
        raise ValueError(f"context: {context} exceeds {m.id}'s maximum context of {m.max_context}")
    if context < 1 or batch < 1:
        raise ValueError("batch and context must be positive integers")
    budget = memory_budget(cfg, hw)
    per_seq = float(kv_bytes_per_sequence(cfg, context))
    unpaged = float(kv_bytes_per_sequence(cfg, context, paged=False))
    fits_weights = budget["capacity_bytes"] - budget["weights_bytes"] - budget["workspace_bytes"] > 0
    curve = capacity_curves(cfg, [hw])
    result: dict[str, object] = {
        "model": m.id,
        "hardware": hw.id,
        "tp": cfg.tp,
        "kv_dtype": cfg.precision.kv,
        "weight_dtype": cfg.precision.weight,
        "block_size": cfg.block_size,
        "memory_utilization": cfg.memory_utilization,
        "kv_bytes_per_token": m.num_layers * kv_bytes_per_token_per_layer(m, cfg.precision, cfg.tp),
        "kv_bytes_per_token_per_layer": kv_bytes_per_token_per_layer(m, cfg.precision, cfg.tp),
        **budget,
        "kv_bytes_per_sequence": per_seq,
        "paging_waste_bytes": per_seq - unpaged,
        "batch": batch,
        "context": context,
        "max_batch": int(max_batch(budget["kv_budget_bytes"], per_seq)),
        "max_context": max_context(cfg, budget["kv_budget_bytes"], batch),
        "kv_crossover_context": kv_crossover_context(cfg, batch),
        "curve": [{"context": int(c), "max_batch": int(b)} for c, b in zip(curve["contexts"], curve["max_batch"][0])],
        "fits": bool(fits_weights and budget["kv_budget_bytes"] >= per_seq),
        "capacity_convention": "memory_gb x 2^30 B x memory_utilization per device",
    }
    if not fits_weights:
        all_weights = weight_bytes_per_device(m, cfg.precision, 1)
        tp = smallest_fitting_tp(m, cfg.precision, hw, cfg.memory_utilization, cfg.max_batched_tokens, cfg.block_size)
        advice = f"use TP >= {tp}" if tp else f"no TP degree up to {TP_DEGREES[-1]} is enough"
        result["message"] = (
            f"weights alone need {all_weights / 1e9:.1f} GB ({cfg.precision.weight}), "
            f"{budget['weights_bytes'] / 1e9:.1f} GB per device at TP={cfg.tp}, against "
            f"{budget['capacity_bytes'] / 1e9:.1f} GB usable per {hw.name}; {advice}"
        )
        result["smallest_tp"] = tp
    return result
