"""How a MoE layer's tokens spread over its experts, as the engine-measured tables timed it.

A fused MoE kernel's time depends on how many tokens each expert gets, not only on how many there
are. In a prompt's prefill the busiest expert's GEMM sets the pace while the SMs that finished
wait; in a small decode batch a skewed spread touches fewer experts, so fewer weights are read.
aiconfigurator-core times every MoE shape three ways (its collectors' ``collect_moe.py``; the
method in its ``docs/POWER_LAW_DISTRIBUTION.md``):

- ``balanced``: every expert an equal share, a perfectly even spread no real router reaches (the
  fastest for a prompt; in a small decode batch it reads the most experts);
- a power law of exponent 1.01: the maintainers' estimate for DeepSeek-V3/R1 serving CNN-DailyMail
  and OpenOrca prompts, found by matching those runs' latency against the tables (effective load
  balancing, still a clear skew);
- a power law of exponent 1.2: their estimate for Qwen3-235B on the same data (stronger expert
  specialisation).

Real routing is skewed: the maintainers' capture of it inside vLLM (Qwen3.6-35B-A3B on a B300,
``collector/layerwise/fpm_ground_truth/EXPERT_ROUTING_CAPTURE.md``) found the busiest GPU's experts
doing 1.35x the mean work, steady within 2% from step to step.

Their own predictor prices DeepSeek-V3-architecture models (Kimi K2 among them) and Llama 4 at 1.01,
and Qwen3 MoE, Mixtral and gpt-oss at 1.2 (``aiconfigurator_core/sdk/models``). ``auto`` follows
that choice; for a model of the user's own, the models priced at 1.01 are the ones with shared
experts, so a model with shared experts gets 1.01 and one without 1.2. The exponents are the
database's estimates from its maintainers' own runs; no value of the runs this project scores
(``roofline.validate``) went into choosing them. A workload whose routing is known better is set
by name.

The datasheet (ideal) path keeps uniform routing (``roofline.ops.mlp.expected_experts_loaded``).
A table time is held above the datasheet bound of the layer; read at a skewed routing, which may
touch fewer experts, above the bound with only the top-k experts' weights, the fewest any routing
loads (``skewed_bounds``). Where a file has no usable timing at the routing
asked for, the next in ``READ_ORDER`` is read, and the op says so; a routing whose one-token time
disagrees with the two others (``one_token_outliers``) is not read.
"""

from __future__ import annotations

import numpy as np

# setting -> the database's ``distribution`` value
TABLE_DISTRIBUTIONS = {
    "balanced": "balanced",
    "power-law-1.01": "power_law_1.01",
    "power-law-1.2": "power_law_1.2",
}
MOE_ROUTINGS: tuple[str, ...] = ("auto", *TABLE_DISTRIBUTIONS)
ROUTING_WORDS = {
    "balanced": "balanced routing",
    "power-law-1.01": "power-law routing (α 1.01)",
    "power-law-1.2": "power-law routing (α 1.2)",
}
ROUTING_WHY = {
    "power-law-1.01": "the database's estimate for DeepSeek-V3/R1",
    "power-law-1.2": "the database's estimate for Qwen3-235B",
    "balanced": "every expert an equal share, a perfectly even spread",
}


def check_moe_routing(routing: str) -> str:
    if routing not in MOE_ROUTINGS:
        raise ValueError(f"moe_routing must be one of {', '.join(MOE_ROUTINGS)}, got {routing!r}")
    return routing


def model_routing(shared_experts: int) -> str:
    """What ``auto`` reads for a MoE model: α 1.01 with shared experts (DeepSeek-V3, Kimi K2, Llama 4,
    as the database prices them), α 1.2 without (Qwen3 MoE, Mixtral, gpt-oss)."""
    return "power-law-1.01" if shared_experts else "power-law-1.2"


def resolved_routing(setting: str | None, shared_experts: int) -> str:
    """The routing a MoE layer is read at: the setting, or the model's own (``model_routing``) for
    ``auto`` (and None)."""
    if setting in (None, "auto"):
        return model_routing(shared_experts)
    return check_moe_routing(setting)


def routing_words(routing: str, auto: bool = False) -> str:
    """The words for ``routing``, such as "power-law routing (α 1.01, the database's estimate for
    DeepSeek-V3/R1)"; with ``auto``, also the rule that chose it."""
    words = ROUTING_WORDS[routing]
    why = ROUTING_WHY[routing]
    if auto and routing != "balanced":
        shared = "with" if routing == "power-law-1.01" else "without"
        why += f", read for MoE models {shared} shared experts"
    return f"{words[:-1]}, {why})" if words.endswith(")") else f"{words} ({why})"


# Where a file has no usable timing at the routing asked for, the next read: the other skew first.
READ_ORDER = {
    "balanced": ("balanced", "power-law-1.01", "power-law-1.2"),
    "power-law-1.01": ("power-law-1.01", "power-law-1.2", "balanced"),
    "power-law-1.2": ("power-law-1.2", "power-law-1.01", "balanced"),
}
# With one token and the experts split by TP only, every routing does the same work: the token's
# top-k experts, all on every GPU. The database's three timings of a shape there should agree; one
# more than this factor from the two others, which agree, measured something else.
ONE_TOKEN_SPREAD = 1.5


def one_token_outliers(one_token: dict[str, float]) -> dict[str, float]:
    """The routings whose one-token time is more than ``ONE_TOKEN_SPREAD`` x off both others' while
    those two agree within it, each with its ratio to their geometric mean. Needs all three."""
    if len(one_token) < 3 or not all(t > 0 for t in one_token.values()):
        return {}
    out: dict[str, float] = {}
    for routing, t in one_token.items():
        a, b = (v for k, v in one_token.items() if k != routing)
        agree = max(a, b) / min(a, b) <= ONE_TOKEN_SPREAD
        if agree and all(max(t / o, o / t) > ONE_TOKEN_SPREAD for o in (a, b)):
            out[routing] = t / (a * b) ** 0.5
    return out


def routing_note(asked: str, read_at: str, outliers: dict[str, float], auto: bool = False) -> str:
    """How the tokens were routed in the timing read, and why that routing."""
    if read_at == asked:
        return routing_words(asked, auto)
    if asked in outliers:
        return (
            f"{ROUTING_WORDS[read_at]}: this file's {ROUTING_WORDS[asked]} timing of this shape is "
            f"{outliers[asked]:.2g}x the other routings' at one token, where every routing does the same work"
        )
    return f"{ROUTING_WORDS[read_at]}: this file timed no {ROUTING_WORDS[asked]} of this shape"


def skewed_bounds(ops, ideal: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """``bounds`` (each op's datasheet bound, (ops, *sweep)) with a MoE layer's parts bounded as if
    its tokens touched only ``topk`` experts, the fewest any routing touches: their weights'
    bytes scaled by topk / the experts uniform routing loads, the activations' and the math kept."""
    out = bounds.copy()
    share = None
    for i, op in enumerate(ops):
        moe = op.meta.get("moe")
        if moe == "fused":
            loaded = np.asarray(op.meta["experts_loaded"], float)
            share = np.minimum(1.0, float(op.meta["topk"]) / np.maximum(loaded, 1e-12))
        if moe not in ("fused", "inside") or share is None:
            continue
        weights = np.asarray(op.weight_bytes, float)
        moved = weights + np.asarray(op.act_bytes, float)
        scale = np.where(moved > 0, (weights * share + (moved - weights)) / np.where(moved > 0, moved, 1.0), 1.0)
        out[i] = np.fmax(ideal[0, i], ideal[1, i] * np.broadcast_to(scale, ideal.shape[2:]))
    return out
