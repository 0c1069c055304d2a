"""LLM prefill and decode steps as lists of Ops, per device of a tensor-parallel group.

Every count below is written with numpy arithmetic, so ``batch`` and ``seq_len`` may be
scalars (one step) or broadcastable arrays (a whole batch x context sweep in one pass).

Conventions (DESIGN.md, "Modelling notes"):
- Linear layer: 2*M*N*K FLOPs; bytes = weights (at the weight dtype) + input + output (at the
  activation dtype). Weight-only quantization shrinks weight bytes; the math runs at the
  activation (compute) dtype, whose peak is used. fp8/int8 activations (W8A8) use that peak.
- Embeddings and the LM head stay at the activation storage dtype (serving engines do not
  quantize them); norms and other elementwise math run on the vector units ("vector" dtype).
- Prefill attention is causal: a query at position i sees i+1 keys (or min(i+1, window)). A
  fused (FlashAttention-style) kernel reads Q, K, V once and writes O; K and V count at the KV
  heads. A naive kernel computes the full masked square and writes and re-reads the scores.
- Decode attention reads the whole KV cache once per step (capped at the sliding window).
- MLA decode uses the absorbed form: attention runs on the cached latent (kv_lora_rank) and
  rotary key; the per-head up-projections are folded into the query and output.
- MoE: the experts loaded per step are the expected number of distinct experts among the
  step's tokens, E * (1 - (1 - k/E)^tokens), plus the shared experts.
- Tensor parallelism t: heads, intermediate sizes, experts' intermediate sizes and the vocab
  are split over t; KV heads are replicated when there are fewer than t. Two all-reduces per
  layer (one with parallel attention), ring cost 2(t-1)/t x message bytes per device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from roofline.dtypes import bytes_per_element
from roofline.engine import Op
from roofline.models import ModelConfig

WEIGHT_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")
ACT_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8")
KV_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
PHASES: tuple[str, ...] = ("prefill", "decode")
ATTENTION_KERNELS: tuple[str, ...] = ("flash", "naive")
VECTOR = "vector"  # elementwise math: the vector-unit (fp32) peak

# Rough FLOPs per element of elementwise kernels; they never decide a regime, but they are not 0.
NORM_FLOPS_PER_ELEMENT = {"rmsnorm": 4.0, "layernorm": 7.0}
ACTIVATION_FLOPS_PER_ELEMENT = {"gated": 5.0, "dense": 8.0}  # SiLU(x)*y ; tanh-GELU
SOFTMAX_FLOPS_PER_ELEMENT = 5.0
ROPE_FLOPS_PER_ELEMENT = 3.0


def _check(value: str, allowed: tuple[str, ...], field_name: str) -> None:
    if value not in allowed:
        raise ValueError(f"{field_name}: {value!r} is not allowed; allowed: {', '.join(allowed)}")


@dataclass(frozen=True)
class Precision:
    weight: str = "bf16"  # storage of linear-layer weights
    act: str = "bf16"  # compute dtype of linear layers (its peak is used)
    kv: str = "bf16"  # KV-cache storage

    def __post_init__(self) -> None:
        _check(self.weight, WEIGHT_DTYPES, "weight dtype")
        _check(self.act, ACT_DTYPES, "activation dtype")
        _check(self.kv, KV_DTYPES, "KV-cache dtype")

    @property
    def act_storage(self) -> str:
        """Activations between kernels: 8-bit math still passes bf16 tensors between ops."""
        return "bf16" if self.act in ("fp8", "int8") else self.act

    @property
    def attention_dtype(self) -> str:
        return self.act_storage

    @property
    def weight_bytes(self) -> float:
        return bytes_per_element(self.weight)

    @property
    def act_bytes(self) -> float:
        return bytes_per_element(self.act_storage)

    @property
    def kv_bytes(self) -> float:
        return bytes_per_element(self.kv)


@dataclass(frozen=True)
class StepConfig:
    """One forward step of a model on one tensor-parallel group."""

    model: ModelConfig
    phase: Literal["prefill", "decode"]
    batch: np.ndarray | int
    seq_len: np.ndarray | int  # prompt length (prefill) or tokens already cached (decode)
    precision: Precision = field(default_factory=Precision)
    tp: int = 1
    attention: Literal["flash", "naive"] = "flash"

    def __post_init__(self) -> None:
        _check(self.phase, PHASES, "phase")
        _check(self.attention, ATTENTION_KERNELS, "attention")
        validate_tp(self.model, self.tp)
        batch = np.asarray(self.batch)
        seq = np.asarray(self.seq_len)
        if np.any(batch < 1) or np.any(batch != np.round(batch)):
            raise ValueError(f"batch must be a positive integer, got {self.batch!r}")
        if np.any(seq < 1) or np.any(seq != np.round(seq)):
            raise ValueError(f"seq_len must be a positive integer, got {self.seq_len!r}")
        longest = int(seq.max()) + (1 if self.phase == "decode" else 0)
        if longest > self.model.max_context:
            raise ValueError(
                f"seq_len: {longest} tokens exceed {self.model.id}'s maximum context of {self.model.max_context}"
            )

    @property
    def tokens(self) -> np.ndarray:
        """Tokens processed in this step (rows of every linear layer)."""
        b, s = np.asarray(self.batch, float), np.asarray(self.seq_len, float)
        return b * s if self.phase == "prefill" else b * np.ones_like(s)

    @property
    def context(self) -> np.ndarray:
        """Tokens each sequence holds in its cache after the step."""
        s = np.asarray(self.seq_len, float)
        return s if self.phase == "prefill" else s + 1


def validate_tp(model: ModelConfig, tp: int) -> None:
    if tp < 1:
        raise ValueError(f"tp must be >= 1, got {tp}")
    if model.num_heads % tp:
        raise ValueError(f"tp={tp} does not divide {model.id}'s {model.num_heads} attention heads")
    nkv = model.num_kv_heads
    if not model.mla and nkv % tp and tp % nkv:
        raise ValueError(f"tp={tp} and {model.id}'s {nkv} KV heads do not divide one another")
    sizes = [model.intermediate_size] + ([model.moe.expert_intermediate_size] if model.moe else [])
    for size in sizes:
        if size % tp:
            raise ValueError(f"tp={tp} does not divide {model.id}'s MLP intermediate size {size}")


def kv_heads_per_device(model: ModelConfig, tp: int) -> float:
    """KV heads each device holds; replicated when there are fewer heads than devices."""
    return max(1.0, model.num_kv_heads / tp)


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
) -> Op:
    wb = p.weight_bytes if weight_dtype_bytes is None else weight_dtype_bytes
    return Op(
        name=name,
        flops=2.0 * rows * in_features * out_features,
        dtype=p.act,
        weight_bytes=in_features * out_features * wb * np.ones_like(rows),
        act_bytes=rows * (in_features + out_features) * p.act_bytes,
        count=count,
        launches=launches,
        group=group,
        meta={"kind": "matmul"},
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


def _attention_ops(cfg: StepConfig, count: int, window: int | None, label: str) -> list[Op]:
    """Attention proper (the kernel on Q, K, V and the cache) for ``count`` layers."""
    m, p, tp = cfg.model, cfg.precision, cfg.tp
    b = np.asarray(cfg.batch, float)
    s = np.asarray(cfg.seq_len, float)
    nh = m.num_heads / tp
    ab, kb = p.act_bytes, p.kv_bytes
    adt = p.attention_dtype
    suffix = f" ({label})" if label else ""
    group = "attention"

    if m.mla and cfg.phase == "decode":
        r, rope = m.mla.kv_lora_rank, m.mla.qk_rope_head_dim
        keys = s + 1 if window is None else np.minimum(s + 1, window)
        latent = r + rope  # cached per token, shared by every head (and every TP rank)
        return [
            _linear("MLA query absorb (W_UK)" + suffix, b * nh, m.mla.qk_nope_head_dim, r, p, count, group),
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
            _linear("MLA output absorb (W_UV)" + suffix, b * nh, r, m.mla.v_head_dim, p, count, group),
        ]

    ops: list[Op] = []
    qk, v = m.qk_head_dim, m.v_head_dim
    if m.mla:  # prefill: rebuild per-head K and V from the latent, then ordinary attention
        nkv = nh
        r = m.mla.kv_lora_rank
        ops.append(
            _linear("MLA KV up-projection" + suffix, b * s, r, nh * (m.mla.qk_nope_head_dim + v), p, count, group)
        )
        cached_per_token = r + m.mla.qk_rope_head_dim
    else:
        nkv = kv_heads_per_device(m, tp)
        cached_per_token = nkv * (qk + v)

    if cfg.phase == "prefill":
        q_rows, keys = b * s, s
        pairs = b * causal_pairs(s, window)
        # Fresh K and V come from the projection output (activation dtype), per KV head.
        k_read, v_read = b * s * nkv * qk * ab, b * s * nkv * v * ab
        kept = s if window is None else np.minimum(s, window)
        cache_write = b * kept * cached_per_token * kb
        k_cache, v_cache = 0.0, 0.0
    else:
        q_rows = b
        keys = s + 1 if window is None else np.minimum(s + 1, window)
        pairs = b * keys
        k_read, v_read = 0.0, 0.0
        cache_write = b * cached_per_token * kb
        # The whole cache is read once per step: K for the scores, V for the weighted sum.
        k_cache, v_cache = b * keys * nkv * qk * kb, b * keys * nkv * v * kb
    q_bytes = q_rows * nh * qk * ab
    o_bytes = q_rows * nh * v * ab

    if cfg.attention == "flash":
        ops.append(
            Op(
                name=f"attention ({'FlashAttention' if cfg.phase == 'prefill' else 'fused decode'})" + suffix,
                flops=2.0 * nh * pairs * (qk + v),
                dtype=adt,
                act_bytes=q_bytes + k_read + v_read + o_bytes,
                kv_bytes=k_cache + v_cache + cache_write,
                count=count,
                launches=2,
                group=group,
                meta={"kind": "attention"},
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
        _ew("attention softmax + mask (naive)" + suffix, scores, SOFTMAX_FLOPS_PER_ELEMENT, 1, 1, ab, count, group),
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


def _mlp_ops(cfg: StepConfig, tokens, count: int, intermediate: int, prefix: str) -> list[Op]:
    m, p = cfg.model, cfg.precision
    h, i = m.hidden_size, intermediate / cfg.tp
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


def _moe_ops(cfg: StepConfig, tokens, count: int) -> list[Op]:
    m, p, tp = cfg.model, cfg.precision, cfg.tp
    moe = m.moe
    h, i = m.hidden_size, moe.expert_intermediate_size / tp
    k, e = moe.experts_per_token, moe.num_experts
    routed = tokens * k
    loaded = expected_experts_loaded(e, k, tokens)
    gated = 2 if m.mlp == "gated" else 1
    ab, wb = p.act_bytes, p.weight_bytes
    ops = [
        _linear("MoE router", tokens, h, e, p, count, "moe", weight_dtype_bytes=ab, launches=3),
        Op(
            name="MoE experts gate+up",
            flops=2.0 * routed * h * gated * i,
            dtype=p.act,
            weight_bytes=loaded * h * gated * i * wb,
            act_bytes=routed * (h + gated * i) * ab,
            count=count,
            launches=2,
            group="moe",
            meta={"kind": "matmul", "experts_loaded": loaded},
        ),
        _ew("MoE experts activation", routed * i, ACTIVATION_FLOPS_PER_ELEMENT[m.mlp], gated, 1, ab, count, "moe"),
        Op(
            name="MoE experts down + combine",
            flops=2.0 * routed * i * h,
            dtype=p.act,
            weight_bytes=loaded * i * h * wb,
            act_bytes=routed * (i + h) * ab + tokens * h * ab,
            count=count,
            launches=2,
            group="moe",
            meta={"kind": "matmul", "experts_loaded": loaded},
        ),
    ]
    if moe.shared_experts:
        ops += _mlp_ops(cfg, tokens, count, moe.shared_experts * moe.expert_intermediate_size, "shared expert")
    return ops


def step_ops(cfg: StepConfig) -> list[Op]:
    """Every op of one forward step, per device; FLOPs and bytes per occurrence (see ``count``)."""
    m, p, tp = cfg.model, cfg.precision, cfg.tp
    L, h = m.num_layers, m.hidden_size
    t = cfg.tokens
    b = np.asarray(cfg.batch, float) * np.ones_like(t)
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
                dtype=p.act,
                weight_bytes=(q_flops_weights + kv_down) * p.weight_bytes * np.ones_like(t),
                act_bytes=t * (h + out) * ab,
                count=L,
                launches=5,
                group="attention",
                meta={"kind": "matmul"},
            )
        )
        rope_elements = t * (nh + 1) * ml.qk_rope_head_dim
    else:
        nkv = kv_heads_per_device(m, tp)
        ops.append(_linear("QKV projection", t, h, (nh + 2 * nkv) * m.head_dim, p, L, "attention"))
        rope_elements = t * (nh + nkv) * m.head_dim
    if m.positional == "rope":
        ops.append(_ew("rotary embedding", rope_elements, ROPE_FLOPS_PER_ELEMENT, 1, 1, ab, L, "attention"))

    local = m.local_layers
    if local:
        ops += _attention_ops(cfg, local, m.sliding_window, "sliding window" if local < L else "")
    if L - local:
        ops += _attention_ops(cfg, L - local, None, "global" if local else "")

    ops.append(_linear("output projection", t, nh * m.v_head_dim, h, p, L, "attention"))
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
        ops += _mlp_ops(cfg, t, m.dense_mlp_layers, m.intermediate_size, "MLP")
    if m.moe_layers:
        ops += _moe_ops(cfg, t, m.moe_layers)
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
    return [Op(**{**op.__dict__, "phase": cfg.phase}) for op in ops]


# ---- memory footprint ----------------------------------------------------------------------
GIB = 2**30
DEFAULT_MEMORY_UTILIZATION = 0.9


def weight_bytes_per_device(model: ModelConfig, precision: Precision, tp: int = 1) -> float:
    """Resident weight bytes on each of ``tp`` devices.

    Linear layers are stored at the weight dtype and split over TP (KV projections replicated
    where there are fewer KV heads than devices; MLA's down-projections replicated). Embeddings,
    the LM head (vocab-parallel), norms and routers stay at the activation storage dtype.
    """
    m, h = model, model.hidden_size
    wb, ab = precision.weight_bytes, precision.act_bytes
    attn = m.attention_params()
    if m.mla:
        ml = m.mla
        replicated = (
            (h * ml.q_lora_rank + ml.q_lora_rank if ml.q_lora_rank else 0)
            + h * (ml.kv_lora_rank + ml.qk_rope_head_dim)
            + ml.kv_lora_rank
        )
    else:
        kv = h * 2 * m.num_kv_heads * m.head_dim
        replicated = kv * kv_heads_per_device(m, tp) / m.num_kv_heads * tp if m.num_kv_heads < tp else 0.0
        attn -= kv if replicated else 0
    linear = m.num_layers * (attn / tp + replicated) + m.dense_mlp_layers * m.mlp_params() / tp
    router = 0.0
    if m.moe:
        total, _ = m.moe_params()
        router = h * m.moe.num_experts
        linear += m.moe_layers * (total - router) / tp
    unquantized = (
        (m.embedding_params() + m.lm_head_params()) / tp
        + (m.num_layers * m.norms_per_layer + 1) * (m.norm_params())
        + m.moe_layers * router
    )
    return linear * wb + unquantized * ab


def kv_cache_bytes_per_device(
    model: ModelConfig, precision: Precision, tp: int, batch: np.ndarray | float, context: np.ndarray | float
) -> np.ndarray:
    """KV-cache bytes on each device for ``batch`` sequences of ``context`` cached tokens.

    Sliding-window layers keep at most ``window`` tokens. MLA's latent is not split by heads,
    so every TP rank holds all of it.
    """
    m = model
    per_layer = (
        m.kv_elements_per_token_per_layer() if m.mla else 2 * kv_heads_per_device(m, tp) * m.head_dim
    ) * precision.kv_bytes
    ctx = np.asarray(context, float)
    local = m.local_layers
    tokens = (m.num_layers - local) * ctx
    if local:
        tokens = tokens + local * np.minimum(ctx, m.sliding_window)
    return np.asarray(batch, float) * tokens * per_layer


def usable_memory_bytes(memory_gb: float, memory_utilization: float = DEFAULT_MEMORY_UTILIZATION) -> float:
    """Capacity a serving engine can use: the vendor's "GB" read as GiB (an "80 GB" H100 exposes
    80 GiB, 81,559 MiB in nvidia-smi), times the memory-utilisation setting."""
    if not 0 < memory_utilization <= 1:
        raise ValueError(f"memory_utilization must be in (0, 1], got {memory_utilization}")
    return memory_gb * GIB * memory_utilization
