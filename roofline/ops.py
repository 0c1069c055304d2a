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
"""

from __future__ import annotations

import numpy as np

from roofline.engine import Op
from roofline.models import ModelConfig
from roofline.workload import Precision, Workload

VECTOR = "vector"  # elementwise math: the vector-unit (fp32) peak

# Rough FLOPs per element of elementwise kernels; they never decide a regime, but they are not 0.
NORM_FLOPS_PER_ELEMENT = {"rmsnorm": 4.0, "layernorm": 7.0}
ACTIVATION_FLOPS_PER_ELEMENT = {"gated": 5.0, "dense": 8.0}  # SiLU(x)*y ; tanh-GELU
SOFTMAX_FLOPS_PER_ELEMENT = 5.0
ROPE_FLOPS_PER_ELEMENT = 3.0


# The time breakdown's group for the weight matmuls around attention (QKV, output, MLA up/down and
# absorbed projections): "attention" is the kernel on Q, K, V and the cache, with RoPE and QK norm.
PROJECTIONS = "attention projections"


def expected_experts_loaded(num_experts: int, top_k: int, tokens: np.ndarray | float) -> np.ndarray:
    """Expected distinct experts among ``tokens`` tokens, each routed to ``top_k`` of them.

    A token skips a given expert with probability 1 - k/E; with independent tokens the expert
    is untouched with probability (1 - k/E)^tokens.
    """
    tokens = np.asarray(tokens, float)
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def causal_pairs(seq_len: np.ndarray | float, window: int | None = None) -> np.ndarray:
    """(query, key) pairs of causal attention over one sequence: sum_i min(i+1, window)."""
    s = np.asarray(seq_len, float)
    full = s * (s + 1) / 2
    if window is None:
        return full
    w = float(window)
    return np.where(s <= w, full, w * (w + 1) / 2 + (s - w) * w)


def chunked_pairs(seq_len: np.ndarray | float, chunk: int) -> np.ndarray:
    """(query, key) pairs of chunked causal attention: each aligned chunk of ``chunk`` tokens is
    its own causal square, n full chunks of c(c+1)/2 pairs plus the remainder r(r+1)/2."""
    s = np.asarray(seq_len, float)
    n = np.floor(s / chunk)
    r = s - n * chunk
    return n * chunk * (chunk + 1) / 2 + r * (r + 1) / 2


Local = tuple[str, int] | None  # ("window" | "chunk", tokens) for local layers; None: global


def _pairs(s: np.ndarray, local: Local) -> np.ndarray:
    if local and local[0] == "chunk":
        return chunked_pairs(s, local[1])
    return causal_pairs(s, local[1] if local else None)


def _decode_keys(s: np.ndarray, local: Local) -> np.ndarray:
    """Keys the new token (position s) attends to: all s + 1, the window's, or its chunk's."""
    if local is None:
        return s + 1
    if local[0] == "chunk":
        return np.mod(s, local[1]) + 1
    return np.minimum(s + 1, local[1])


def _kept(s: np.ndarray, local: Local) -> np.ndarray:
    """Tokens a local layer keeps in its cache after a prefill of s tokens."""
    if local is None:
        return s
    if local[0] == "chunk":
        return np.mod(s - 1, local[1]) + 1
    return np.minimum(s, local[1])


def _ew(
    name: str,
    elements,
    flops_per_element: float,
    reads: float,
    writes: float,
    ab: float,
    count: int,
    group: str,
    launches: int = 1,
    extra_weight_bytes=0.0,
) -> Op:
    """An elementwise kernel over ``elements`` elements, reading and writing whole tensors."""
    return Op(
        name=name,
        flops=flops_per_element * elements,
        dtype=VECTOR,
        act_bytes=(reads + writes) * elements * ab,
        weight_bytes=extra_weight_bytes,
        count=count,
        launches=launches,
        group=group,
        meta={"kind": "elementwise"},
    )


def _linear(
    name: str,
    rows,
    in_features: float,
    out_features: float,
    p: Precision,
    count: int,
    group: str,
    weight_dtype_bytes: float | None = None,
    launches: int = 1,
    matrices: float = 1,
) -> Op:
    """``rows`` tokens through a linear layer; ``matrices`` independent weight matrices of that
    shape (one per head for MLA's absorbed projections), each seeing ``rows / matrices`` rows."""
    wb = p.weight_bytes if weight_dtype_bytes is None else weight_dtype_bytes
    return Op(
        name=name,
        flops=2.0 * rows * in_features * out_features,
        dtype=p.act_dtype,
        weight_bytes=matrices * in_features * out_features * wb * np.ones_like(rows),
        act_bytes=rows * (in_features + out_features) * p.act_bytes,
        count=count,
        launches=launches,
        group=group,
        meta={"kind": "matmul", "m": rows / matrices},
    )


def _all_reduce(name: str, tokens, hidden: int, p: Precision, tp: int, count: int) -> Op:
    message = tokens * hidden * p.act_bytes
    return Op(
        name=name,
        flops=(tp - 1) / tp * tokens * hidden,
        dtype=VECTOR,
        act_bytes=2 * message,
        comm_bytes=2 * (tp - 1) / tp * message,
        collectives=1,
        count=count,
        launches=1,
        group="communication",
        meta={"kind": "communication"},
    )


def attention_label(m: ModelConfig, local: bool) -> str:
    """How the attention ops of local and global layers are told apart (empty when all alike)."""
    if not m.local_layers or m.local_layers == m.num_layers:
        return ""
    return {"window": "sliding window", "chunk": "chunked"}[m.local_kind] if local else "global"


def is_local_layer(m: ModelConfig, index: int) -> bool:
    """Layer ``index`` (0-based) attends locally unless it is every n-th (global) one."""
    if m.local_span is None:
        return False
    return m.global_layer_interval is None or (index + 1) % m.global_layer_interval != 0


def _attention_ops(w: Workload, count: int, local: Local, label: str) -> list[Op]:
    """Attention proper (the kernel on Q, K, V and the cache) for ``count`` layers."""
    m, p, tp = w.model, w.precision, w.tp
    b = np.asarray(w.batch, float)
    s = np.asarray(w.seq_len, float)
    nh = m.num_heads / tp
    ab, kb = p.act_bytes, p.kv_bytes
    adt = p.attention_dtype
    suffix = f" ({label})" if label else ""
    group = "attention"

    if m.mla and w.phase == "decode":
        r, rope = m.mla.kv_lora_rank, m.mla.qk_rope_head_dim
        keys = _decode_keys(s, local)
        latent = r + rope  # cached per token, shared by every head (and every TP rank)
        return [
            # Every head has its own W_UK slice (qk_nope x r): all nh of them are read.
            _linear(
                "MLA query absorb (W_UK)" + suffix,
                b * nh,
                m.mla.qk_nope_head_dim,
                r,
                p,
                count,
                PROJECTIONS,
                matrices=nh,
            ),
            Op(
                name="attention (MLA latent, decode)" + suffix,
                flops=2.0 * b * nh * keys * (latent + r),
                dtype=adt,
                act_bytes=b * nh * (latent + r) * ab,
                kv_bytes=b * keys * latent * kb + b * latent * kb,
                count=count,
                launches=2,
                group=group,
                meta={"kind": "attention"},
            ),
            _linear(
                "MLA output absorb (W_UV)" + suffix, b * nh, r, m.mla.v_head_dim, p, count, PROJECTIONS, matrices=nh
            ),
        ]

    ops: list[Op] = []
    qk, v = m.qk_head_dim, m.v_head_dim
    if m.mla:  # prefill: rebuild per-head K and V from the latent, then ordinary attention
        nkv = nh
        r = m.mla.kv_lora_rank
        ops.append(
            _linear("MLA KV up-projection" + suffix, b * s, r, nh * (m.mla.qk_nope_head_dim + v), p, count, PROJECTIONS)
        )
        cached_per_token = r + m.mla.qk_rope_head_dim
    else:
        nkv = m.kv_heads_per_device(tp)
        cached_per_token = nkv * (qk + v)

    if w.phase == "prefill":
        q_rows, keys = b * s, s
        pairs = b * _pairs(s, local)
        # Fresh K and V come from the projection output (activation dtype), per KV head.
        k_read, v_read = b * s * nkv * qk * ab, b * s * nkv * v * ab
        kept = _kept(s, local)
        cache_write = b * kept * cached_per_token * kb
        k_cache, v_cache = 0.0, 0.0
    else:
        q_rows = b
        keys = _decode_keys(s, local)
        pairs = b * keys
        k_read, v_read = 0.0, 0.0
        cache_write = b * cached_per_token * kb
        # The whole cache is read once per step: K for the scores, V for the weighted sum.
        k_cache, v_cache = b * keys * nkv * qk * kb, b * keys * nkv * v * kb
    q_bytes = q_rows * nh * qk * ab
    o_bytes = q_rows * nh * v * ab
    # Attention sinks (gpt-oss): one learned logit per head joins every query's softmax.
    sink_flops = 2.0 * q_rows * nh if m.attention_sinks else 0.0
    sink_bytes = nh * ab if m.attention_sinks else 0.0

    # Independent work a kernel can spread over the GPU: (sequence, KV head) pairs in decode, (sequence,
    # head, 128-query tile) triples in prefill. Calibration's occupancy term reads it.
    parallel = b * nkv if w.phase == "decode" else b * nh * np.ceil(s / 128)
    if w.attention == "flash":
        ops.append(
            Op(
                name=f"attention ({'FlashAttention' if w.phase == 'prefill' else 'fused decode'})" + suffix,
                flops=2.0 * nh * pairs * (qk + v) + sink_flops,
                dtype=adt,
                weight_bytes=sink_bytes * np.ones_like(q_rows),
                act_bytes=q_bytes + k_read + v_read + o_bytes,
                kv_bytes=k_cache + v_cache + cache_write,
                count=count,
                launches=2,
                group=group,
                meta={"kind": "attention", "parallel": parallel},
            )
        )
        return ops

    # Naive: the full masked score matrix (queries x keys per head) is written, softmaxed in
    # place and read back; no causal or window saving in the FLOPs.
    scores = q_rows * nh * keys
    ops += [
        Op(
            name="attention scores QK^T (naive)" + suffix,
            flops=2.0 * scores * qk,
            dtype=adt,
            act_bytes=q_bytes + k_read + scores * ab,
            kv_bytes=k_cache + cache_write,
            count=count,
            launches=2,
            group=group,
            meta={"kind": "attention"},
        ),
        _ew(
            "attention softmax + mask (naive)" + suffix,
            scores,
            SOFTMAX_FLOPS_PER_ELEMENT,
            1,
            1,
            ab,
            count,
            group,
            extra_weight_bytes=sink_bytes,
        ),
        Op(
            name="attention scores x V (naive)" + suffix,
            flops=2.0 * scores * v,
            dtype=adt,
            act_bytes=scores * ab + v_read + o_bytes,
            kv_bytes=v_cache,
            count=count,
            launches=1,
            group=group,
            meta={"kind": "attention"},
        ),
    ]
    return ops


def _mlp_ops(w: Workload, tokens, count: int, intermediate: int, prefix: str) -> list[Op]:
    m, p = w.model, w.precision
    h, i = m.hidden_size, intermediate / w.tp
    act = ACTIVATION_FLOPS_PER_ELEMENT[m.mlp]
    if m.mlp == "gated":
        return [
            _linear(f"{prefix} gate+up projection", tokens, h, 2 * i, p, count, "mlp"),
            _ew(f"{prefix} activation (SiLU/GELU x up)", tokens * i, act, 2, 1, p.act_bytes, count, "mlp"),
            _linear(f"{prefix} down projection", tokens, i, h, p, count, "mlp"),
        ]
    return [
        _linear(f"{prefix} up projection", tokens, h, i, p, count, "mlp"),
        _ew(f"{prefix} activation (GELU)", tokens * i, act, 1, 1, p.act_bytes, count, "mlp"),
        _linear(f"{prefix} down projection", tokens, i, h, p, count, "mlp"),
    ]


def _moe_ops(w: Workload, tokens, count: int) -> list[Op]:
    m, p, tp = w.model, w.precision, w.tp
    moe = m.moe
    h, i = m.hidden_size, moe.expert_intermediate_size / tp
    k, e = moe.experts_per_token, moe.num_experts
    routed = tokens * k
    loaded = expected_experts_loaded(e, k, tokens)
    gated = 2 if m.mlp == "gated" else 1
    ab, wb = p.act_bytes, p.expert_weight_bytes  # routed experts may have a format of their own
    ops = [
        _linear("MoE router", tokens, h, e, p, count, "moe", weight_dtype_bytes=ab, launches=3),
        Op(
            name="MoE experts gate+up",
            flops=2.0 * routed * h * gated * i,
            dtype=p.act_dtype,
            weight_bytes=loaded * h * gated * i * wb,
            act_bytes=routed * (h + gated * i) * ab,
            count=count,
            launches=2,
            group="moe",
            meta={"kind": "matmul", "experts_loaded": loaded, "m": routed / loaded},
        ),
        _ew("MoE experts activation", routed * i, ACTIVATION_FLOPS_PER_ELEMENT[m.mlp], gated, 1, ab, count, "moe"),
        Op(
            name="MoE experts down + combine",
            flops=2.0 * routed * i * h,
            dtype=p.act_dtype,
            weight_bytes=loaded * i * h * wb,
            act_bytes=routed * (i + h) * ab + tokens * h * ab,
            count=count,
            launches=2,
            group="moe",
            meta={"kind": "matmul", "experts_loaded": loaded, "m": routed / loaded},
        ),
    ]
    if moe.shared_experts:
        width = moe.shared_experts * (moe.shared_expert_intermediate_size or moe.expert_intermediate_size)
        ops += _mlp_ops(w, tokens, count, width, "shared expert")
    return ops


def step_ops(w: Workload) -> list[Op]:
    """Every op of one forward step, per device; FLOPs and bytes per occurrence (see ``count``)."""
    if w.phase not in ("prefill", "decode"):
        raise ValueError(f"step_ops takes one prefill or decode step, got phase {w.phase!r}")
    m, p, tp = w.model, w.precision, w.tp
    L, h = m.num_layers, m.hidden_size
    t = w.tokens
    b = np.asarray(w.batch, float) * np.ones_like(t)
    ab = p.act_bytes
    nh = m.num_heads / tp
    norm_flops = NORM_FLOPS_PER_ELEMENT[m.norm]
    norm_weight = h * ab * (2 if m.norm == "layernorm" else 1)
    ops: list[Op] = []

    gathers = 2 if m.positional == "learned" else 1
    ops.append(
        _ew(
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
    ops.append(_ew("input norm", t * h, norm_flops, 1, 1, ab, L, "norm", extra_weight_bytes=norm_weight))

    # Q, K, V projections.
    if m.mla:
        ml = m.mla
        q_in = ml.q_lora_rank or h
        q_flops_weights = (h * ml.q_lora_rank if ml.q_lora_rank else 0) + q_in * nh * m.qk_head_dim
        kv_down = h * (ml.kv_lora_rank + ml.qk_rope_head_dim)
        out = (ml.q_lora_rank or 0) + nh * m.qk_head_dim + ml.kv_lora_rank + ml.qk_rope_head_dim
        ops.append(
            Op(
                name="QKV projection (MLA down/up)",
                flops=2.0 * t * (q_flops_weights + kv_down),
                dtype=p.act_dtype,
                weight_bytes=(q_flops_weights + kv_down) * p.weight_bytes * np.ones_like(t),
                act_bytes=t * (h + out) * ab,
                count=L,
                launches=5,
                group=PROJECTIONS,
                meta={"kind": "matmul", "m": t},
            )
        )
        rope_elements = t * (nh + 1) * ml.qk_rope_head_dim
    else:
        nkv = m.kv_heads_per_device(tp)
        ops.append(_linear("QKV projection", t, h, (nh + 2 * nkv) * m.head_dim, p, L, PROJECTIONS))
        rope_elements = t * (nh + nkv) * m.head_dim
    if m.qk_norm:
        qk_weights = 2 * m.qk_head_dim * ab if m.qk_norm == "rmsnorm" else 0.0
        heads = nh + (1 if m.mla else m.kv_heads_per_device(tp))
        qk_elements = t * heads * m.qk_head_dim
        ops.append(
            _ew(
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
        ops.append(_ew("rotary embedding", rope_elements, ROPE_FLOPS_PER_ELEMENT, 1, 1, ab, L, "attention"))

    local = m.local_layers
    if local:
        ops += _attention_ops(w, local, (m.local_kind, m.local_span), attention_label(m, True))
    if L - local:
        ops += _attention_ops(w, L - local, None, attention_label(m, False))

    ops.append(_linear("output projection", t, nh * m.v_head_dim, h, p, L, PROJECTIONS))
    reduces = 1 if m.parallel_attention else 2
    if tp > 1:
        ops.append(_all_reduce("all-reduce (attention)" if reduces == 2 else "all-reduce", t, h, p, tp, L))
    if m.parallel_attention:
        ops.append(_ew("residual add (x + attn + mlp)", t * h, 2, 3, 1, ab, L, "residual"))
    else:
        ops.append(_ew("residual add", t * h, 1, 2, 1, ab, 2 * L, "residual"))
    if m.norms_per_layer > 1:
        ops.append(
            _ew(
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
        ops += _mlp_ops(w, t, m.dense_mlp_layers, m.intermediate_size, "MLP")
    if m.moe_layers:
        ops += _moe_ops(w, t, m.moe_layers)
    if tp > 1 and reduces == 2:
        ops.append(_all_reduce("all-reduce (MLP)", t, h, p, tp, L))

    ops.append(_ew("final norm", t * h, norm_flops, 1, 1, ab, 1, "norm", extra_weight_bytes=norm_weight))
    # Prefill needs only each sequence's last token's logits; decode one row per sequence.
    vocab = m.vocab_size / tp
    logits = _linear("logits (LM head)", b, h, vocab, p, 1, "logits", weight_dtype_bytes=ab)
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
