"""The whole analysis of one training setup on one device: memory, fit, the step's time and
what binds it."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from roofline.engine import evaluate
from roofline.memory import capacity_bytes, largest_fitting
from roofline.settings import Settings
from roofline.training.memory import TrainMemory, training_memory
from roofline.training.setup import TrainSetup
from roofline.training.step import DEFAULT_HOST_MEMORY_BYTES_PER_S, offload_time_s, training_ops


@dataclass(frozen=True)
class TrainResult:
    setup: TrainSetup
    hardware_id: str
    memory: TrainMemory
    capacity_bytes: float
    fits: bool
    largest_micro_batch: int  # at this sequence length (0: not even one sequence fits)
    table: object  # engine.OpTable of the step's ops
    step_time_s: float
    tokens_per_step: float  # over every data-parallel device
    bound: str
    mfu: float
    offload_s: float = 0.0  # the offloaded optimizer step (host link and host memory)
    notes: tuple[str, ...] = ()

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s if self.step_time_s else 0.0

    def to_json(self) -> dict[str, object]:
        t = self.table
        bounds = t.bounds
        rows = [
            {
                "name": op.name,
                "phase": op.phase,
                "count": op.count,
                "flops": float(np.sum(t.flops[i])),
                "bytes": float(np.sum(t.bytes[i])),
                "time_s": float(np.sum(t.time_s[i])),
                "bound": bounds[i],
            }
            for i, op in enumerate(t.ops)
        ]
        by_phase: dict[str, float] = {}
        for row in rows:
            by_phase[row["phase"]] = by_phase.get(row["phase"], 0.0) + row["time_s"]
        if self.offload_s:
            by_phase["optimizer (offloaded to the host)"] = self.offload_s
        s = self.setup
        return {
            "model": s.model.id,
            "hardware": self.hardware_id,
            "seq_len": int(np.max(s.seq_len)),
            "micro_batch": int(np.max(s.micro_batch)),
            "accumulation_steps": s.accumulation_steps,
            "global_batch": s.global_batch or int(np.max(s.micro_batch)) * s.dp,
            "dp": s.dp,
            "zero": s.zero,
            "precision": s.precision,
            "optimizer": s.optimizer,
            "method": s.method,
            "recompute": s.recompute,
            "memory": self.memory.to_json(),
            "capacity_bytes": self.capacity_bytes,
            "fits": self.fits,
            "largest_micro_batch": self.largest_micro_batch,
            "step_time_s": self.step_time_s,
            "time_by_phase_s": by_phase,
            "tokens_per_s": self.tokens_per_s,
            "bound": self.bound,
            "mfu": self.mfu,
            "ops": rows,
            "notes": list(self.notes),
        }


def largest_micro_batch(s: TrainSetup, capacity: float, limit: int = 1 << 16) -> int:
    """The most sequences per micro-batch whose peak fits (a vectorised bisection)."""

    def fits(batch: np.ndarray) -> np.ndarray:
        return training_memory(replace(s, micro_batch=batch)).peak_bytes <= capacity

    return int(largest_fitting(fits, np.array([limit]))[0])


def analyze_training(s: TrainSetup, hw, settings=None, with_largest: bool = True) -> TrainResult:
    """Memory, fit, and the step on ``hw``'s roofs (one device's view of a data-parallel group)."""
    settings = settings or Settings()
    notes = []
    dtype = "fp32" if s.precision == "fp32" else s.compute_dtype
    if dtype not in (peaks := hw.peak_tflops.as_dict()):
        if not peaks:
            raise ValueError(f"{hw.id} has no published peak in any dtype: a training step cannot be timed on it")
        raise ValueError(f"{hw.id} has no {dtype} peak; allowed dtypes for {hw.id}: {', '.join(peaks)}")
    if s.dp > 1 and hw.group_link(s.dp)[0] is None:
        raise ValueError(f"dp: {s.dp} devices cannot communicate on {hw.id} ({hw.group_link(s.dp)[1]})")
    memory = training_memory(s)
    capacity = capacity_bytes(hw, settings)
    ceilings = settings.ceilings(hw, tp=max(s.dp, 1) if s.dp > 1 else 1, cuda_graphs=False, serving=False)
    ops = training_ops(s)
    if s.offload_optimizer:
        notes.append(
            "offloaded optimizer: gradients and weights cross the host link and the update runs at "
            f"{DEFAULT_HOST_MEMORY_BYTES_PER_S / 1e9:.0f} GB/s of host memory bandwidth (a planning value)"
        )
    table = evaluate(ops, ceilings)
    offload = offload_time_s(s, hw)
    step = float(table.step_time_s) + offload
    tokens = float(np.max(s.micro_batch) * np.max(s.seq_len)) * s.accumulation_steps * s.dp
    # Model FLOPs: forward and backward as counted (not recomputation) over every device.
    useful = sum(float(table.flops[i]) for i, op in enumerate(ops) if op.phase in ("forward", "backward")) * s.dp
    peak = hw.peak_flops_per_s(dtype) * s.dp
    mfu = useful / step / peak if step else 0.0
    bound = table.total_bound
    return TrainResult(
        setup=s,
        hardware_id=hw.id,
        memory=memory,
        capacity_bytes=capacity,
        fits=bool(np.all(memory.peak_bytes <= capacity)),
        largest_micro_batch=largest_micro_batch(s, capacity) if with_largest else -1,
        table=table,
        step_time_s=step,
        tokens_per_step=tokens,
        bound=bound,
        mfu=mfu,
        offload_s=offload,
        notes=tuple(notes),
    )
