"""MLP layers: dense (gated or not) and mixture-of-experts, with the experts a step loads."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline.engine import Op
from roofline.ops.kernels import ACTIVATION_FLOPS_PER_ELEMENT, elementwise, linear
from roofline.workload import Workload


def expected_experts_loaded(num_experts: int, top_k: int, tokens: np.ndarray | float) -> np.ndarray:
    """Expected distinct experts among ``tokens`` tokens, each routed to ``top_k`` of them.

    A token skips a given expert with probability 1 - k/E; with independent tokens the expert
    is untouched with probability (1 - k/E)^tokens.
    """
    tokens = np.asarray(tokens, float)
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def mlp_ops(w: Workload, tokens, count: int, intermediate: int, prefix: str) -> list[Op]:
    m, p = w.model, w.kernel_precision
    h, i = m.hidden_size, intermediate / w.tp
    act = ACTIVATION_FLOPS_PER_ELEMENT[m.mlp]
    if m.mlp == "gated":
        return [
            linear(f"{prefix} gate+up projection", tokens, h, 2 * i, p, count, "mlp"),
            elementwise(f"{prefix} activation (SiLU/GELU x up)", tokens * i, act, 2, 1, p.act_bytes, count, "mlp"),
            linear(f"{prefix} down projection", tokens, i, h, p, count, "mlp"),
        ]
    return [
        linear(f"{prefix} up projection", tokens, h, i, p, count, "mlp"),
        elementwise(f"{prefix} activation (GELU)", tokens * i, act, 1, 1, p.act_bytes, count, "mlp"),
        linear(f"{prefix} down projection", tokens, i, h, p, count, "mlp"),
    ]


def moe_ops(w: Workload, tokens, count: int) -> list[Op]:
    m, p, tp = w.model, w.kernel_precision, w.tp
    moe = m.moe
    h, i = m.hidden_size, moe.expert_intermediate_size / tp
    k, e = moe.experts_per_token, moe.num_experts
    routed = tokens * k
    loaded = expected_experts_loaded(e, k, tokens)
    gated = 2 if m.mlp == "gated" else 1
    ab, wb = p.act_bytes, p.expert_weight_bytes  # routed experts may have a format of their own
    # The shape a fused-MoE kernel table is read at (one fused layer: gate+up, activation, down).
    shape = {
        "moe_tokens": tokens,
        "hidden": h,
        "expert_inter": moe.expert_intermediate_size,
        "topk": k,
        "experts": e,
        "tp": tp,
        "expert_dtype": p.expert_weight_dtype or p.weight_dtype,
        "shared_experts": moe.shared_experts,  # what "auto" routing reads (roofline.routing)
        "fp8_scaling": p.fp8_scaling,  # which fp8 MoE table (per-tensor or block-scaled)
    }
    ops = [
        linear("MoE router", tokens, h, e, p, count, "moe", weight_dtype_bytes=ab, launches=3),
        Op(
            name="MoE experts gate+up",
            flops=2.0 * routed * h * gated * i,
            dtype=p.math_dtype,
            weight_bytes=loaded * h * gated * i * wb,
            act_bytes=routed * (h + gated * i) * ab,
            count=count,
            launches=2,
            group="moe",
            meta={"kind": "matmul", "experts_loaded": loaded, "m": routed / loaded, "moe": "fused", **shape},
        ),
        replace(
            elementwise(
                "MoE experts activation", routed * i, ACTIVATION_FLOPS_PER_ELEMENT[m.mlp], gated, 1, ab, count, "moe"
            ),
            meta={"kind": "elementwise", "moe": "inside"},
        ),
        Op(
            name="MoE experts down + combine",
            flops=2.0 * routed * i * h,
            dtype=p.math_dtype,
            weight_bytes=loaded * i * h * wb,
            act_bytes=routed * (i + h) * ab + tokens * h * ab,
            count=count,
            launches=2,
            group="moe",
            meta={"kind": "matmul", "experts_loaded": loaded, "m": routed / loaded, "moe": "inside"},
        ),
    ]
    if moe.shared_experts:
        width = moe.shared_experts * (moe.shared_expert_intermediate_size or moe.expert_intermediate_size)
        ops += mlp_ops(w, tokens, count, width, "shared expert")
    return ops
