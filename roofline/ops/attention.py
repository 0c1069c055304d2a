"""Attention proper: the kernel on Q, K, V and the cache, for global, sliding-window, chunked
and MLA layers, fused (FlashAttention-style) or naive."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline.engine import Op
from roofline.models import ModelConfig
from roofline.ops.kernels import PROJECTIONS, SOFTMAX_FLOPS_PER_ELEMENT, elementwise, linear, mla_qkv_precision
from roofline.workload import Workload


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


def _absorb(op: Op, table_op: str, nvfp4_kept: bool) -> Op:
    """An MLA absorbed per-head product, named as the kernel tables time it (``mla_gen_pre``: the
    query through W_UK; ``mla_gen_post``: the output through W_UV)."""
    return replace(op, meta={**op.meta, "mla_bmm": table_op, "nvfp4_kept": nvfp4_kept})


def attention_ops(w: Workload, count: int, local: Local, label: str) -> list[Op]:
    """Attention proper (the kernel on Q, K, V and the cache) for ``count`` layers."""
    m, p, tp = w.model, w.kernel_precision, w.tp
    b = np.asarray(w.batch, float)
    s = np.asarray(w.seq_len, float)
    nh = m.num_heads / tp
    ab, kb = p.act_bytes, p.kv_bytes
    adt = p.attention_dtype
    suffix = f" ({label})" if label else ""
    group = "attention"
    # The shape a measured attention kernel table is read at (``roofline.tables.source``): seq is
    # the prompt in prefill and the tokens cached in decode; work_share scales a part of that kernel.
    shape = {
        "kind": "attention",
        "phase": w.phase,
        "batch": b,
        "seq": s,
        "heads": nh,
        "kv_dtype": p.kv_dtype,
        "local": local[0] if local else "",
        "window": local[1] if local else 0,
        "work_share": 1.0,
    }

    if m.mla and w.phase == "decode":
        r, rope = m.mla.kv_lora_rank, m.mla.qk_rope_head_dim
        keys = _decode_keys(s, local)
        latent = r + rope  # cached per token, shared by every head (and every TP rank)
        qp = mla_qkv_precision(p)  # W_UK and W_UV are kv_b_proj's: bf16 for an NVFP4 checkpoint
        return [
            # Every head has its own W_UK slice (qk_nope x r): all nh of them are read.
            _absorb(
                linear(
                    "MLA query absorb (W_UK)" + suffix,
                    b * nh,
                    m.mla.qk_nope_head_dim,
                    r,
                    qp,
                    count,
                    PROJECTIONS,
                    matrices=nh,
                ),
                "mla_gen_pre",
                qp is not p,
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
                meta={**shape, "mla": (r, rope)},
            ),
            _absorb(
                linear(
                    "MLA output absorb (W_UV)" + suffix,
                    b * nh,
                    r,
                    m.mla.v_head_dim,
                    qp,
                    count,
                    PROJECTIONS,
                    matrices=nh,
                ),
                "mla_gen_post",
                qp is not p,
            ),
        ]

    ops: list[Op] = []
    qk, v = m.qk_head_dim, m.v_head_dim
    if m.mla:  # prefill: rebuild per-head K and V from the latent, then ordinary attention
        nkv = nh
        r = m.mla.kv_lora_rank
        ops.append(
            linear("MLA KV up-projection" + suffix, b * s, r, nh * (m.mla.qk_nope_head_dim + v), p, count, PROJECTIONS)
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
                meta={**shape, "kv_heads": nkv, "head_dim": qk, "parallel": parallel, "mla_prefill": bool(m.mla)},
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
            meta={**shape, "naive": True},
        ),
        elementwise(
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
            meta={**shape, "naive": True},
        ),
    ]
    return ops
