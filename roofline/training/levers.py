"""Memory levers for training: each applied alone, and combined until the setup fits."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from roofline.training.analysis import TrainResult, analyze_training
from roofline.training.setup import TrainSetup, default_lora_targets, global_batch_problem


@dataclass(frozen=True)
class TrainLever:
    name: str
    peak_bytes: float
    fits: bool
    step_time_s: float
    slowdown: float  # step time against the setup's own (per token where the micro-batch changes)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "peak_bytes": self.peak_bytes,
            "fits": self.fits,
            "step_time_s": self.step_time_s,
            "slowdown": self.slowdown,
        }


def _seconds_per_device_token(r: TrainResult) -> float:
    """Step time per token each device processes: throughput per device, whatever the group."""
    return r.step_time_s / (r.tokens_per_step / r.setup.dp) if r.tokens_per_step else 0.0


def levers(s: TrainSetup, hw, settings=None) -> list[TrainLever]:
    """Each memory lever applied alone and evaluated: its peak, whether it fits, its speed."""
    base = analyze_training(s, hw, settings, with_largest=False)
    per_token = _seconds_per_device_token(base)
    candidates: list[tuple[str, TrainSetup]] = []
    if s.recompute != "full":
        candidates.append(("full recomputation (activation checkpointing)", replace(s, recompute="full")))
    if s.recompute == "none":
        candidates.append(("selective recomputation (the attention core)", replace(s, recompute="selective")))
    if not s.flash_attention:
        candidates.append(("FlashAttention", replace(s, flash_attention=True)))
    if s.optimizer == "adamw":
        candidates.append(("8-bit AdamW (bitsandbytes)", replace(s, optimizer="adamw-8bit")))
    if not s.fused_optimizer and s.optimizer == "adamw":
        candidates.append(("fused AdamW", replace(s, fused_optimizer=True)))
    if s.method == "full":
        targets = default_lora_targets(s.model)
        on = ", ".join(targets)
        candidates.append((f"LoRA r=16 on {on}", replace(s, method="lora", lora_rank=16, lora_targets=targets)))
        candidates.append(
            (f"QLoRA (NF4 base) r=16 on {on}", replace(s, method="qlora", lora_rank=16, lora_targets=targets))
        )
    if int(np.max(s.micro_batch)) > 1:
        total = int(np.max(s.micro_batch)) * s.accumulation_steps * s.dp
        candidates.append(
            (
                "micro-batch 1 with gradient accumulation",
                replace(s, micro_batch=1, global_batch=s.global_batch or total),
            )
        )
    if s.dp > 1 and s.zero < 3:
        candidates.append((f"ZeRO-3 / FSDP over {s.dp} devices", replace(s, zero=3)))
    if s.dp == 1:
        candidates.append(("ZeRO-3 / FSDP over 8 devices", replace(s, dp=8, zero=3)))
    if not s.offload_optimizer:
        candidates.append(("offload the optimizer state to the host", replace(s, offload_optimizer=True)))
    out = []
    for name, changed in candidates:
        if global_batch_problem(changed.global_batch, int(np.max(changed.micro_batch)), changed.dp):
            continue  # sharding over 8 devices cannot run a global batch of 4: not a lever here
        try:
            r = analyze_training(changed, hw, settings, with_largest=False)
        except ValueError:
            continue
        out.append(
            TrainLever(
                name=name,
                peak_bytes=float(np.max(r.memory.peak_bytes)),
                fits=r.fits,
                step_time_s=r.step_time_s,
                slowdown=_seconds_per_device_token(r) / per_token if per_token else 1.0,
            )
        )
    return out


def plan_to_fit(s: TrainSetup, hw, settings=None, most: int = 5) -> tuple[list[str], TrainResult | None]:
    """Levers combined until the setup fits: each round adds the lever that saves the most memory
    per unit of slowdown. Levers that train the same model come first (recomputation, 8-bit
    state, accumulation, sharding, offload); LoRA and QLoRA, which train something else, only if
    those are not enough. ([], None) if it fits already; otherwise the levers and the result,
    fitting or not."""
    current = analyze_training(s, hw, settings, with_largest=False)
    if current.fits:
        return [], None
    best: tuple[list[str], TrainResult] = ([], current)
    for allow_adapters in (False, True):
        chosen: list[str] = []
        setup, result = s, current
        for _ in range(most):
            options = []
            for lever in levers(setup, hw, settings):
                if not allow_adapters and "LoRA" in lever.name:
                    continue
                saved = float(np.max(result.memory.peak_bytes)) - lever.peak_bytes
                if saved > 0:
                    options.append((saved / max(lever.slowdown, 1e-3) ** 4, lever.name))
            if not options:
                break
            name = max(options)[1]
            setup = _apply_lever(setup, name)
            chosen.append(name)
            result = analyze_training(setup, hw, settings, with_largest=False)
            if result.fits:
                return chosen, result
        if float(np.max(result.memory.peak_bytes)) < float(np.max(best[1].memory.peak_bytes)):
            best = (chosen, result)
    return best


def _apply_lever(s: TrainSetup, name: str) -> TrainSetup:
    if name.startswith("full recomputation"):
        return replace(s, recompute="full")
    if name.startswith("selective"):
        return replace(s, recompute="selective")
    if name == "FlashAttention":
        return replace(s, flash_attention=True)
    if name.startswith("8-bit"):
        return replace(s, optimizer="adamw-8bit")
    if name == "fused AdamW":
        return replace(s, fused_optimizer=True)
    if name.startswith("LoRA"):
        return replace(s, method="lora", lora_rank=16, lora_targets=default_lora_targets(s.model))
    if name.startswith("QLoRA"):
        return replace(s, method="qlora", lora_rank=16, lora_targets=default_lora_targets(s.model))
    if name.startswith("micro-batch 1"):
        total = int(np.max(s.micro_batch)) * s.accumulation_steps * s.dp
        return replace(s, micro_batch=1, global_batch=s.global_batch or total)
    if name.startswith("ZeRO-3"):
        return replace(s, zero=3, dp=s.dp if s.dp > 1 else 8)
    if name.startswith("offload"):
        return replace(s, offload_optimizer=True)
    raise ValueError(f"lever: unknown {name!r}")
