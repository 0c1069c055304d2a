"""The building blocks of a step: a linear layer, an elementwise kernel and a tensor-parallel
all-reduce, each one Op."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline.engine import Op
from roofline.workload import Precision

VECTOR = "vector"  # elementwise math: the vector-unit (fp32) peak

# Rough FLOPs per element of elementwise kernels; they never decide a regime, but they are not 0.
NORM_FLOPS_PER_ELEMENT = {"rmsnorm": 4.0, "layernorm": 7.0}
ACTIVATION_FLOPS_PER_ELEMENT = {"gated": 5.0, "dense": 8.0}  # SiLU(x)*y ; tanh-GELU
SOFTMAX_FLOPS_PER_ELEMENT = 5.0
ROPE_FLOPS_PER_ELEMENT = 3.0


# The time breakdown's group for the weight matmuls around attention (QKV, output, MLA up/down and
# absorbed projections): "attention" is the kernel on Q, K, V and the cache, with RoPE and QK norm.
PROJECTIONS = "attention projections"


def elementwise(
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


def linear(
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
        dtype=p.math_dtype,
        weight_bytes=matrices * in_features * out_features * wb * np.ones_like(rows),
        act_bytes=rows * (in_features + out_features) * p.act_bytes,
        count=count,
        launches=launches,
        group=group,
        # n (output) and k (reduction) name the GEMM a kernel table is read at; fp8_scaling which
        # fp8 GEMM table (per-tensor or block-scaled).
        meta={
            "kind": "matmul",
            "m": rows / matrices,
            "n": out_features,
            "k": in_features,
            "matrices": matrices,
            "fp8_scaling": p.fp8_scaling,
            "weight_dtype": p.weight_dtype,
        },
    )


def mla_qkv_precision(p: Precision) -> Precision:
    """The precision MLA's q and kv projections (the down/up projection, the absorbed W_UK and
    W_UV) run in: bf16 for an NVFP4 checkpoint, whose published checkpoints keep them unquantized
    (``roofline.tables.mla.NVFP4_KV_B``), else the checkpoint's own."""
    return replace(p, weight_dtype="bf16", act_dtype="bf16") if p.weight_dtype == "nvfp4" else p


def all_reduce(name: str, tokens, hidden: int, p: Precision, tp: int, count: int) -> Op:
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
        meta={"kind": "communication", "collective": "all_reduce", "message_bytes": message, "tp": tp},
    )
