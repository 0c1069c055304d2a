"""Step and request analysis of an LLM on one device type: what the CLI and the LLM page show."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from roofline.engine import REGIME_LABELS, Ceilings, OpTable, evaluate
from roofline.hardware import Hardware
from roofline.llm import (
    DEFAULT_MEMORY_UTILIZATION,
    Precision,
    StepConfig,
    kv_cache_bytes_per_device,
    step_ops,
    usable_memory_bytes,
    weight_bytes_per_device,
)
from roofline.models import ModelConfig

DEFAULT_GRAPH_LAUNCH_OVERHEAD_S = 0.5e-6  # a kernel replayed from a CUDA graph


@dataclass(frozen=True)
class Settings:
    """What the user sets besides the workload: overheads and the usable memory fraction."""

    launch_overhead_s: float = 4e-6
    graph_launch_overhead_s: float = DEFAULT_GRAPH_LAUNCH_OVERHEAD_S
    cuda_graphs: bool = False
    collective_latency_s: float = 10e-6
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    # A measured all-reduce (roofline.measure.collectives) replaces the datasheet link figure.
    link_bandwidth_bytes_per_s: float | None = None
    # What-if multipliers of the device's resources (1 = the datasheet).
    compute_scale: float = 1.0
    memory_scale: float = 1.0
    link_scale: float = 1.0
    capacity_scale: float = 1.0

    def ceilings(self, hw: Hardware) -> Ceilings:
        launch = self.graph_launch_overhead_s if self.cuda_graphs else self.launch_overhead_s
        ceilings = Ceilings.from_hardware(hw, launch_overhead_s=launch, collective_latency_s=self.collective_latency_s)
        if self.link_bandwidth_bytes_per_s:
            ceilings = replace(ceilings, link_bandwidth_bytes_per_s=self.link_bandwidth_bytes_per_s)
        if (self.compute_scale, self.memory_scale, self.link_scale) != (1.0, 1.0, 1.0):
            ceilings = ceilings.scaled(self.compute_scale, self.memory_scale, self.link_scale)
        return ceilings

    def capacity_bytes(self, hw: Hardware) -> float:
        return usable_memory_bytes(hw.memory_gb, self.memory_utilization) * self.capacity_scale


DEFAULT_SETTINGS = Settings()
DEFAULT_PRECISION = Precision()


def memory_report(step: StepConfig, table: OpTable, hw: Hardware, settings: Settings) -> dict[str, object]:
    """Weights, KV cache and activation workspace per device, and whether they fit."""
    weights = weight_bytes_per_device(step.model, step.precision, step.tp)
    kv = float(np.max(kv_cache_bytes_per_device(step.model, step.precision, step.tp, step.batch, step.context)))
    # The largest single op's activations (inputs + outputs, the score matrix of a naive kernel).
    per_occurrence = table.act_bytes / table.count
    activations = float(per_occurrence.max())
    capacity = settings.capacity_bytes(hw)
    total = weights + kv + activations
    return {
        "weights_bytes": weights,
        "kv_cache_bytes": kv,
        "activation_bytes": activations,
        "total_bytes": total,
        "capacity_bytes": capacity,
        "memory_utilization": settings.memory_utilization,
        "fits": bool(total <= capacity),
        "devices": step.tp,
        "convention": "capacity = memory_gb x 2^30 B x memory_utilization, per device",
    }


def analyze_step(step: StepConfig, hw: Hardware, settings: Settings = DEFAULT_SETTINGS) -> dict[str, object]:
    """Every op of one step with its time and regime, the totals and the memory footprint."""
    ceilings = settings.ceilings(hw)
    table = evaluate(step_ops(step), ceilings)
    total_time = table.total_time_s
    by_regime = {r: float(v) for r, v in table.time_by_regime_s().items()}
    bound = max(by_regime, key=by_regime.__getitem__)
    return {
        "model": step.model.id,
        "hardware": hw.id,
        "phase": step.phase,
        "batch": int(step.batch),
        "seq_len": int(step.seq_len),
        "tp": step.tp,
        "precision": {"weight": step.precision.weight, "act": step.precision.act, "kv": step.precision.kv},
        "attention": step.attention,
        "cuda_graphs": settings.cuda_graphs,
        "launch_overhead_s": ceilings.launch_overhead_s,
        "ops": table.rows(),
        "total": {
            "flops": float(table.flops.sum()),
            "bytes": float(table.bytes.sum()),
            "weight_bytes": float(table.weight_bytes.sum()),
            "activation_bytes": float(table.act_bytes.sum()),
            "kv_bytes": float(table.kv_bytes.sum()),
            "comm_bytes": float(table.comm_bytes.sum()),
            "intensity": float(table.flops.sum() / table.bytes.sum()),
            "time_s": total_time,
            "bound": bound,
            "bound_label": REGIME_LABELS[bound],
            "time_by_regime_s": by_regime,
            "launches": int(sum(op.launches * op.count for op in table.ops)),
        },
        "memory": memory_report(step, table, hw, settings),
    }


def analyze_request(
    model: ModelConfig,
    hw: Hardware,
    batch: int,
    prompt_len: int,
    output_len: int,
    precision: Precision = DEFAULT_PRECISION,
    tp: int = 1,
    attention: str = "flash",
    settings: Settings = DEFAULT_SETTINGS,
) -> dict[str, object]:
    """A batch of requests: prefill of the prompt, then output_len - 1 decode steps.

    The first output token comes from the prefill (TTFT). Decode step j (j = 0 .. N-2) has
    prompt_len + j tokens cached; TPOT is the mean of those steps. All decode steps are one
    vectorised evaluation over the growing context.
    """
    if output_len < 1:
        raise ValueError(f"output_len must be a positive integer, got {output_len}")
    if prompt_len + output_len - 1 > model.max_context:
        raise ValueError(
            f"prompt_len + output_len: {prompt_len + output_len - 1} tokens exceed {model.id}'s maximum context "
            f"of {model.max_context}"
        )
    ceilings = settings.ceilings(hw)
    prefill = StepConfig(model, "prefill", batch, prompt_len, precision, tp, attention)
    prefill_table = evaluate(step_ops(prefill), ceilings)
    ttft = prefill_table.total_time_s
    flops = float(prefill_table.flops.sum())
    decode_steps = output_len - 1
    if decode_steps:
        contexts = np.arange(prompt_len, prompt_len + decode_steps)
        decode = StepConfig(model, "decode", batch, contexts, precision, tp, attention)
        decode_table = evaluate(step_ops(decode), ceilings)
        step_times = decode_table.step_time_s
        decode_time = float(step_times.sum())
        tpot = float(step_times.mean())
        flops += float(decode_table.flops.sum())
        decode_bounds = decode_table.step_bound
        decode_bound = max(set(decode_bounds.tolist()), key=decode_bounds.tolist().count)
    else:
        decode_time, tpot, decode_bound = 0.0, None, None
    e2e = ttft + decode_time
    peak = ceilings.peak(precision.act) * tp
    last = StepConfig(
        model,
        "decode" if decode_steps else "prefill",
        batch,
        prompt_len + decode_steps - 1 if decode_steps else prompt_len,
        precision,
        tp,
        attention,
    )
    last_table = evaluate(step_ops(last), ceilings)
    return {
        "model": model.id,
        "hardware": hw.id,
        "batch": batch,
        "prompt_len": prompt_len,
        "output_len": output_len,
        "tp": tp,
        "ttft_s": ttft,
        "tpot_s": tpot,
        "e2e_s": e2e,
        "tokens_per_s": batch * output_len / e2e,
        "tokens_per_s_per_user": output_len / e2e,
        "decode_tokens_per_s_per_user": (1.0 / tpot) if tpot else None,
        "prefill_bound": prefill_table.total_bound,
        "decode_bound": decode_bound,
        "total_flops": flops,
        "mfu": flops / e2e / peak,
        "memory": memory_report(last, last_table, hw, settings),
    }
