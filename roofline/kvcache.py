"""KV-cache capacity: how many sequences fit at a context length, and what the cache costs decode.

Every answer comes from ``roofline.memory.footprint``, the one definition of "fits": the most
sequences at a context is the largest batch whose decode footprint fits, the longest context
at a batch the largest context whose footprint fits. The KV budget a serving engine allocates
is capacity - weights - workspace - non-torch memory (see ``roofline.memory``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.engine import byte_totals
from roofline.hardware import Hardware
from roofline.memory import (
    Footprint,
    beyond_links,
    footprint,
    kv_bytes_per_token_per_layer,
    kv_cache_bytes,
    largest_fitting,
    max_batch,
    max_context,
    smallest_tp,
)
from roofline.models import ModelConfig
from roofline.ops import step_ops
from roofline.settings import DEFAULT_SETTINGS, Settings
from roofline.workload import Workload


def context_grid(model: ModelConfig, points_per_octave: int = 4) -> np.ndarray:
    """Contexts from 512 (or the model's maximum, if smaller) to the maximum, log-spaced."""
    lo = min(512, model.max_context)
    octaves = max(1.0, np.log2(model.max_context / lo))
    grid = np.round(np.geomspace(lo, model.max_context, int(octaves * points_per_octave) + 1)).astype(int)
    return np.unique(np.append(grid, model.max_context))


def capacity_curves(
    w: Workload, hardware: list[Hardware], contexts: np.ndarray | None = None, settings: Settings = DEFAULT_SETTINGS
) -> dict[str, np.ndarray]:
    """Max concurrent sequences against context for many devices (one vectorised search each)."""
    contexts = context_grid(w.model) if contexts is None else np.asarray(contexts)
    rows = [max_batch(w.on(hw, need_peak=False)[0], hw, settings, contexts) for hw in hardware]
    return {"contexts": contexts, "max_batch": np.array(rows).reshape(len(hardware), len(contexts))}


def decode_read_bytes(w: Workload, batch: int, contexts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(weight bytes, KV bytes) a decode step reads per device at each cached context."""
    totals = byte_totals(step_ops(w.step("decode", np.asarray(contexts), batch)))
    return totals["weight_bytes"], totals["kv_bytes"]


def kv_crossover_context(w: Workload, batch: int) -> int | None:
    """Smallest cached context at which a decode step reads more KV-cache bytes than weights.

    None when the cache never overtakes the weights below the model's maximum (a sliding
    window caps the cache, or the batch is small beside a large model)."""

    def below(contexts: np.ndarray) -> np.ndarray:
        weights, kv = decode_read_bytes(w, batch, contexts)
        return kv < weights

    last = w.model.max_context - 1
    below_all = int(largest_fitting(below, np.array(last)))  # KV grows with the context
    return below_all + 1 if below_all < last else None


@dataclass(frozen=True)
class KVResult:
    """Everything the KV page and ``python -m roofline kv`` show, for one device."""

    workload: Workload  # decode at (batch, context - 1): each sequence holds ``context`` tokens
    hardware: Hardware
    settings: Settings
    batch: int
    context: int
    footprint: Footprint
    max_batch: int
    max_context: int
    crossover_context: int | None
    curve_contexts: np.ndarray
    curve_max_batch: np.ndarray
    notes: tuple[str, ...] = ()

    @property
    def kv_bytes_per_token_per_layer(self) -> float:
        w = self.workload
        return kv_bytes_per_token_per_layer(w.model, w.precision, w.attention_tp)

    @property
    def kv_bytes_per_token(self) -> float:
        return self.workload.model.num_layers * self.kv_bytes_per_token_per_layer

    @property
    def kv_bytes_per_sequence(self) -> float:
        w = self.workload
        return float(kv_cache_bytes(w.model, w.precision, w.attention_tp, 1, self.context, self.settings.block_size))

    @property
    def paging_waste_bytes(self) -> float:
        w = self.workload
        return self.kv_bytes_per_sequence - float(kv_cache_bytes(w.model, w.precision, w.attention_tp, 1, self.context))

    @property
    def weights_fit(self) -> bool:
        f = self.footprint
        return f.weights_bytes + f.workspace_bytes + f.reserved_bytes < f.capacity_bytes

    @property
    def message(self) -> str | None:
        """What to do when not even the weights fit."""
        if self.weights_fit:
            return None
        w, f = self.workload, self.footprint
        room = smallest_tp(w, self.hardware, self.settings, room_only=True)
        asked = f"a batch of {self.batch:,} at {self.context:,} tokens of context"
        if room is None:
            advice = "no TP degree up to 64 leaves room for a KV cache"
        elif room == f.smallest_tp:
            advice = f"at TP >= {room}{beyond_links(self.hardware, room)} they leave room, and {asked} fits"
        else:
            advice = f"at TP >= {room}{beyond_links(self.hardware, room)} they leave room for a KV cache" + (
                f", and at TP >= {f.smallest_tp}{beyond_links(self.hardware, f.smallest_tp)} {asked} fits"
                if f.smallest_tp
                else f"; no TP degree up to 64 holds {asked}"
            )
        per_device = f", {f.weights_bytes / 1e9:.1f} GB per device at TP={w.tp}," if w.tp > 1 else ""
        usable = f"{f.capacity_bytes / 1e9:.1f} GB usable per {self.hardware.name}"
        if f.weights_bytes < f.capacity_bytes:  # the weights fit: what the engine sets aside beside them does not
            return (
                f"the weights ({f.weights_bytes / 1e9:.1f} GB a device, {_weight_formats(w)}), the engine's workspace "
                f"({f.workspace_bytes / 1e9:.1f} GB) and its reserve ({f.reserved_bytes / 1e9:.1f} GB: CUDA graphs "
                f"{f.cuda_graph_bytes / 1e9:.1f} GB, non-torch {f.non_torch_bytes / 1e9:.2f} GB, each a device's) "
                f"leave no room for a KV cache in {usable}; {advice}"
            )
        return (
            f"weights alone need {f.weights_bytes * w.tp / 1e9:.1f} GB ({_weight_formats(w)}){per_device} "
            f"against {usable}; {advice}"
        )

    def to_json(self) -> dict[str, object]:
        w, f = self.workload, self.footprint
        on_device = self.settings.for_device(self.hardware)
        data = {
            "model": w.model.id,
            "hardware": self.hardware.id,
            "tp": w.tp,
            "attention_dp": w.attention_dp,  # > 1: every figure is one attention rank's
            "kv_dtype": w.precision.kv_dtype,
            "weight_dtype": w.precision.weight_dtype,
            "block_size": self.settings.block_size,
            "memory_utilization": self.settings.memory_utilization,
            # The engine's token budget and sequence cap on the device, which size its workspace.
            "max_batched_tokens": on_device.max_batched_tokens,
            "max_num_seqs": on_device.max_num_seqs,
            "notes": list(self.notes),
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_token_per_layer": self.kv_bytes_per_token_per_layer,
            "exposed_bytes": f.exposed_bytes,
            "capacity_bytes": f.capacity_bytes,
            "weights_bytes": f.weights_bytes,
            "workspace_bytes": f.workspace_bytes,
            "non_torch_bytes": f.non_torch_bytes,
            "cuda_graph_bytes": f.cuda_graph_bytes,
            "kv_budget_bytes": f.kv_budget_bytes,
            "kv_budget_tokens": int(f.kv_budget_bytes // self.kv_bytes_per_token) if self.kv_bytes_per_token else 0,
            "kv_bytes_per_sequence": self.kv_bytes_per_sequence,
            "paging_waste_bytes": self.paging_waste_bytes,
            "batch": self.batch,
            "context": self.context,
            "max_batch": self.max_batch,
            "max_context": self.max_context,
            "kv_crossover_context": self.crossover_context,
            "fits": bool(f.fits),
            "smallest_tp": f.smallest_tp,
            "memory": f.to_json(),
            "curve": [
                {"context": int(c), "max_batch": int(b)} for c, b in zip(self.curve_contexts, self.curve_max_batch)
            ],
        }
        if self.message:
            data["message"] = self.message
        return data


def analyze_kv(w: Workload, hw: Hardware, batch: int, context: int, settings: Settings = DEFAULT_SETTINGS) -> KVResult:
    """KV capacity of ``w``'s model, precision and TP on one device, at an operating point of
    ``batch`` sequences holding ``context`` tokens each."""
    m = w.model
    if isinstance(context, bool) or not isinstance(context, int | np.integer) or not 1 <= context <= m.max_context:
        raise ValueError(
            f"context: {context!r} is not allowed; allowed: integers 1..{m.max_context} ({m.id}'s maximum)"
        )
    run, notes = w.on(hw, need_peak=False)
    point = run.step("decode", max(context - 1, 1), batch)
    contexts = context_grid(m)
    return KVResult(
        workload=point,
        hardware=hw,
        settings=settings,
        batch=batch,
        context=context,
        footprint=footprint(point, hw, settings),
        max_batch=int(max_batch(run, hw, settings, context)),
        max_context=max_context(run, hw, settings, batch),
        crossover_context=kv_crossover_context(run, batch),
        curve_contexts=contexts,
        curve_max_batch=max_batch(run, hw, settings, contexts),
        notes=tuple(notes),
    )


def _weight_formats(w) -> str:
    """The weights' format, and the routed experts' where a MoE model stores them otherwise."""
    experts = w.precision.expert_weight_dtype
    mixed = w.model.moe is not None and experts not in (None, w.precision.weight_dtype)
    return w.precision.weight_dtype + (f", experts {experts}" if mixed else "")
