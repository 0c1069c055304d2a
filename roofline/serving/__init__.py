"""Serving: latency against throughput, the best setup under TTFT and TPOT targets, what it costs,
and the serving techniques that move it, each a step on the roofline.

- ``prices``: device-hour prices (shipped defaults, command-line overrides)
- ``traffic``: the shape of the requests
- ``steps``: the engine's steps as ops (mixed chunked-prefill step, speculative verify step)
- ``steady``: steady-state sweep over batch on many devices (TPOT, TTFT, tokens/s, cost)
- ``plan``: the cheapest setup under TTFT and TPOT targets, or what binds
- ``techniques``: speculative decoding and disaggregation
"""

from roofline.serving.plan import (
    DEFAULT_PRECISIONS,
    Best,
    best_under_targets,
    extra_precision,
    searched_sentence,
    splittable_tps,
)
from roofline.serving.prices import SHIPPED_PRICES, Price, load_prices, parse_price
from roofline.serving.steady import DEFAULT_BATCHES, ServingPoints, eager_ceilings, graph_limit, serving_sweep
from roofline.serving.steps import mixed_step_ops, prefill_batches, prompt_chunks, verify_step_ops, whole_neighbours
from roofline.serving.techniques import disaggregation, expected_accepted, speculative
from roofline.serving.traffic import Traffic

__all__ = [
    "DEFAULT_BATCHES",
    "DEFAULT_PRECISIONS",
    "SHIPPED_PRICES",
    "Best",
    "Price",
    "ServingPoints",
    "Traffic",
    "best_under_targets",
    "extra_precision",
    "searched_sentence",
    "disaggregation",
    "eager_ceilings",
    "expected_accepted",
    "graph_limit",
    "load_prices",
    "mixed_step_ops",
    "prefill_batches",
    "prompt_chunks",
    "parse_price",
    "serving_sweep",
    "speculative",
    "splittable_tps",
    "verify_step_ops",
    "whole_neighbours",
]
