"""LLM prefill and decode steps as lists of Ops, per device of a tensor-parallel group.

Every count below is written with numpy arithmetic, so ``batch`` and ``seq_len`` may be
scalars (one step) or broadcastable arrays (a whole batch x context sweep in one pass).

Conventions (DESIGN.md, "Modelling notes"):
- Linear layer: 2*M*N*K FLOPs; bytes = weights (at the weight format, its block scales
  included) + input + output (at the activation dtype). Weight-only quantization shrinks weight
  bytes; the math runs at the activation (compute) dtype, whose peak is used. fp8/int8/fp4
  activations (W8A8, W4A4) use that dtype's peak.
- Embeddings and the LM head stay at the activation storage dtype (serving engines do not
  quantize them); norms and other elementwise math run on the vector units ("vector" dtype).
- Prefill attention is causal: a query at position i sees i+1 keys (or min(i+1, window), or
  the keys of its own aligned chunk). A fused (FlashAttention-style) kernel reads Q, K, V once
  and writes O; K and V count at the KV heads. A naive kernel computes the full masked square
  and writes and re-reads the scores. Attention sinks add one logit per head and query.
- Decode attention reads the whole KV cache once per step (capped at the sliding window; a
  chunked layer reads only the current chunk).
- MLA decode uses the absorbed form: attention runs on the cached latent (kv_lora_rank) and
  rotary key; each head's slice of the K and V up-projections (W_UK, W_UV) is folded into its
  query and output, so a decode step reads all heads' slices.
- MoE: the experts loaded per step are the expected number of distinct experts among the
  step's tokens, E * (1 - (1 - k/E)^tokens), plus the shared experts.
- Tensor parallelism t: heads, intermediate sizes, experts' intermediate sizes and the vocab
  are split over t; KV heads are replicated when there are fewer than t. Two all-reduces per
  layer (one with parallel attention), ring cost 2(t-1)/t x message bytes per device.

- ``kernels``: the building blocks (a linear layer, an elementwise kernel, an all-reduce)
- ``attention``: the attention kernel on Q, K, V and the cache, causal, local and MLA
- ``mlp``: dense MLPs and mixture-of-experts layers
- ``step``: one prefill or decode step, every op in order
"""

from roofline.ops.attention import attention_label, causal_pairs, chunked_pairs, is_local_layer
from roofline.ops.kernels import (
    ACTIVATION_FLOPS_PER_ELEMENT,
    NORM_FLOPS_PER_ELEMENT,
    PROJECTIONS,
    ROPE_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
    VECTOR,
)
from roofline.ops.mlp import expected_experts_loaded
from roofline.ops.step import step_ops

__all__ = [
    "ACTIVATION_FLOPS_PER_ELEMENT",
    "NORM_FLOPS_PER_ELEMENT",
    "PROJECTIONS",
    "ROPE_FLOPS_PER_ELEMENT",
    "SOFTMAX_FLOPS_PER_ELEMENT",
    "VECTOR",
    "attention_label",
    "causal_pairs",
    "chunked_pairs",
    "expected_experts_loaded",
    "is_local_layer",
    "step_ops",
]
