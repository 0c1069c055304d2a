"""How a MoE layer's tokens spread over its experts, as the engine-measured tables timed it.

A fused MoE kernel's time depends on how many tokens each expert gets, not only on how many there
are. In a prompt's prefill the busiest expert's GEMM sets the pace while the SMs that finished
wait; in a small decode batch a skewed spread touches fewer experts, so fewer weights are read.
aiconfigurator-core times every MoE shape three ways (its collectors' ``collect_moe.py``; the
method in its ``docs/POWER_LAW_DISTRIBUTION.md``):

- ``balanced``: every expert an equal share, the ideal no real router reaches;
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

The datasheet (ideal) path keeps uniform routing: its expected count of experts touched
(``roofline.ops.mlp.expected_experts_loaded``) is the ideal bound every table time is held above.
"""

from __future__ import annotations

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
    "balanced": "every expert an equal share: the ideal",
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
    """ "power-law routing (α 1.01, the database's estimate for DeepSeek-V3/R1)"."""
    words = ROUTING_WORDS[routing]
    why = ROUTING_WHY[routing]
    if auto and routing != "balanced":
        why += ", as the database prices this model"
    return f"{words[:-1]}, {why})" if words.endswith(")") else f"{words} ({why})"
