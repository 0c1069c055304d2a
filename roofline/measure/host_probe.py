"""The host's cost of an eager step of a model, measured where the device's work is too small to
matter: the same layers and ops with tiny matrices (a hidden size of 64, heads of 8, experts of 16,
a 256-token vocabulary), stepped
eagerly, so the host's dispatching sets the wall time. Divided by the launches the engine counts
for that step, it is the host cost per launch an eager step of the full-size model pays: the
harness's Python, its module calls and every extra kernel included, which no single-op
microbenchmark holds. A host ceiling measured on its own, like the roofs: the full-size step is
predicted from it, never fitted on."""

from __future__ import annotations

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


def host_per_launch(m: ModelConfig, device: torch.device, dtype: str, repeats: int) -> tuple[float, str]:
    """(seconds of host work per engine-counted launch of an eager decode step of ``m``, what ran)."""
    tiny = probe_model(m)
    storage = "fp32" if dtype == "fp32" else dtype
    w = Workload(tiny, "decode", 1, CONTEXT, precision=Precision(storage, storage, storage))
    launches = sum(op.launches * op.count for op in step_ops(w))
    model = build_model(tiny, tiny.num_layers, device, TORCH_DTYPES[dtype])
    caches = model.new_cache(1, CONTEXT + 1, device, TORCH_DTYPES[dtype])
    for cache in caches:
        cache["position"] = torch.tensor([CONTEXT], device=device)
    ids = torch.zeros((1, 1), dtype=torch.long, device=device)
    rotary = model.rotary(CONTEXT, 1, device, TORCH_DTYPES[dtype])
    with torch.inference_mode():
        timing = time_wall(lambda: model(ids, caches, CONTEXT, rotary), device, repeats=repeats)
    what = (
        f"an eager decode step of {m.id}'s {m.num_layers} layers with a hidden size of {HIDDEN}, heads of {HEAD} and "
        f"a {VOCAB}-token vocabulary: "
        f"{timing.median_s * 1e3:.2f} ms over the {launches} launches the engine counts"
    )
    return timing.median_s / launches, what
