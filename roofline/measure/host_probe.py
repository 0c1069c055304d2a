"""The host's cost of an eager step of a model, measured where the device's work is too small to
matter: the same layers and ops with tiny matrices (a hidden size of 64, heads of 8, experts of 16,
a 256-token vocabulary), stepped
eagerly, so the host's dispatching sets the wall time. Divided by the launches the engine counts
for that step, it is the host cost per launch an eager step of the full-size model pays: the
harness's Python, its module calls and every extra kernel included, which no single-op
microbenchmark holds. A host ceiling measured on its own, like the roofs: the full-size step is
predicted from it, never fitted on."""

from __future__ import annotations

import numpy as np
import torch

from roofline.measure.model import TORCH_DTYPES, build_model
from roofline.measure.timing import time_wall
from roofline.models import ModelConfig
from roofline.ops import step_ops
from roofline.workload import Precision, Workload

HIDDEN = 64  # the probe's hidden size (its heads project out of it, as in any model)
HEAD = 8  # its head dimension
EXPERT = 16  # its experts' intermediate size
VOCAB = 256
CONTEXT = 64  # tokens cached in the probe's decode step


def probe_model(m: ModelConfig) -> ModelConfig:
    """``m`` with every matrix tiny and its layers, heads, experts and norms kept."""
    update: dict[str, object] = {
        "hidden_size": HIDDEN,
        "head_dim": HEAD,
        "intermediate_size": 2 * HIDDEN,
        "vocab_size": VOCAB,
    }
    if m.moe is not None:
        update["moe"] = m.moe.model_copy(
            update={
                "expert_intermediate_size": EXPERT,
                "shared_expert_intermediate_size": EXPERT if m.moe.shared_expert_intermediate_size else None,
            }
        )
    if m.mla is not None:
        update["mla"] = m.mla.model_copy(
            update={
                "q_lora_rank": 16 if m.mla.q_lora_rank else None,
                "kv_lora_rank": 16,
                "qk_nope_head_dim": HEAD,
                "qk_rope_head_dim": HEAD,
                "v_head_dim": HEAD,
            }
        )
    return m.model_copy(update=update)


class HostProbe:
    """The probe of ``m`` built once and timed in rounds spread over a run: a virtualised host's
    speed drifts by tens of percent within a minute (an 8B eager decode on an H200 read 20 to 26 ms
    over five interleaved rounds, and the probe with it), so one moment's reading is no ceiling.
    The median of the rounds is the host's cost; their spread is reported beside it."""

    def __init__(self, m: ModelConfig, device: torch.device, dtype: str) -> None:
        tiny = probe_model(m)
        storage = "fp32" if dtype == "fp32" else dtype
        w = Workload(tiny, "decode", 1, CONTEXT, precision=Precision(storage, storage, storage))
        self.model_id, self.layers = m.id, m.num_layers
        self.launches = sum(op.launches * op.count for op in step_ops(w))
        self.device = device
        model = build_model(tiny, tiny.num_layers, device, TORCH_DTYPES[dtype])
        caches = model.new_cache(1, CONTEXT + 1, device, TORCH_DTYPES[dtype])
        for cache in caches:
            cache["position"] = torch.tensor([CONTEXT], device=device)
        ids = torch.zeros((1, 1), dtype=torch.long, device=device)
        rotary = model.rotary(CONTEXT, 1, device, TORCH_DTYPES[dtype])
        self._step = lambda: model(ids, caches, CONTEXT, rotary)
        self.rounds_s: list[float] = []

    def round(self, repeats: int) -> float:
        """Time one round (the median of ``repeats`` steps) and keep it."""
        with torch.inference_mode():
            seconds = time_wall(self._step, self.device, repeats=repeats).median_s
        self.rounds_s.append(seconds)
        return seconds

    def result(self) -> tuple[float, str]:
        """(seconds of host work per engine-counted launch, what ran): the median round."""
        if not self.rounds_s:
            raise ValueError("the host probe has run no round")
        step_s = float(np.median(self.rounds_s))
        spread = (
            f" (median of {len(self.rounds_s)} rounds over the run: "
            f"{min(self.rounds_s) * 1e3:.2f} to {max(self.rounds_s) * 1e3:.2f} ms)"
            if len(self.rounds_s) > 1
            else ""
        )
        what = (
            f"an eager decode step of {self.model_id}'s {self.layers} layers with a hidden size of {HIDDEN}, heads "
            f"of {HEAD} and a {VOCAB}-token vocabulary: {step_s * 1e3:.2f} ms{spread} over the {self.launches} "
            "launches the engine counts"
        )
        return step_s / self.launches, what
