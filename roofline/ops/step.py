"""One prefill or decode step, per device of a tensor-parallel group: every op in order."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline.engine import Op
from roofline.ops.attention import attention_label, attention_ops
from roofline.ops.kernels import (
    NORM_FLOPS_PER_ELEMENT,
    PROJECTIONS,
    ROPE_FLOPS_PER_ELEMENT,
    VECTOR,
    all_reduce,
    elementwise,
    linear,
    mla_qkv_precision,
)
from roofline.ops.mlp import mlp_ops, moe_ops
from roofline.workload import Workload


def mla_parts(m, heads: float) -> tuple[tuple[float, float], ...]:
    """The (n, k) GEMMs of MLA's down and up projections on one rank of ``heads`` heads: q_a and
    kv_a fused over the hidden size (replicated on every rank), then q_b to the heads; without a
    query latent, the query projection and kv_a apart."""
    ml, h = m.mla, m.hidden_size
    kv_a = ml.kv_lora_rank + ml.qk_rope_head_dim
    if ml.q_lora_rank:
        return ((ml.q_lora_rank + kv_a, h), (heads * m.qk_head_dim, ml.q_lora_rank))
    return ((heads * m.qk_head_dim, h), (kv_a, h))


def step_ops(w: Workload, rows: np.ndarray | float | None = None) -> list[Op]:
    """Every op of one forward step, per device; FLOPs and bytes per occurrence (see ``count``).

    ``rows``: the tokens through the linear layers, norms and MLPs when they are more than the
    workload's own: a continuous-batching step's decode rows plus its prompt chunk, a token count
    that in steady state is a mean and need not be whole. Attention and the LM head still see
    ``w.batch`` sequences."""
    if w.phase not in ("prefill", "decode"):
        raise ValueError(f"step_ops takes one prefill or decode step, got phase {w.phase!r}")
    if w.attention_dp > 1:
        return _attention_dp_ops(w, rows)
    m, p, tp = w.model, w.kernel_precision, w.tp
    L, h = m.num_layers, m.hidden_size
    t = w.tokens if rows is None else np.asarray(rows, float) * np.ones_like(w.tokens)
    if np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise ValueError(f"rows must be positive and finite, got {rows!r}")
    b = np.asarray(w.batch, float) * np.ones_like(t)
    ab = p.act_bytes
    nh = m.num_heads / tp
    norm_flops = NORM_FLOPS_PER_ELEMENT[m.norm]
    norm_weight = h * ab * (2 if m.norm == "layernorm" else 1)
    ops: list[Op] = []

    gathers = 2 if m.positional == "learned" else 1
    ops.append(
        elementwise(
            "embedding gather",
            t * h,
            gathers - 1,
            0,
            1,
            ab,
            1,
            "embedding",
            launches=gathers,
            extra_weight_bytes=gathers * t * h * ab,
        )
    )
    ops.append(elementwise("input norm", t * h, norm_flops, 1, 1, ab, L, "norm", extra_weight_bytes=norm_weight))

    # Q, K, V projections.
    if m.mla:
        ml = m.mla
        qp = mla_qkv_precision(p)  # bf16 for an NVFP4 checkpoint
        q_in = ml.q_lora_rank or h
        q_flops_weights = (h * ml.q_lora_rank if ml.q_lora_rank else 0) + q_in * nh * m.qk_head_dim
        kv_down = h * (ml.kv_lora_rank + ml.qk_rope_head_dim)
        out = (ml.q_lora_rank or 0) + nh * m.qk_head_dim + ml.kv_lora_rank + ml.qk_rope_head_dim
        ops.append(
            Op(
                name="QKV projection (MLA down/up)",
                flops=2.0 * t * (q_flops_weights + kv_down),
                dtype=qp.math_dtype,
                weight_bytes=(q_flops_weights + kv_down) * qp.weight_bytes * np.ones_like(t),
                act_bytes=t * (h + out) * ab,
                count=L,
                launches=5,
                group=PROJECTIONS,
                # As the engines run it: q_a and kv_a fused into one GEMM over the hidden size, then
                # q_b from the query's latent to the heads (roofline.tables.mla reads both).
                meta={
                    "kind": "matmul",
                    "m": t,
                    "fp8_scaling": qp.fp8_scaling,
                    "weight_dtype": qp.weight_dtype,
                    "parts": mla_parts(m, nh),
                    "nvfp4_kept": qp is not p,
                },
            )
        )
        rope_elements = t * (nh + 1) * ml.qk_rope_head_dim
    else:
        nkv = m.kv_heads_per_device(tp)
        ops.append(linear("QKV projection", t, h, (nh + 2 * nkv) * m.head_dim, p, L, PROJECTIONS))
        rope_elements = t * (nh + nkv) * m.head_dim
    if m.qk_norm:
        qk_weights = 2 * m.qk_head_dim * ab if m.qk_norm == "rmsnorm" else 0.0
        heads = nh + (1 if m.mla else m.kv_heads_per_device(tp))
        qk_elements = t * heads * m.qk_head_dim
        ops.append(
            elementwise(
                f"QK norm ({m.qk_norm})",
                qk_elements,
                norm_flops,
                1,
                1,
                ab,
                L,
                "attention",
                extra_weight_bytes=qk_weights,
            )
        )
    if m.positional == "rope":
        ops.append(elementwise("rotary embedding", rope_elements, ROPE_FLOPS_PER_ELEMENT, 1, 1, ab, L, "attention"))

    local = m.local_layers
    if local:
        ops += attention_ops(w, local, (m.local_kind, m.local_span), attention_label(m, True))
    if L - local:
        ops += attention_ops(w, L - local, None, attention_label(m, False))

    ops.append(linear("output projection", t, nh * m.v_head_dim, h, p, L, PROJECTIONS))
    reduces = 1 if m.parallel_attention else 2
    if tp > 1:
        ops.append(all_reduce("all-reduce (attention)" if reduces == 2 else "all-reduce", t, h, p, tp, L))
    if m.parallel_attention:
        ops.append(elementwise("residual add (x + attn + mlp)", t * h, 2, 3, 1, ab, L, "residual"))
    else:
        ops.append(elementwise("residual add", t * h, 1, 2, 1, ab, 2 * L, "residual"))
    if m.norms_per_layer > 1:
        ops.append(
            elementwise(
                "post-attention norm" + ("s" if m.norms_per_layer > 2 else ""),
                t * h,
                norm_flops,
                1,
                1,
                ab,
                L * (m.norms_per_layer - 1),
                "norm",
                extra_weight_bytes=norm_weight,
            )
        )

    if m.dense_mlp_layers:
        ops += mlp_ops(w, t, m.dense_mlp_layers, m.intermediate_size, "MLP")
    if m.moe_layers:
        ops += moe_ops(w, t, m.moe_layers)
    if tp > 1 and reduces == 2:
        ops.append(all_reduce("all-reduce (MLP)", t, h, p, tp, L))

    ops.append(elementwise("final norm", t * h, norm_flops, 1, 1, ab, 1, "norm", extra_weight_bytes=norm_weight))
    # Prefill needs only each sequence's last token's logits; decode one row per sequence.
    vocab = m.vocab_size / tp
    logits = linear("logits (LM head)", b, h, vocab, p, 1, "logits", weight_dtype_bytes=ab)
    # Logits are written in fp32 for sampling.
    ops.append(Op(**{**logits.__dict__, "act_bytes": b * h * ab + b * vocab * 4.0}))
    if tp > 1:
        message = b * m.vocab_size * 4.0
        ops.append(
            Op(
                name="logits all-gather",
                flops=0.0 * b,
                dtype=VECTOR,
                act_bytes=message,
                comm_bytes=(tp - 1) / tp * message,
                collectives=1,
                count=1,
                group="communication",
                meta={"kind": "communication"},
            )
        )
    return [Op(**{**op.__dict__, "phase": w.phase}) for op in ops]


def _attention_dp_ops(w: Workload, rows) -> list[Op]:
    """One step of one attention rank under attention data parallelism: the rank's own ops at TP
    ``tp / attention_dp`` (embedding, attention, its projections, norms, LM head) on its ``batch``
    sequences, and the MLP or experts at TP ``tp`` over every rank's tokens, the ranks assumed
    alike. The tokens reach the MLP by an all-gather and return, summed, by a reduce-scatter
    (TensorRT-LLM's attention data parallelism, and SGLang's in its CUDA-graph decode steps): the
    bytes of one all-reduce of every rank's tokens, a ring all-reduce being exactly a
    reduce-scatter and an all-gather, and priced as that all-reduce where a table times it."""
    m, p, d = w.model, w.kernel_precision, w.attention_dp
    rank = replace(w, tp=w.attention_tp, attention_dp=1)
    own = step_ops(rank, rows)
    t = rank.tokens if rows is None else np.asarray(rows, float) * np.ones_like(rank.tokens)
    everyone = d * t
    h, L = m.hidden_size, m.num_layers
    exchange = all_reduce("all-gather to the MLP + reduce-scatter back (every rank's tokens)", everyone, h, p, w.tp, L)
    mlp: list[Op] = [replace(exchange, collectives=2, launches=2)]
    if m.dense_mlp_layers:
        mlp += mlp_ops(w, everyone, m.dense_mlp_layers, m.intermediate_size, "MLP")
    if m.moe_layers:
        mlp += moe_ops(w, everyone, m.moe_layers)
    kept = [op for op in own if op.group not in ("mlp", "moe") and op.name != "all-reduce (MLP)"]
    at = next(i for i, op in enumerate(kept) if op.name == "final norm")
    return kept[:at] + [replace(op, phase=w.phase) for op in mlp] + kept[at:]
